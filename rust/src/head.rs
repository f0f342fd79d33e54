//! A shape's records' header columns, made beside the scan (issue 17): the line in the
//! block, the order of the records on it, the lines it goes on over, its process, and its
//! timestamp's parts, each as whole columns with their validity. Python gathered them per
//! row from the per-line arrays before (numpy's gathers and the `HH:MM:SS` text: 0.1-0.15
//! CPU s per 100 MB of server log).

use crate::scan::{BlockScan, Column, ShapeRows};

/// One header column: integers (`i64`, a validity byte each) or text (`_time`).
#[derive(Debug, Clone, PartialEq)]
pub enum HeadColumn {
    Int(Vec<i64>, Vec<u8>),
    Text(Column),
}

/// The columns of `rows` (records of one shape in `scan`), named as the bulk reader's
/// frames name them (`core.prepare_block`), in its order: `_i`, `_o` (two records glued
/// on a line: the first first), `_n`, `_key`, `_month`, `_day`, `_time`, `_year`. The
/// timestamp's parts are null where the line has no date (`month` 0); `_year` where the
/// line printed none (-1).
pub fn columns(scan: &BlockScan, rows: &ShapeRows) -> Vec<(&'static str, HeadColumn)> {
    let n = rows.lines.len();
    let at = || rows.lines.iter().map(|&l| l as usize);
    let all = vec![1u8; n];
    let dated: Vec<u8> = at().map(|l| u8::from(scan.month[l] > 0)).collect();
    let int = |v: Vec<i64>, valid: Vec<u8>| HeadColumn::Int(v, valid);
    let mut time = Column {
        offsets: Vec::with_capacity(n + 1),
        data: Vec::with_capacity(8 * n),
        valid: dated.clone(),
    };
    time.offsets.push(0);
    for l in at() {
        let c = scan.clock[l];
        for (i, part) in [c / 10000, c / 100 % 100, c % 100].into_iter().enumerate() {
            if i > 0 {
                time.data.push(b':');
            }
            // As numpy's uint8 took them (a clock is hh*10000 + mm*100 + ss, each < 100).
            time.data.push((48 + part / 10) as u8);
            time.data.push((48 + part % 10) as u8);
        }
        time.offsets.push(time.data.len() as i64);
    }
    vec![
        ("_i", int(at().map(|l| l as i64).collect(), all.clone())),
        (
            "_o",
            int(
                at().zip(&rows.second)
                    .map(|(l, m)| 2 * l as i64 + i64::from(m & 1))
                    .collect(),
                all.clone(),
            ),
        ),
        (
            "_n",
            int(
                rows.second.iter().map(|m| i64::from(m >> 1)).collect(),
                all.clone(),
            ),
        ),
        (
            "_key",
            int(at().map(|l| i64::from(scan.key[l])).collect(), all),
        ),
        (
            "_month",
            int(
                at().map(|l| i64::from(scan.month[l])).collect(),
                dated.clone(),
            ),
        ),
        (
            "_day",
            int(at().map(|l| i64::from(scan.day[l])).collect(), dated),
        ),
        ("_time", HeadColumn::Text(time)),
        (
            "_year",
            int(
                at().map(|l| i64::from(scan.year[l])).collect(),
                at().map(|l| u8::from(scan.year[l] >= 0)).collect(),
            ),
        ),
    ]
}
