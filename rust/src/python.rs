//! `specscope._core`: the scanner and the block reader as Python sees them. Arrays go back as
//! `bytes` of little-endian values (numpy takes them with `frombuffer`, no object per value);
//! the GIL is released while a block is scanned or read.

use pyo3::exceptions::{PyOSError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyList};

use crate::read::{BlockReader, ReadError};
use std::collections::HashMap;

use crate::head::{self, HeadColumn};
use crate::scan::{self, BlockScan, Scanner as Inner, ShapeSpec, Spec};
use crate::typed::{self, Kind, Typed};

fn le<T: Copy, const N: usize>(values: &[T], bytes: fn(T) -> [u8; N]) -> Vec<u8> {
    let mut out = Vec::with_capacity(values.len() * N);
    for v in values {
        out.extend_from_slice(&bytes(*v));
    }
    out
}

fn i8s(values: &[i8]) -> Vec<u8> {
    values.iter().map(|v| v.to_le_bytes()[0]).collect()
}

#[pyclass(frozen, module = "specscope._core")]
struct Scanner {
    inner: Inner,
    threads: usize,
    kinds: Vec<HashMap<String, Kind>>, // per shape: the groups read as their type
}

#[pymethods]
impl Scanner {
    /// literals, literal prefixes, shapes as (literal prefix, full pattern), the longest
    /// per-position list in bytes, and the patterns of the rare paths (ANSI, PREFIX,
    /// INNER_HEAD); `kinds`, per shape, the groups to read as `int`, `float`, `percent` or
    /// `float_list` (the rest come as text); `anchor_literals`, those of the records' anchors
    /// (`Grammar.anchor_literals`; none given: every literal is taken for one).
    #[new]
    #[pyo3(signature = (literals, prefixes, shapes, max_list_bytes, ansi, prefix, inner_head, threads=2, kinds=None, anchor_literals=None))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        literals: Vec<String>,
        prefixes: Vec<String>,
        shapes: Vec<(String, String)>,
        max_list_bytes: usize,
        ansi: String,
        prefix: String,
        inner_head: String,
        threads: usize,
        kinds: Option<Vec<Vec<(String, String)>>>,
        anchor_literals: Option<Vec<String>>,
    ) -> PyResult<Self> {
        let spec = Spec {
            literals,
            anchor_literals: anchor_literals.unwrap_or_default(),
            prefixes,
            shapes: shapes
                .into_iter()
                .map(|(prefix, pattern)| ShapeSpec { prefix, pattern })
                .collect(),
            max_list_bytes,
            ansi,
            prefix,
            inner_head,
        };
        let inner = Inner::new(&spec).map_err(|e| PyValueError::new_err(e.0))?;
        let kinds = kinds
            .unwrap_or_default()
            .into_iter()
            .map(|groups| {
                groups
                    .into_iter()
                    .filter_map(|(name, kind)| Kind::of(&kind).map(|k| (name, k)))
                    .collect()
            })
            .collect();
        Ok(Scanner {
            inner,
            threads,
            kinds,
        })
    }

    /// The lines of `block` classified; `None` if it is not UTF-8 (the caller decodes it
    /// as the line parser does and scans that).
    fn scan<'py>(&self, py: Python<'py>, block: &[u8]) -> PyResult<Option<Bound<'py, PyDict>>> {
        let Ok(text) = std::str::from_utf8(block) else {
            return Ok(None);
        };
        let (found, typed, heads) = py.detach(|| {
            let found = self.inner.scan_parallel(text, self.threads);
            let typed = self.typed(&found);
            let heads = found
                .shapes
                .iter()
                .map(|r| head::columns(&found, r))
                .collect();
            (found, typed, heads)
        });
        to_dict(py, &found, &typed, heads).map(Some)
    }
}

impl Scanner {
    /// Each shape's columns read as their kinds (`None`: left as text).
    fn typed(&self, found: &BlockScan) -> Vec<Vec<Option<Typed>>> {
        found
            .shapes
            .iter()
            .enumerate()
            .map(|(i, rows)| {
                rows.names
                    .iter()
                    .zip(&rows.columns)
                    .map(|(name, column)| {
                        let kind = self.kinds.get(i)?.get(name)?;
                        typed::read(column, *kind)
                    })
                    .collect()
            })
            .collect()
    }
}

