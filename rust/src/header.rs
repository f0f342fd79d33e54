//! The log headers the bulk reader takes, parsed by hand instead of by a regex per line.
//!
//! Each parser is written against one pattern of `specscope/logs/bulk.py` (`HEAD`, `DATED`,
//! `UNDATED`, `PREFIX`, quoted in `tests.rs` and checked there against the `regex` crate on
//! any input), with the same leftmost-first choices. The patterns' classes are Unicode
//! (`\s`, `\d`, `\w`): where the answer could depend on a byte that is not ASCII, the
//! parser says so (`NotAscii`) and the caller asks the regex.

/// The answer depends on a character that is not ASCII: ask the regex.
#[derive(Debug, PartialEq, Eq)]
pub struct NotAscii;

/// `(Proc pid=N) ` and what the dated header adds, as offsets into the line.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Header {
    pub proc_start: usize,
    pub proc_end: usize,
    pub pid: u32,
    pub level: u8, // index into LEVELS + 1; 0: undated
    pub month: u8,
    pub day: u8,
    pub clock: u32,  // hh * 10000 + mm * 100 + ss
    pub body: usize, // where the message starts
}

/// The levels of `_LEVELS`, in the order the alternation tries them (WARN before WARNING
/// is decided by what follows, as the regex backtracks).
pub const LEVELS: [&str; 6] = ["DEBUG", "INFO", "WARNING", "WARN", "ERROR", "CRITICAL"];

fn digit(s: &[u8], i: usize) -> Option<u32> {
    match s.get(i) {
        Some(b) if b.is_ascii_digit() => Some(u32::from(b - b'0')),
        _ => None,
    }
}

fn byte(s: &[u8], i: usize, want: u8) -> bool {
    s.get(i) == Some(&want)
}

/// Is the character starting at `i` not white space (`\S`)? `None`: no character there.
fn non_space_at(line: &str, i: usize) -> Option<bool> {
    line.get(i..)?.chars().next().map(|c| !c.is_whitespace())
}

/// `^\((?P<proc>[A-Za-z][A-Za-z0-9_]{0,60}) pid=(?P<pid>[0-9]{1,9})\) `: the end of it.
fn head(s: &[u8], h: &mut Header) -> Option<usize> {
    if !byte(s, 0, b'(') || !s.get(1)?.is_ascii_alphabetic() {
        return None;
    }
    let mut i = 2;
    while i < s.len() && i - 2 < 60 && (s[i].is_ascii_alphanumeric() || s[i] == b'_') {
        i += 1;
    }
    h.proc_start = 1;
    h.proc_end = i;
    if !s[i..].starts_with(b" pid=") {
        return None;
    }
    i += 5;
    let start = i;
    let mut pid = 0u32;
    while let Some(d) = digit(s, i) {
        if i - start == 9 {
            return None; // a tenth digit where ')' must be
        }
        pid = pid * 10 + d;
        i += 1;
    }
    if i == start || !s[i..].starts_with(b") ") {
        return None;
    }
    h.pid = pid;
    Some(i + 2)
}

fn two(s: &[u8], i: usize) -> Option<u32> {
    Some(digit(s, i)? * 10 + digit(s, i + 1)?)
}

/// The dated header `DATED`: head, level, `MM-DD HH:MM:SS [file:N] `, then a character that
/// is not white space.
pub fn dated(line: &str) -> Option<Header> {
    let s = line.as_bytes();
    let mut h = Header::default();
    let mut i = head(s, &mut h)?;
    let mut level = 0;
    for (n, name) in LEVELS.iter().enumerate() {
        if s[i..].starts_with(name.as_bytes()) && byte(s, i + name.len(), b' ') {
            level = n as u8 + 1;
            i += name.len() + 1;
            break;
        }
    }
    if level == 0 {
        return None;
    }
    let month = two(s, i)?;
    let day = two(s, i + 3)?;
    if !(byte(s, i + 2, b'-') && byte(s, i + 5, b' ')) {
        return None;
    }
    let month_ok = (s[i] == b'0' && month != 0) || (s[i] == b'1' && month <= 12);
    let day_ok = match s[i + 3] {
        b'0' => day != 0,
        b'1' | b'2' => true,
        b'3' => day <= 31,
        _ => false,
    };
    if !month_ok || !day_ok {
        return None;
    }
    i += 6;
    let (hh, mm, ss) = (two(s, i)?, two(s, i + 3)?, two(s, i + 6)?);
    let hour_ok = matches!(s[i], b'0' | b'1') || (s[i] == b'2' && hh <= 23);
    if !(hour_ok
        && byte(s, i + 2, b':')
        && s[i + 3] <= b'5'
        && byte(s, i + 5, b':')
        && s[i + 6] <= b'5'
        && byte(s, i + 8, b' ')
        && byte(s, i + 9, b'['))
    {
        return None;
    }
    i += 10;
    let start = i;
    while i < s.len() && (s[i].is_ascii_alphanumeric() || b"_./-".contains(&s[i])) {
        i += 1;
    }
    if i == start || i - start > 200 || !byte(s, i, b':') {
        return None;
    }
    i += 1;
    let start = i;
    while digit(s, i).is_some() {
        i += 1;
    }
    if i == start || i - start > 6 || !s[i..].starts_with(b"] ") {
        return None;
    }
    i += 2;
    if non_space_at(line, i) != Some(true) {
        return None;
    }
    h.level = level;
    h.month = month as u8;
    h.day = day as u8;
    h.clock = hh * 10000 + mm * 100 + ss;
    h.body = i;
    Some(h)
}

