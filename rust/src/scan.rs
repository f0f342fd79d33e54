//! One block of a log: every line classified as `bulk.py`'s polars pass classifies it
//! (`_classify`), the plain records' groups cut out as string columns.
//!
//! What the scanner looks for comes from the definitions (Python compiles them into a
//! [`Spec`]): the literals that make a line worth a look, their prefixes (a line cut inside
//! one), and each plain shape's regex. Lines are found with `memchr`, literals with
//! Aho-Corasick; a shape's regex runs only on messages that start with its literal prefix.
//! Everything here is total: any bytes give a [`BlockScan`], never a panic.

use std::collections::HashMap;
use std::sync::OnceLock;

use aho_corasick::{AhoCorasick, MatchKind};
use memchr::{memchr, memchr2, memchr3, memmem};
use regex::Regex;
use regex_automata::nfa::thompson::backtrack::{self, BoundedBacktracker};
use regex_automata::util::captures::Captures;
use regex_automata::{Anchored, Input};

use crate::header::{self, LEVELS};
use crate::template::Template;

pub const SLOW: i8 = 0;
pub const QUIET: i8 = 1;
pub const ENVELOPE: i8 = 2;
pub const RECORD: i8 = 3;
/// The rest of the record on the line before, which a terminal's width cut
/// (`Scanner::wrapped`): read with it, nothing of its own.
pub const REST: i8 = -1;

/// A plain shape as Python compiled it.
#[derive(Debug, Clone)]
pub struct ShapeSpec {
    /// The literal start of the message: other messages skip the regex.
    pub prefix: String,
    /// `^(?P<__m>)` + the shape's pattern + `$`, as `bulk.py` runs it.
    pub pattern: String,
}

/// What the definitions ask the scanner to find, and the patterns its fallbacks run.
#[derive(Debug, Clone)]
pub struct Spec {
    pub literals: Vec<String>,
    /// The literals of the records' anchors (`Grammar.anchor_literals`): where none is in
    /// the rest of a wrapped record, the line parser offers it as one piece. Empty: every
    /// literal counts as one.
    pub anchor_literals: Vec<String>,
    pub prefixes: Vec<String>,
    pub shapes: Vec<ShapeSpec>,
    /// The per-position list of a record is at most this many bytes (`plain.clean_enough`).
    pub max_list_bytes: usize,
    pub ansi: String,
    pub prefix: String,
    pub inner_head: String,
}

#[derive(Debug)]
pub struct SpecError(pub String);

struct Shape {
    prefix: Vec<u8>,
    regex: Regex,
    // The same pattern run by the bounded backtracker alone: the meta engine's captures
    // first run two DFA passes and then this (1.5 against 2.7 µs a record); messages too
    // long for its memory go to `regex`.
    backtracker: BoundedBacktracker,
    // The groups read in one pass where the text decides every choice (`template.rs`);
    // `None`: the backtracker reads them.
    template: Option<Template>,
    /// (column name, group index), `__m` left out.
    groups: Vec<(String, usize)>,
    marker: usize,
    list: Option<usize>, // the group of `per_position_rate`
}

pub struct Scanner {
    literals: AhoCorasick,
    anchors: AhoCorasick,
    levels: AhoCorasick,
    ends: Vec<Vec<Vec<u8>>>, // literal prefixes by their last byte
    shapes: Vec<Shape>,
    max_list_bytes: usize,
    ansi: Regex,
    // Compiled when a line first needs it (a prefix with bytes that are not ASCII): its
    // Unicode `\w{0,80}` makes an NFA of 4.5 MB, most of a scanner, and a scanner is kept
    // for the process (`bulkplan.plan_for`), through the store's write. `None`: it did not
    // compile (past the regex crate's size limit), so such lines go to the line parser.
    prefix: OnceLock<Option<Regex>>,
    prefix_pattern: String,
    inner_head: Regex,
}

/// One column of group texts (Arrow's string layout).
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Column {
    pub offsets: Vec<i64>,
    pub data: Vec<u8>,
    pub valid: Vec<u8>,
}

impl Column {
    fn new() -> Self {
        Column {
            offsets: vec![0],
            ..Column::default()
        }
    }

    fn push(&mut self, text: Option<&str>) {
        if let Some(t) = text {
            self.data.extend_from_slice(t.as_bytes());
        }
        self.offsets.push(self.data.len() as i64);
        self.valid.push(u8::from(text.is_some()));
    }