fn to_dict<'py>(
    py: Python<'py>,
    s: &BlockScan,
    typed: &[Vec<Option<Typed>>],
    heads: Vec<Vec<(&str, HeadColumn)>>,
) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    let bytes = |v: Vec<u8>| PyBytes::new(py, &v);
    d.set_item("offsets", bytes(le(&s.offsets, i64::to_le_bytes)))?;
    d.set_item("kind", bytes(i8s(&s.kind)))?;
    d.set_item("key", bytes(le(&s.key, i32::to_le_bytes)))?;
    d.set_item("level", PyBytes::new(py, &s.level))?;
    d.set_item("month", PyBytes::new(py, &s.month))?;
    d.set_item("day", PyBytes::new(py, &s.day))?;
    d.set_item("clock", bytes(le(&s.clock, u32::to_le_bytes)))?;
    d.set_item("year", bytes(le(&s.year, i32::to_le_bytes)))?;
    d.set_item("filled", PyBytes::new(py, &s.filled))?;
    d.set_item("procs", PyList::new(py, &s.procs)?)?;
    let shapes = PyList::empty(py);
    let made = PyList::empty(py);
    for ((i, rows), head) in s.shapes.iter().enumerate().zip(heads) {
        let columns = PyDict::new(py);
        for (j, (name, c)) in rows.names.iter().zip(&rows.columns).enumerate() {
            let valid = PyBytes::new(py, &c.valid);
            let column = match typed.get(i).and_then(|t| t.get(j)).and_then(Option::as_ref) {
                Some(Typed::Int(v)) => ("int", bytes(le(v, i64::to_le_bytes)), None, valid),
                Some(Typed::Float(v)) => ("float", bytes(le(v, f64::to_le_bytes)), None, valid),
                Some(Typed::List(o, v)) => (
                    "list",
                    bytes(le(o, i64::to_le_bytes)),
                    Some(bytes(le(v, f64::to_le_bytes))),
                    valid,
                ),
                None => (
                    "text",
                    bytes(le(&c.offsets, i64::to_le_bytes)),
                    Some(PyBytes::new(py, &c.data)),
                    valid,
                ),
            };
            columns.set_item(name, column)?;
        }
        // The records' header columns, in the groups' layout (`core._column` reads both).
        let heads = PyDict::new(py);
        for (name, c) in head {
            let column = (
                "int",
                bytes(le(&c.values, i64::to_le_bytes)),
                None::<Bound<'_, PyBytes>>,
                PyBytes::new(py, &c.valid),
            );
            heads.set_item(name, column)?;
        }
        made.append(heads)?;
        let second = PyBytes::new(py, &rows.second);
        shapes.append((bytes(le(&rows.lines, u32::to_le_bytes)), second, columns))?;
    }
    d.set_item("shapes", shapes)?;
    // Beside `shapes`, not in its tuples: a Python side older than `head.rs` reads on.
    d.set_item("heads", made)?;
    Ok(d)
}

/// A file (plain or gzip, several members too) in blocks of whole lines, lines over the
/// limit emptied and noted by where their `\n` is in the output, as
/// `limits.cap_lines(numbered=False)` and `Source.blocks` give them.
#[pyclass(module = "specscope._core")]
struct Reader {
    inner: BlockReader,
}

#[pymethods]
impl Reader {
    #[new]
    fn new(
        path: &str,
        block_bytes: usize,
        block_lines: usize,
        line_limit: usize,
        gzip_allowed: u64,
    ) -> PyResult<Self> {
        let inner = BlockReader::open(path, block_bytes, block_lines, line_limit, gzip_allowed)
            .map_err(|e| PyOSError::new_err(e.to_string()))?;
        Ok(Reader { inner })
    }

    /// The next block, or `None` at the end. Errors: `("bomb", inflated)`,
    /// `("unreadable", message)` as a ValueError's args.
    fn next_block<'py>(&mut self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyBytes>>> {
        let inner = &mut self.inner;
        match py.detach(|| inner.next_block()) {
            Ok(Some(block)) => Ok(Some(PyBytes::new(py, &block))),
            Ok(None) => Ok(None),
            Err(ReadError::Bomb(n)) => Err(PyValueError::new_err(("bomb", n))),
            Err(ReadError::Unreadable(m)) => Err(PyValueError::new_err(("unreadable", m))),
            Err(ReadError::Io(e)) => Err(PyOSError::new_err(e.to_string())),
        }
    }

    /// Lines left out so far: (offset of their `\n` in the output, length), emptied.
    fn take_long(&mut self) -> Vec<(u64, u64)> {
        std::mem::take(&mut self.inner.long)
    }

    /// What a cut-off or damaged gzip stream left unread (a note), once.
    fn take_notes(&mut self) -> Vec<String> {
        std::mem::take(&mut self.inner.notes)
    }

    /// A gzip stream's content, once all of it is read: (SHA-256 in hex, size); `None`
    /// for a plain file or before the end.
    fn content_digest(&self) -> Option<(String, u64)> {
        let (digest, size) = self.inner.content_digest()?;
        let hex = digest.iter().map(|b| format!("{b:02x}")).collect();
        Some((hex, size))
    }
}

#[pymodule]
fn _core(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<Scanner>()?;
    m.add_class::<Reader>()?;
    m.add("SLOW", scan::SLOW)?;
    m.add("QUIET", scan::QUIET)?;
    m.add("ENVELOPE", scan::ENVELOPE)?;
    m.add("RECORD", scan::RECORD)?;
    m.add("LEVELS", crate::header::LEVELS.to_vec())?;
    Ok(())
}
