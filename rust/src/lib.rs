//! specscope's compiled scanner (issue 17): the bulk reader's classification of log lines
//! and the plain records' fields, over whole blocks; and the reading of files and `.gz`
//! in blocks, with the limits of `specscope/logs/limits.py`.
//!
//! The Rust side is small and total: it finds and cuts, Python decides. No `unsafe`.
#![forbid(unsafe_code)]

pub mod head;
pub mod header;
pub mod read;
pub mod scan;
pub mod template;
pub mod typed;

#[cfg(feature = "python")]
mod python;

#[cfg(test)]
mod tests;