    fn append(&mut self, other: &Column) {
        let base = *self.offsets.last().unwrap_or(&0);
        self.offsets
            .extend(other.offsets.iter().skip(1).map(|o| o + base));
        self.data.extend_from_slice(&other.data);
        self.valid.extend_from_slice(&other.valid);
    }
}

/// The records of one shape in a block.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct ShapeRows {
    pub lines: Vec<u32>,
    /// Bit 0: the second record of a line that holds two glued (`Scanner::glued`); bit 1
    /// (2): a record whose text goes on over the next line (`Scanner::wrapped`).
    pub second: Vec<u8>,
    pub names: Vec<String>,
    pub columns: Vec<Column>,
}

/// A block, line by line (`offsets` has one more entry than there are lines).
#[derive(Debug, Default, Clone, PartialEq)]
pub struct BlockScan {
    pub offsets: Vec<i64>,
    pub kind: Vec<i8>,
    pub key: Vec<i32>, // the line's process, numbered from 1 in order of appearance; 0: none
    pub procs: Vec<(String, u32)>,
    pub level: Vec<u8>,
    pub month: Vec<u8>,
    pub day: Vec<u8>,
    pub clock: Vec<u32>,
    pub year: Vec<i32>,  // -1: none
    pub filled: Vec<u8>, // holds a character that is not white space
    pub shapes: Vec<ShapeRows>,
}

impl BlockScan {
    /// A line taken as the rest of the record before it: no header, nothing of its own.
    fn push_rest(&mut self) {
        self.kind.push(REST);
        self.key.push(0);
        self.level.push(0);
        self.month.push(0);
        self.day.push(0);
        self.clock.push(0);
        self.year.push(-1);
        self.filled.push(1);
    }
}

fn build(patterns: &[String]) -> Result<AhoCorasick, SpecError> {
    AhoCorasick::builder()
        .match_kind(MatchKind::LeftmostFirst)
        .build(patterns)
        .map_err(|e| SpecError(format!("literals: {e}")))
}

fn compile(pattern: &str) -> Result<Regex, SpecError> {
    Regex::new(pattern).map_err(|e| SpecError(format!("bad regex {pattern:?}: {e}")))
}

/// A pattern compiled later: its syntax is checked now, as `Regex::new` parses it.
fn checked(pattern: &str) -> Result<String, SpecError> {
    regex_syntax::Parser::new()
        .parse(pattern)
        .map_err(|e| SpecError(format!("bad regex {pattern:?}: {e}")))?;
    Ok(pattern.to_string())
}

impl Scanner {
    pub fn new(spec: &Spec) -> Result<Scanner, SpecError> {
        Scanner::build(spec, true)
    }

    /// `templates: false` reads every shape with the backtracker (the reference the
    /// templates are held to).
    pub fn build(spec: &Spec, templates: bool) -> Result<Scanner, SpecError> {
        let mut literals = spec.literals.clone();
        literals.push("pid=".into());
        let levels: Vec<String> = LEVELS.iter().map(|s| s.to_string()).collect();
        let mut ends = vec![Vec::new(); 256];
        for p in &spec.prefixes {
            if let Some(&last) = p.as_bytes().last() {
                ends[usize::from(last)].push(p.as_bytes().to_vec());
            }
        }
        let mut shapes = Vec::new();
        for s in &spec.shapes {
            let regex = compile(&s.pattern)?;
            let backtracker = BoundedBacktracker::builder()
                .configure(BoundedBacktracker::config().visited_capacity(1 << 20))
                .build(&s.pattern)
                .map_err(|e| SpecError(format!("bad regex {:?}: {e}", s.pattern)))?;
            let mut groups = Vec::new();
            let mut marker = None;
            let mut list = None;
            for (i, name) in regex.capture_names().enumerate() {
                match name {
                    Some("__m") => marker = Some(i),
                    Some(n) => {
                        if n == "per_position_rate" {
                            list = Some(i);
                        }
                        groups.push((n.to_string(), i));
                    }
                    None => {}
                }
            }
            let marker =
                marker.ok_or_else(|| SpecError(format!("no __m group in {:?}", s.pattern)))?;
            shapes.push(Shape {
                prefix: s.prefix.as_bytes().to_vec(),
                regex,
                backtracker,
                template: if templates {
                    Template::new(&s.pattern)
                } else {
                    None
                },
                groups,
                marker,
                list,
            });
        }
        let anchors = if spec.anchor_literals.is_empty() {
            &literals
        } else {
            &spec.anchor_literals
        };
        Ok(Scanner {
            anchors: build(anchors)?,
            literals: build(&literals)?,
            levels: build(&levels)?,
            ends,
            shapes,
            max_list_bytes: spec.max_list_bytes,
            ansi: compile(&spec.ansi)?,
            prefix: OnceLock::new(),
            prefix_pattern: checked(&spec.prefix)?,
            inner_head: compile(&spec.inner_head)?,
        })
    }