/// `UNDATED`: the head, then a message that starts with a character that is not white space.
pub fn undated(line: &str) -> Option<Header> {
    let mut h = Header::default();
    let i = head(line.as_bytes(), &mut h)?;
    if non_space_at(line, i) != Some(true) {
        return None;
    }
    h.body = i;
    Some(h)
}

fn ascii(s: &[u8], i: usize) -> Result<Option<u8>, NotAscii> {
    match s.get(i) {
        Some(&b) if b >= 0x80 => Err(NotAscii),
        other => Ok(other.copied()),
    }
}

fn space(b: Option<u8>) -> bool {
    matches!(b, Some(b'\t' | b'\n' | 0x0b | 0x0c | b'\r' | b' '))
}

fn is_digit(b: Option<u8>) -> bool {
    matches!(b, Some(b'0'..=b'9'))
}

fn spaces(s: &[u8], mut i: usize) -> Result<usize, NotAscii> {
    while space(ascii(s, i)?) {
        i += 1;
    }
    Ok(i)
}

/// `PREFIX`: a compose service name and a docker/kubectl/CRI timestamp, each optional.
/// Returns how much of the line they take and the timestamp's year (digits as printed).
pub fn prefix(s: &[u8]) -> Result<(usize, Option<u32>), NotAscii> {
    let mut pos = 0;
    // [A-Za-z0-9][\w.-]{0,80}\s*\|\s?
    if ascii(s, 0)?.is_some_and(|b| b.is_ascii_alphanumeric()) {
        let mut i = 1;
        while i <= 80
            && ascii(s, i)?.is_some_and(|b| b.is_ascii_alphanumeric() || b"_.-".contains(&b))
        {
            i += 1;
        }
        i = spaces(s, i)?;
        if ascii(s, i)? == Some(b'|') {
            i += 1;
            if space(ascii(s, i)?) {
                i += 1;
            }
            pos = i;
        }
    }
    match stamp(s, pos)? {
        Some((end, year)) => Ok((end, Some(year))),
        None => Ok((pos, None)),
    }
}

/// `(\d{4})-\d\d-\d\dT\d\d:\d\d:\d\d(?:[.,]\d+)?(?:Z|[+-]\d\d:?\d\d)?(?:\s+(?:stdout|stderr)\s+[FP])?\s+`
fn stamp(s: &[u8], at: usize) -> Result<Option<(usize, u32)>, NotAscii> {
    let mut year = 0;
    for (k, want) in b"dddd-dd-ddTdd:dd:dd".iter().enumerate() {
        let b = ascii(s, at + k)?;
        if *want == b'd' {
            if !is_digit(b) {
                return Ok(None);
            }
            if k < 4 {
                year = year * 10 + u32::from(b.unwrap_or(b'0') - b'0');
            }
        } else if b != Some(*want) {
            return Ok(None);
        }
    }
    let mut i = at + 19;
    if matches!(ascii(s, i)?, Some(b'.' | b',')) && is_digit(ascii(s, i + 1)?) {
        i += 1;
        while is_digit(ascii(s, i)?) {
            i += 1;
        }
    }
    match ascii(s, i)? {
        Some(b'Z') => i += 1,
        Some(b'+' | b'-') if is_digit(ascii(s, i + 1)?) && is_digit(ascii(s, i + 2)?) => {
            let j = if ascii(s, i + 3)? == Some(b':') {
                i + 4
            } else {
                i + 3
            };
            if is_digit(ascii(s, j)?) && is_digit(ascii(s, j + 1)?) {
                i = j + 2;
            }
        }
        _ => {}
    }
    // (?:\s+(?:stdout|stderr)\s+[FP])? taken only if white space follows it.
    let j = spaces(s, i)?;
    if j > i && (s[j..].starts_with(b"stdout") || s[j..].starts_with(b"stderr")) {
        let k = spaces(s, j + 6)?;
        if k > j + 6 && matches!(ascii(s, k)?, Some(b'F' | b'P')) && space(ascii(s, k + 1)?) {
            i = k + 1;
        }
    }
    let end = spaces(s, i)?;
    Ok(if end > i { Some((end, year)) } else { None })
}

/// Does `(?:LEVELS)\s+\d\d-\d\d` match where a level word ends at `i`?
pub fn dated_after(s: &[u8], i: usize) -> Result<bool, NotAscii> {
    let j = spaces(s, i)?;
    if j == i {
        return Ok(false);
    }
    for k in [0, 1, 3, 4] {
        if !is_digit(ascii(s, j + k)?) {
            return Ok(false);
        }
    }
    Ok(ascii(s, j + 2)? == Some(b'-'))
}
