//! A plain record's groups as their columns' types, read beside the scan (no GIL) instead
//! of by polars after it: about a third of a block's preparation went to polars' casts.
//!
//! Each reading gives what `specscope/logs/plain.py`'s `convert` gives, on the texts the
//! plain shapes let through (digits, a point, `, ` between list entries): integers as
//! `cast(Int64)`, decimals as `cast(Float64)` (both correctly rounded), a percent as its
//! digits over a power of ten (`digits / 10.0 ** scale`, every factor exact), a list as its
//! entries. A column with any text outside that form is left as text, for polars to read
//! as before; `tests/test_core.py` holds both classifiers' records equal.

use crate::scan::Column;

/// What a group's column holds (`plain.convert`'s kinds).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Int,
    Float,
    Percent,
    FloatList,
}

impl Kind {
    pub fn of(name: &str) -> Option<Kind> {
        match name {
            "int" => Some(Kind::Int),
            "float" => Some(Kind::Float),
            "percent" => Some(Kind::Percent),
            "float_list" => Some(Kind::FloatList),
            _ => None,
        }
    }
}

/// A column read as its type; rows that are null (the `valid` of the text column) hold 0
/// or an empty list.
#[derive(Debug, Clone, PartialEq)]
pub enum Typed {
    Int(Vec<i64>),
    Float(Vec<f64>),
    List(Vec<i64>, Vec<f64>), // offsets (one more than rows), entries
}

/// Powers of ten that are exact in an f64 (up to 10^22).
const POW10: [f64; 23] = [
    1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11, 1e12, 1e13, 1e14, 1e15, 1e16,
    1e17, 1e18, 1e19, 1e20, 1e21, 1e22,
];

fn digits(b: &[u8]) -> bool {
    !b.is_empty() && b.iter().all(u8::is_ascii_digit)
}

fn int(b: &[u8]) -> Option<i64> {
    if !digits(b) || b.len() > 18 {
        return None;
    }
    Some(b.iter().fold(0i64, |n, d| n * 10 + i64::from(d - b'0')))
}

/// `digits` or `digits.digits`.
fn decimal(b: &[u8]) -> Option<f64> {
    let ok = match memchr::memchr(b'.', b) {
        Some(p) => digits(&b[..p]) && digits(&b[p + 1..]),
        None => digits(b),
    };
    if !ok || b.len() > 64 {
        return None;
    }
    std::str::from_utf8(b).ok()?.parse().ok()
}

fn percent(b: &[u8]) -> Option<f64> {
    let p = memchr::memchr(b'.', b)?;
    let (whole, frac) = (&b[..p], &b[p + 1..]);
    if !digits(whole) || !digits(frac) || whole.len() + frac.len() > 15 {
        return None;
    }
    let n = whole
        .iter()
        .chain(frac)
        .fold(0i64, |n, d| n * 10 + i64::from(d - b'0'));
    Some(n as f64 / *POW10.get(frac.len() + 2)?)
}