    /// Classify every line of `text` (whole lines; the last may lack its `\n`).
    pub fn scan(&self, text: &str) -> BlockScan {
        let mut out = self.empty();
        let bytes = text.as_bytes();
        let mut keys = Keys::default();
        let mut caches = self.caches();
        // Where the line from `from` ends, and where the one after it starts.
        let line = |from: usize| {
            let end = memchr(b'\n', &bytes[from..]).map_or(bytes.len(), |i| from + i);
            (end, (end + 1).min(bytes.len()))
        };
        out.offsets.push(0);
        let mut start = 0;
        while start < bytes.len() {
            let (end, after) = line(start);
            let next = (after < bytes.len()).then(|| {
                let (e, a) = line(after);
                (&text[after..e], a)
            });
            let took = self.line(
                &mut out,
                &text[start..end],
                next.map(|n| n.0),
                &mut keys,
                &mut caches,
            );
            out.offsets.push(after as i64);
            start = after;
            if let (true, Some((_, a))) = (took, next) {
                out.push_rest();
                out.offsets.push(a as i64);
                start = a;
            }
        }
        out
    }

    fn empty(&self) -> BlockScan {
        BlockScan {
            shapes: self
                .shapes
                .iter()
                .map(|s| ShapeRows {
                    lines: Vec::new(),
                    second: Vec::new(),
                    names: s.groups.iter().map(|g| g.0.clone()).collect(),
                    columns: vec![Column::new(); s.groups.len()],
                })
                .collect(),
            ..BlockScan::default()
        }
    }

    /// Two halves of a block scanned on two threads give what one scan gives.
    pub fn scan_parallel(&self, text: &str, threads: usize) -> BlockScan {
        if threads < 2 || text.len() < (1 << 20) {
            return self.scan(text);
        }
        let mid = text.len() / 2;
        let b = text.as_bytes();
        let mut cut = match memchr(b'\n', &b[mid..]) {
            Some(i) => mid + i + 1,
            None => return self.scan(text),
        };
        // Not between a record's line and the rest of it (`wrapped`: a rest never starts
        // with '(' behind its prefixes; a line that does not is no record's first line
        // either, so the line after it is no rest).
        let opens =
            |at: usize| peeled(&b[at..]).is_some_and(|(cut, _)| b.get(at + cut) == Some(&b'('));
        if cut < b.len() && !opens(cut) {
            match memchr(b'\n', &b[cut..]) {
                Some(i) => cut += i + 1,
                None => return self.scan(text),
            }
        }
        let (a, b) = std::thread::scope(|s| {
            let first = s.spawn(|| self.scan(&text[..cut]));
            let second = self.scan(&text[cut..]);
            (first.join(), second)
        });
        match a {
            Ok(a) => merge(a, b, cut as i64),
            Err(_) => self.scan(text), // a panic cannot happen; scanning again is the answer
        }
    }

    fn caches(&self) -> Caches {
        let per_shape = self
            .shapes
            .iter()
            .map(|s| {
                (
                    s.backtracker.create_cache(),
                    s.backtracker.create_captures(),
                )
            })
            .collect();
        (Vec::new(), per_shape)
    }

    /// Classify `raw`; true when its record went on over `next`, which it took.
    fn line(
        &self,
        out: &mut BlockScan,
        raw: &str,
        next: Option<&str>,
        keys: &mut Keys,
        caches: &mut Caches,
    ) -> bool {
        let rb = raw.as_bytes();
        let has_cr = memchr(b'\r', rb).is_some();
        // What the line parser strips first: colour (rare: a regex), then a container
        // timestamp or compose service name (by hand; the regex when not ASCII).
        let cleaned;
        let coloured = memchr(0x1b, rb).is_some();
        let mut clean: &str = raw;
        if coloured {
            cleaned = self.ansi.replace_all(raw, "").into_owned();
            clean = &cleaned;
        }
        let mut year = -1;
        let mut odd_year = false; // digits that are not ASCII: the line parser reads those
        let mut unread = false; // the prefix's regex did not compile: the line parser's
        let mut by_regex = false; // a prefix that is not ASCII: no record wrapped behind it
                                  // Prefixes stack (`docker logs -t` of a log that a container already stamped): the
                                  // line parser peels up to six decorations (`clean.clean_line`), the year of the
                                  // first stamp kept; each peel here takes at most two of them.
        for _ in 0..PEELS {
            if clean.starts_with('(') {
                break;
            }
            let (cut, y) = match header::prefix(clean.as_bytes()) {
                Ok(found) => found,
                Err(header::NotAscii) => {
                    by_regex = true;
                    match self.prefix_by_regex(clean) {
                        Some((cut, y, odd)) => {
                            odd_year |= odd;
                            (cut, y)
                        }
                        None => {
                            unread = true;
                            (0, None)
                        }
                    }
                }
            };
            if let (Some(y), -1) = (y, year) {
                year = y as i32;
            }
            clean = &clean[cut..];
            if cut == 0 {
                break;
            }
        }
        let cb = clean.as_bytes();
        // `_WRAPPED`: what the line parser cleans away or reads as more than one line.
        let plain_chars = memchr3(0x1b, b'\r', b'`', cb).is_none()
            && memchr3(b'*', b'<', 0xef, cb).is_none_or(|_| !wide_or_marked(cb));
        let candidate = plain_chars
            && !has_cr
            && !odd_year
            && !unread
            && !clean.chars().next_back().is_some_and(char::is_whitespace);
        let head = if candidate {
            header::dated(clean).or_else(|| header::undated(clean))
        } else {
            None
        };
        let ok_line = !self.ends_in_literal(cb);
        // A line with a header has `pid=` (a literal) in it: asked only of the others (and
        // of coloured lines, whose header may have been pieced together by the cleaning).
        let no_literal = (head.is_none() || coloured)
            && !raw.starts_with('{')
            && !has_cr
            && !self.literals.is_match(raw);
        let mut kind = if no_literal && ok_line && !unread {
            QUIET
        } else {
            SLOW
        };
        let mut key = 0;
        let mut filled = raw.chars().any(|c| !c.is_whitespace());
        let mut took = false;
        if let Some(h) = &head {
            let body = &clean[h.body..];
            let proc = &clean[h.proc_start..h.proc_end];
            key = keys.of(&mut out.procs, proc, h.pid);
            if ok_line && (self.shape(out, body, caches) || self.glued(out, h, proc, body, caches))
            {
                kind = RECORD;
            } else if next.is_some_and(|rest| {
                !coloured && !by_regex && self.wrapped(out, h, body, year, rest, caches)
            }) {
                kind = RECORD;
                took = true;
            } else if ok_line && self.quiet_body(body) {
                kind = ENVELOPE;
            }
            filled = true;
        }
        let h = head.unwrap_or_default();
        out.kind.push(kind);
        out.key.push(key);
        out.level.push(h.level);
        out.month.push(h.month);
        out.day.push(h.day);
        out.clock.push(h.clock);
        out.year.push(year);
        out.filled.push(u8::from(filled));
        took
    }

    /// The prefix's length, its year, and whether the year is printed in digits that are
    /// not ASCII; `None` if the prefix's regex cannot be compiled.
    fn prefix_by_regex(&self, clean: &str) -> Option<(usize, Option<u32>, bool)> {
        let prefix = self
            .prefix
            .get_or_init(|| Regex::new(&self.prefix_pattern).ok())
            .as_ref()?;
        Some(match prefix.captures(clean) {
            Some(c) => {
                let year = c.get(1).map(|y| y.as_str().parse().ok());
                (
                    c.get(0).map_or(0, |m| m.end()),
                    year.flatten(),
                    year.is_some_and(|y| y.is_none()),
                )
            }
            None => (0, None, false),
        })
    }