/// The column read as `kind`, or `None` when any of its texts is not of the plain form.
pub fn read(column: &Column, kind: Kind) -> Option<Typed> {
    let rows = column.valid.len();
    let text = |r: usize| -> Option<&[u8]> {
        let a = usize::try_from(*column.offsets.get(r)?).ok()?;
        let b = usize::try_from(*column.offsets.get(r + 1)?).ok()?;
        column.data.get(a..b)
    };
    match kind {
        Kind::Int | Kind::Float | Kind::Percent => {
            let mut ints = Vec::new();
            let mut floats = Vec::new();
            for r in 0..rows {
                let t = if column.valid[r] != 0 {
                    Some(text(r)?)
                } else {
                    None
                };
                match kind {
                    Kind::Int => ints.push(t.map_or(Some(0), int)?),
                    Kind::Float => floats.push(t.map_or(Some(0.0), decimal)?),
                    _ => floats.push(t.map_or(Some(0.0), percent)?),
                }
            }
            Some(if kind == Kind::Int {
                Typed::Int(ints)
            } else {
                Typed::Float(floats)
            })
        }
        Kind::FloatList => {
            let mut offsets = vec![0i64];
            let mut values = Vec::new();
            for r in 0..rows {
                if column.valid[r] != 0 {
                    let t = text(r)?;
                    for entry in t.split(|&c| c == b',') {
                        // Entries are ", "-separated: each after the first starts with a space.
                        let entry = if values.len() as i64 == *offsets.last()? {
                            entry
                        } else {
                            entry.strip_prefix(b" ")?
                        };
                        values.push(decimal(entry)?);
                    }
                }
                offsets.push(values.len() as i64);
            }
            Some(Typed::List(offsets, values))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// Any texts: read as Rust's own parsers read the plain forms, or left as text.
        #[test]
        fn any_text_is_read_or_left(texts in proptest::collection::vec(
            proptest::option::of("[0-9]{0,20}(\\.[0-9]{0,4})?|[0-9., e+-]{0,12}|\\PC{0,6}"), 0..6)
        ) {
            let refs: Vec<Option<&str>> = texts.iter().map(|t| t.as_deref()).collect();
            let c = column(&refs);
            for kind in [Kind::Int, Kind::Float, Kind::Percent, Kind::FloatList] {
                match read(&c, kind) {
                    Some(Typed::Int(v)) => {
                        for (t, n) in refs.iter().zip(&v) {
                            prop_assert_eq!(t.map_or(0, |t| t.parse::<i64>().unwrap()), *n);
                        }
                    }
                    Some(Typed::Float(v)) if kind == Kind::Float => {
                        for (t, x) in refs.iter().zip(&v) {
                            prop_assert_eq!(t.map_or(0.0, |t| t.parse::<f64>().unwrap()), *x);
                        }
                    }
                    Some(Typed::List(o, v)) => {
                        prop_assert_eq!(o.len(), refs.len() + 1);
                        prop_assert_eq!(*o.last().unwrap() as usize, v.len());
                    }
                    _ => {}
                }
            }
        }
    }

    fn column(texts: &[Option<&str>]) -> Column {
        let mut c = Column {
            offsets: vec![0],
            ..Column::default()
        };
        for t in texts {
            if let Some(t) = t {
                c.data.extend_from_slice(t.as_bytes());
            }
            c.offsets.push(c.data.len() as i64);
            c.valid.push(u8::from(t.is_some()));
        }
        c
    }

    #[test]
    fn plain_texts_are_read_and_others_left_as_text() {
        let c = column(&[Some("007"), None, Some("123456789012345")]);
        assert_eq!(
            read(&c, Kind::Int),
            Some(Typed::Int(vec![7, 0, 123456789012345]))
        );
        assert_eq!(read(&column(&[Some("1.5"), Some("-1")]), Kind::Int), None);
        assert_eq!(
            read(&column(&[Some("2.50"), Some("17")]), Kind::Float),
            Some(Typed::Float(vec![2.5, 17.0]))
        );
        assert_eq!(read(&column(&[Some("1e5")]), Kind::Float), None);
        assert_eq!(read(&column(&[Some(".5")]), Kind::Float), None);
        assert_eq!(
            read(&column(&[Some("38.8"), Some("0.0")]), Kind::Percent),
            Some(Typed::Float(vec![0.388, 0.0]))
        );
        assert_eq!(read(&column(&[Some("38")]), Kind::Percent), None);
        assert_eq!(
            read(
                &column(&[Some("0.500, 1.000"), None, Some("0.125")]),
                Kind::FloatList
            ),
            Some(Typed::List(vec![0, 2, 2, 3], vec![0.5, 1.0, 0.125]))
        );
        assert_eq!(read(&column(&[Some("0.5,0.5")]), Kind::FloatList), None);
        assert_eq!(read(&column(&[Some("0.5, ")]), Kind::FloatList), None);
    }
}