    fn ends_in_literal(&self, s: &[u8]) -> bool {
        match s.last() {
            Some(&b) => self.ends[usize::from(b)].iter().any(|p| s.ends_with(p)),
            None => false,
        }
    }

    /// Nothing in the message that the line parser looks for (`quiet_body`).
    fn quiet_body(&self, body: &str) -> bool {
        let b = body.as_bytes();
        // A bracket alone is not a header: `inner_head` says which are (asked only of the
        // messages that hold one).
        if b.last().is_some_and(u8::is_ascii_digit)
            || (memchr2(b'(', b'[', b).is_some() && self.inner_head.is_match(body))
            || self.literals.is_match(body)
        {
            return false;
        }
        // (?:LEVELS)\s+\d\d-\d\d: a level word, then what a header's date looks like.
        let mut at = 0;
        while let Some(m) = self.levels.find(&b[at..]) {
            let (start, end) = (at + m.start(), at + m.end());
            match header::dated_after(b, end) {
                Ok(true) => return false,
                Ok(false) => at = start + 1, // WARN inside WARNING, or one later on
                Err(header::NotAscii) => return !self.inner_head.is_match(body),
            }
            if at >= b.len() {
                break;
            }
        }
        true
    }

    /// The first shape the message is a clean record of, its groups pushed.
    fn shape(&self, out: &mut BlockScan, body: &str, caches: &mut Caches) -> bool {
        match self.matched(body, caches) {
            Some(i) => {
                self.push(out, i, body, &caches.0, 0);
                true
            }
            None => false,
        }
    }

    /// Two records glued on one line, `header msg (Proc pid=N) LEVEL MM-DD HH:MM:SS
    /// [file:N] msg`, read as the line parser reads them: each message cut where the
    /// second header starts (the first with the space before it) and each a clean record
    /// of a shape. Only where the second header repeats the first one's process, level,
    /// date and time (two writes of one interval): its records then take the line's header
    /// as a line of their own would, the first is the second's record before (a stats
    /// line's engine and line for a spec record), and the line ends as the second's own
    /// line would (its last 64 bytes are of it: `grammar.unfinished` looks at those).
    fn glued(
        &self,
        out: &mut BlockScan,
        h: &header::Header,
        proc: &str,
        body: &str,
        caches: &mut Caches,
    ) -> bool {
        let b = body.as_bytes();
        if h.level == 0 {
            return false;
        }
        let mut pids = memmem::find_iter(b, b"pid=");
        let (Some(at), None) = (pids.next(), pids.next()) else {
            return false; // none, or three records or more: the line parser reads those
        };
        let Some(open) = memchr::memrchr(b'(', &b[..at]) else {
            return false;
        };
        if open < 2 || b[open - 1] != b' ' || b[open - 2].is_ascii_whitespace() {
            return false;
        }
        let (first, rest) = (&body[..open - 1], &body[open..]);
        let Some(h2) = header::dated(rest) else {
            return false;
        };
        if (h2.level, h2.month, h2.day, h2.clock, h2.pid)
            != (h.level, h.month, h.day, h.clock, h.pid)
            || &rest[h2.proc_start..h2.proc_end] != proc
            || rest.len() < 64
            || self.ends_in_literal(first.as_bytes())
        {
            return false;
        }
        let second = &rest[h2.body..];
        let Some(i) = self.matched(first, caches) else {
            return false;
        };
        let spans = caches.0.clone();
        let Some(j) = self.matched(second, caches) else {
            return false;
        };
        self.push(out, i, first, &spans, 0);
        self.push(out, j, second, &caches.0, 1);
        true
    }

    /// A record that a terminal's width cut, its message's rest on the next line, read as
    /// the line parser joins the two (`wrapped.Pending.take`) only where it certainly
    /// joins them as printed: the cut falls between two printable characters, neither
    /// white space (the line parser strips each piece it is offered), after the shape's
    /// literal start, and inside a value, or else the rest of the label or unit it falls
    /// in holds none of the anchors' literals (an anchor there, as `Draft acceptance
    /// rate` in a cut `A|vg Draft acceptance rate`, splits the rest into pieces the line
    /// parser weighs one by one, and the first, `vg`, adds nothing it can read). A first
    /// line that ends inside a literal is held by the line parser and joined as printed
    /// (`grammar.unfinished`, `join_if_wrapped`): the same text. Each line may stand behind
    /// container or compose prefixes of its own (a container's log stamps every line the
    /// terminal's cut made), peeled from both as the line parser peels them; behind them
    /// the rest starts nothing else the line parser peels or watches (a header, a quote or
    /// list mark, brackets, markup), and the two make a clean record of a shape. Any other
    /// wrap, a record over three lines among them (its second line then ends a stretch and
    /// both are fed), or one behind colour, is left to the line parser.
    fn wrapped(
        &self,
        out: &mut BlockScan,
        h: &header::Header,
        body: &str,
        year: i32,
        rest: &str,
        caches: &mut Caches,
    ) -> bool {
        // The rest behind a prefix of its own (each line of a container's log is stamped):
        // the line parser peels it as it peels the first line's. A year it shows is the
        // record's only where the first line shows none (a line held: `held_year or
        // year`): left to the line parser.
        let Some((cut, rest_year)) = peeled(rest.as_bytes()) else {
            return false;
        };
        if rest_year.is_some() && year == -1 {
            return false;
        }
        let rest = &rest[cut..];
        let (b, r) = (body.as_bytes(), rest.as_bytes());
        let printable = |s: &[u8]| s.iter().all(|c| (0x20..0x7f).contains(c));
        let (Some(&last), Some(&first), Some(&end)) = (b.last(), r.first(), r.last()) else {
            return false;
        };
        if h.level == 0
            || last == b' '
            || first == b' '
            || end == b' '
            || b"(>-+*~".contains(&first)
            || !printable(b)
            || !printable(r)
            || memchr3(b'(', b')', b'[', b).is_some()
            || memchr3(b']', b'{', b'}', b).is_some()
            || memchr3(b'(', b')', b'[', r).is_some()
            || memchr3(b']', b'{', b'}', r).is_some()
            || memchr3(b'|', b'`', b'*', r).is_some()
            || memchr(b'<', r).is_some()
            || numbered(r)
            || !matches!(header::prefix(r), Ok((0, None)))
        {
            return false;
        }
        let joined = [body, rest].concat();
        if self.ends_in_literal(joined.as_bytes()) {
            return false;
        }
        let Some(i) = self.matched(&joined, caches) else {
            return false;
        };
        let cut = b.len();
        if cut <= self.shapes[i].prefix.len() {
            return false;
        }
        let inside = caches
            .0
            .iter()
            .flatten()
            .any(|&(start, stop)| start < cut && cut < stop);
        if !inside {
            let tail = &joined.as_bytes()[cut..];
            let to = memchr2(b',', b':', tail).unwrap_or(tail.len());
            if self.anchors.is_match(&tail[..to]) {
                return false;
            }
        }
        self.push(out, i, &joined, &caches.0, 2);
        true
    }

    /// The first shape `body` is a clean record of; its groups' spans are left in the
    /// caches' first member.
    fn matched(&self, body: &str, caches: &mut Caches) -> Option<usize> {
        let (spans, caches) = caches;
        for (i, (shape, (cache, caps))) in self.shapes.iter().zip(caches.iter_mut()).enumerate() {
            if !body.as_bytes().starts_with(&shape.prefix) {
                continue;
            }
            spans.clear();
            if let Some(t) = &shape.template {
                if !t.captures(body.as_bytes(), spans) {
                    continue;
                }
            } else if body.len() <= shape.backtracker.max_haystack_len() {
                let input = Input::new(body).anchored(Anchored::Yes);
                if shape.backtracker.try_captures(cache, input, caps).is_err() || !caps.is_match() {
                    continue;
                }
                let n = caps.group_len();
                spans.extend((0..n).map(|g| caps.get_group(g).map(|m| (m.start, m.end))));
            } else {
                let Some(c) = shape.regex.captures(body) else {
                    continue;
                };
                spans.extend(c.iter().map(|m| m.map(|m| (m.start(), m.end()))));
            }
            let group = |g: usize| spans.get(g).copied().flatten();
            if group(shape.marker).is_none() {
                continue;
            }
            if let Some(list) = shape.list {
                match group(list) {
                    Some((a, b)) if b - a <= self.max_list_bytes => {}
                    _ => continue,
                }
            }
            return Some(i);
        }
        None
    }

    /// A record of shape `i` on the line being scanned, its groups at `spans` of `body`.
    fn push(
        &self,
        out: &mut BlockScan,
        i: usize,
        body: &str,
        spans: &[Option<(usize, usize)>],
        second: u8,
    ) {
        let group = |g: usize| spans.get(g).copied().flatten();
        let rows = &mut out.shapes[i];
        rows.lines.push(out.kind.len() as u32);
        rows.second.push(second);
        for (column, (_, g)) in rows.columns.iter_mut().zip(&self.shapes[i].groups) {
            column.push(group(*g).and_then(|(a, b)| body.get(a..b)));
        }
    }
}

/// A scan's scratch: the groups' spans of the message at hand, the backtrackers' memory.
type Caches = (
    Vec<Option<(usize, usize)>>,
    Vec<(backtrack::Cache, Captures)>,
);

/// The processes of a block, numbered in order of appearance.
#[derive(Default)]
struct Keys {
    index: HashMap<(String, u32), i32>,
    last: Option<(i32, u32)>, // most lines are of the process of the line before
}

impl Keys {
    fn of(&mut self, procs: &mut Vec<(String, u32)>, proc: &str, pid: u32) -> i32 {
        if let Some((key, last_pid)) = self.last {
            let (p, _) = &procs[key as usize - 1];
            if last_pid == pid && p == proc {
                return key;
            }
        }
        let next = procs.len() as i32 + 1;
        let key = *self
            .index
            .entry((proc.to_string(), pid))
            .or_insert_with(|| {
                procs.push((proc.to_string(), pid));
                next
            });
        self.last = Some((key, pid));
        key
    }
}

/// How many times a line's prefixes are peeled: each `header::prefix` takes a compose
/// name and a stamp, two of the line parser's six decorations (`clean.clean_line`).
const PEELS: usize = 3;

/// What the prefixes of a line take (peeled as `Scanner::line` peels them, ASCII only) and
/// the first stamp's year; `None` where a prefix is not ASCII.
fn peeled(s: &[u8]) -> Option<(usize, Option<u32>)> {
    let (mut at, mut year) = (0, None);
    for _ in 0..PEELS {
        if s.get(at) == Some(&b'(') {
            break;
        }
        let (cut, y) = header::prefix(&s[at..]).ok()?;
        year = year.or(y);
        at += cut;
        if cut == 0 {
            break;
        }
    }
    Some((at, year))
}

/// `\d+\.\s` opens the line: a numbered list item, whose mark the line parser peels.
fn numbered(r: &[u8]) -> bool {
    let digits = r.iter().take_while(|c| c.is_ascii_digit()).count();
    digits > 0 && r.get(digits) == Some(&b'.') && r.get(digits + 1) == Some(&b' ')
}

/// Markdown emphasis, a tag, or a full-width colon or comma (which the line parser reads
/// as ASCII ones).
fn wide_or_marked(b: &[u8]) -> bool {
    memchr2(b'*', b'<', b).is_some()
        || memmem::find(b, "\u{ff1a}".as_bytes()).is_some()
        || memmem::find(b, "\u{ff0c}".as_bytes()).is_some()
}

fn merge(mut a: BlockScan, b: BlockScan, at: i64) -> BlockScan {
    let lines = a.kind.len() as u32;
    // The second half's processes, numbered after the first's.
    let mut index: HashMap<(String, u32), i32> = a
        .procs
        .iter()
        .enumerate()
        .map(|(i, p)| (p.clone(), i as i32 + 1))
        .collect();
    let mut remap = vec![0i32];
    for p in b.procs {
        let next = a.procs.len() as i32 + 1;
        let k = *index.entry(p.clone()).or_insert_with(|| {
            a.procs.push(p);
            next
        });
        remap.push(k);
    }
    a.key
        .extend(b.key.iter().map(|&k| remap[k.max(0) as usize]));
    a.offsets.pop();
    a.offsets.extend(b.offsets.iter().map(|o| o + at));
    a.kind.extend(b.kind);
    a.level.extend(b.level);
    a.month.extend(b.month);
    a.day.extend(b.day);
    a.clock.extend(b.clock);
    a.year.extend(b.year);
    a.filled.extend(b.filled);
    for (x, y) in a.shapes.iter_mut().zip(b.shapes) {
        x.lines.extend(y.lines.iter().map(|l| l + lines));
        x.second.extend(y.second);
        for (c, d) in x.columns.iter_mut().zip(&y.columns) {
            c.append(d);
        }
    }
    a
}
