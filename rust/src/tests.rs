//! The hand-written header parsers against the patterns they stand for (as
//! `specscope/logs/bulkplan.py` writes them; `tests/test_core.py` holds the Python side to
//! the same), and the scanner and the reader on any bytes: rows or a skip, never a panic.

use std::sync::LazyLock;

use proptest::prelude::*;
use regex::Regex;

use crate::head::{self, HeadColumn};
use crate::header;
use crate::read::LineCap;
use crate::scan::{Scanner, ShapeSpec, Spec, RECORD, REST, SLOW};

const LEVELS: &str = "DEBUG|INFO|WARN(?:ING)?|ERROR|CRITICAL";
const HEAD: &str = r"^\((?P<_proc>[A-Za-z][A-Za-z0-9_]{0,60}) pid=(?P<_pid>[0-9]{1,9})\) ";
const PREFIX: &str = concat!(
    r"^(?:[A-Za-z0-9][\w.-]{0,80}\s*\|\s?)?",
    r"(?:(\d{4})-\d\d-\d\dT\d\d:\d\d:\d\d(?:[.,]\d+)?(?:Z|[+-]\d\d:?\d\d)?",
    r"(?:\s+(?:stdout|stderr)\s+[FP])?\s+)?"
);
const ANSI: &str = r"\x1b(?:\[[0-?]*[ -/]*[@-~]|\][^\x07\x1b]*(?:\x07|\x1b\\)|[@-Z\\-_])";

static DATED: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(&format!(
        r"(?P<_head>{HEAD}(?P<_level>{LEVELS}) (?P<_month>0[1-9]|1[0-2])-(?P<_day>0[1-9]|[12][0-9]|3[01]) (?P<_time>(?:[01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9]) \[[A-Za-z0-9_./-]{{1,200}}:[0-9]{{1,6}}\] )\S"
    ))
    .unwrap()
});
static UNDATED: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(&format!(r"{HEAD}(?P<_body>\S.*)$")).unwrap());
static PREFIX_RE: LazyLock<Regex> = LazyLock::new(|| Regex::new(PREFIX).unwrap());
static SCANNER: LazyLock<Scanner> = LazyLock::new(|| Scanner::new(&spec()).unwrap());

fn spec() -> Spec {
    let spec_line = r"SpecDecoding metrics: Draft acceptance rate: (?P<acceptance_rate>[0-9]{1,3}\.[0-9])%, Accepted: (?P<accepted_tokens>[0-9]{1,15}) tokens, Drafted: (?P<draft_tokens>[0-9]{1,15}) tokens(?:, Per-position acceptance rate: (?P<per_position_rate>(?:0\.[0-9]{3}, )*0\.[0-9]{3}))";
    Spec {
        literals: vec!["SpecDecoding".into(), "Engine".into(), "model".into()],
        anchor_literals: vec!["SpecDecoding".into(), "Draft acceptance rate".into()],
        prefixes: vec!["Spec".into(), "S".into(), "En".into(), "mo".into()],
        shapes: vec![ShapeSpec {
            prefix: "SpecDecoding metrics: Draft acceptance rate: ".into(),
            pattern: format!("^(?P<__m>){spec_line}$"),
        }],
        max_list_bytes: 7 * 4 - 2,
        ansi: ANSI.into(),
        prefix: PREFIX.into(),
        inner_head: format!(r"pid=|\[\d{{4}}-\d\d-\d\d|\([^)]*$|(?:{LEVELS})\s+\d\d-\d\d"),
    }
}

/// A record of `spec()`'s shape, any numbers.
fn record() -> impl Strategy<Value = String> {
    (
        0u32..1000,
        0u64..1_000_000,
        0u64..1_000_000,
        proptest::collection::vec(0u32..1000, 1..5),
    )
        .prop_map(|(rate, a, d, list)| {
            let list: Vec<String> = list.iter().map(|p| format!("0.{p:03}")).collect();
            format!(
                "SpecDecoding metrics: Draft acceptance rate: {}.{}%, Accepted: {a} tokens, Drafted: {d} tokens, Per-position acceptance rate: {}",
                rate / 10,
                rate % 10,
                list.join(", ")
            )
        })
}

/// Lines made of the pieces where the parsers decide, bent by any characters.
fn line() -> impl Strategy<Value = String> {
    let pieces = prop_oneof![
        Just("(APIServer pid=4741) ".to_string()),
        Just("(A_1 pid=1234567890) ".to_string()),
        Just("INFO 04-07 17:19:59 [metrics.py:101] ".to_string()),
        Just("WARNING 12-31 23:59:60 [a:1234567] ".to_string()),
        Just("WARN 00-32 24:00:00 [] ".to_string()),
        Just("2026-01-02T03:04:05.123Z ".to_string()),
        Just("2026-01-02T03:04:05+05:30 stdout F ".to_string()),
        Just("2026-01-02T03:04:05-0530 stderr Px".to_string()),
        Just("svc.1-a  | ".to_string()),
        Just("SpecDecoding metrics: Draft acceptance rate: 38.8%, Accepted: 150 tokens, Drafted: 387 tokens".to_string()),
        Just(" (APIServer pid=4741) INFO 04-07 17:19:59 [m.py:1] ".to_string()),
        Just(", Per-position acceptance rate: 0.543, 0.357, 0.264, 0.100, 0.200".to_string()),
        Just("\x1b[0;36m".to_string()),
        Just("INFO  12-01".to_string()),
        "[ \t\u{3000}\u{a0}\u{85}]{1,3}",
        "[0-9\u{661}\u{ff12}]{1,5}",
        "[(|)\\[\\]:.,Z+TFP-]",
        "\\PC{0,12}",
    ];
    proptest::collection::vec(pieces, 0..8).prop_map(|p| p.concat())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn dated_is_the_regex(s in line()) {
        let want = DATED.captures(&s).map(|c| {
            let head = c.name("_head").unwrap();
            (c.name("_proc").unwrap().as_str().to_string(), c.name("_pid").unwrap().as_str().parse::<u32>().unwrap(), head.end())
        });
        let got = header::dated(&s).map(|h| (s[h.proc_start..h.proc_end].to_string(), h.pid, h.body));
        prop_assert_eq!(got, want);
    }

    #[test]
    fn undated_is_the_regex(s in line()) {
        let want = UNDATED.captures(&s).map(|c| c.name("_body").unwrap().start());
        prop_assert_eq!(header::undated(&s).map(|h| h.body), want);
    }

    #[test]
    fn prefix_is_the_regex_or_asks_it(s in line()) {
        if let Ok((end, year)) = header::prefix(s.as_bytes()) {
            let c = PREFIX_RE.captures(&s).unwrap();
            prop_assert_eq!(end, c.get(0).unwrap().end());
            prop_assert_eq!(year, c.get(1).map(|y| y.as_str().parse::<u32>().unwrap()));
        }
    }

    #[test]
    fn any_text_is_scanned_whole(s in "\\PC{0,300}|[\\x00-\\x7f]{0,300}", lines in proptest::collection::vec(line(), 0..20)) {
        let scanner = &*SCANNER;
        for text in [s, lines.join("\n")] {
            let found = scanner.scan(&text);
            let n = found.kind.len();
            prop_assert_eq!(found.offsets.len(), n + 1);
            prop_assert_eq!(*found.offsets.last().unwrap() as usize, text.len());
            prop_assert!(found.key.iter().all(|&k| k >= 0 && k as usize <= found.procs.len()));
            let records: usize = found.shapes.iter().map(|s| s.lines.len()).sum();
            let glued: usize = found.shapes.iter().map(|s| s.second.iter().filter(|&&g| g == 1).count()).sum();
            prop_assert_eq!(records, found.kind.iter().filter(|&&k| k == RECORD).count() + glued);
            prop_assert_eq!(scanner.scan_parallel(&text, 2), found);
        }
    }

    #[test]
    fn head_columns_are_the_records_headers(
        lines in proptest::collection::vec(line(), 0..12),
        records in proptest::collection::vec((record(), 1u32..13, 0u32..24, 0u32..60, any::<bool>()), 1..8),
    ) {
        // Records under dated and undated headers, between any lines.
        let mut text: Vec<String> = lines;
        for (i, (r, month, hour, minute, dated)) in records.into_iter().enumerate() {
            let date = format!("INFO {month:02}-07 {hour:02}:{minute:02}:0{} [m.py:1] ", i % 10);
            let head = if dated { date.as_str() } else { "" };
            text.insert(i.min(text.len()), format!("(APIServer pid=4741) {head}{r}"));
        }
        let text = text.join("\n");
        let found = SCANNER.scan(&text);
        for rows in &found.shapes {
            let n = rows.lines.len();
            let columns = head::columns(&found, rows);
            let names: Vec<&str> = columns.iter().map(|c| c.0).collect();
            prop_assert_eq!(names, vec!["_i", "_o", "_n", "_key", "_month", "_day", "_time", "_year"]);
            let int = |name: &str| {
                let c: &HeadColumn = &columns.iter().find(|c| c.0 == name).unwrap().1;
                prop_assert_eq!(c.values.len(), n);
                prop_assert_eq!(c.valid.len(), n);
                Ok((c.values.clone(), c.valid.clone()))
            };
            let (i, _) = int("_i")?;
            prop_assert_eq!(i, rows.lines.iter().map(|&l| i64::from(l)).collect::<Vec<_>>());
            let (month, dated) = int("_month")?;
            let (time, timed) = int("_time")?;
            prop_assert_eq!(&timed, &dated);
            for (r, &l) in rows.lines.iter().enumerate() {
                let (a, b) = (found.offsets[l as usize] as usize, found.offsets[l as usize + 1] as usize);
                let raw = text[a..b].trim_end_matches('\n');
                // A dated line's month and time as the header's regex reads them.
                match DATED.captures(raw) {
                    Some(c) if raw.starts_with('(') => {
                        prop_assert_eq!(dated[r], 1);
                        prop_assert_eq!(month[r].to_string(), c["_month"].trim_start_matches('0'));
                        let hms: Vec<i64> = c["_time"].split(':').map(|x| x.parse().unwrap()).collect();
                        prop_assert_eq!(time[r], hms[0] * 3600 + hms[1] * 60 + hms[2]);
                    }
                    _ => {}
                }
                if raw.starts_with("(APIServer pid=4741) SpecDecoding") {
                    prop_assert_eq!(dated[r], 0);
                }
            }
        }
    }

    #[test]
    fn two_records_glued_are_the_two_lines(
        a in record(), b in record(), same in any::<bool>(), file in "[a-z_]{1,8}\\.py:[0-9]{1,4}",
        bend in prop_oneof![Just(""), Just(" "), Just("  "), Just("x"), Just(","), Just("\u{3000}")],
    ) {
        let head = "(APIServer pid=4741) INFO 04-07 17:19:59 [metrics.py:101] ";
        let clock = if same { "17:19:59" } else { "17:20:00" };
        let second = format!("(APIServer pid=4741) INFO 04-07 {clock} [{file}] {b}");
        let glued = SCANNER.scan(&format!("{head}{a}{bend} {second}"));
        let apart = SCANNER.scan(&format!("{head}{a}\n{second}"));
        prop_assert_eq!(apart.kind.clone(), vec![RECORD, RECORD]);
        if same && bend.is_empty() {
            // What the two lines give, on one line.
            prop_assert_eq!(glued.kind.clone(), vec![RECORD]);
            let (g, p) = (&glued.shapes[0], &apart.shapes[0]);
            prop_assert_eq!(&g.lines, &vec![0, 0]);
            prop_assert_eq!(&g.second, &vec![0, 1]);
            prop_assert_eq!(&g.columns, &p.columns);
        } else {
            // Another second, or more than one space before the header: the line parser's.
            prop_assert_eq!(glued.kind.clone(), vec![SLOW]);
            prop_assert!(glued.shapes[0].lines.is_empty());
        }
    }

    #[test]
    fn a_record_cut_anywhere_reads_as_its_line_or_is_left(a in record(), at in 1usize..400) {
        let line = format!("(APIServer pid=4741) INFO 04-07 17:19:59 [metrics.py:101] {a}");
        let cut = 1 + at % (line.len() - 1);
        let whole = SCANNER.scan(&line);
        let split = SCANNER.scan(&format!("{}\n{}", &line[..cut], &line[cut..]));
        prop_assert_eq!(split.kind.len(), 2);
        let b = line.as_bytes();
        let (x, y) = (b[cut - 1], b[cut]);
        if split.kind == vec![RECORD, REST] {
            // Read as the line itself: the same groups, marked as going on over a line.
            prop_assert_eq!(&split.shapes[0].columns, &whole.shapes[0].columns);
            prop_assert_eq!(&split.shapes[0].second, &vec![2]);
            prop_assert!(x != b' ' && y != b' ');
            prop_assert!(cut > line.find("rate: ").unwrap());
        } else {
            prop_assert!(split.kind[1] != REST);
            prop_assert!(split.shapes[0].second.iter().all(|&s| s == 0));
            // A cut inside a number of the message is always joined.
            let body = line.find("] ").unwrap() + 2;
            let inside = x.is_ascii_digit() && y.is_ascii_digit();
            prop_assert!(!(inside && cut > body + 40 && split.kind[0] != RECORD));
        }
        prop_assert_eq!(split.offsets.len(), 3);
    }

    #[test]
    fn the_line_cap_keeps_short_lines_and_notes_long_ones(
        data in proptest::collection::vec(prop_oneof![Just(b'\n'), Just(b'x'), any::<u8>()], 0..600),
        cut in 1usize..50,
        limit in 1usize..40,
    ) {
        let mut cap = LineCap::new(limit);
        let mut out = Vec::new();
        for chunk in data.chunks(cut) {
            cap.push(&mut out, chunk);
        }
        cap.finish(&out);
        let mut want = Vec::new();
        let mut long = Vec::new();
        let lines: Vec<&[u8]> = data.split(|&b| b == b'\n').collect();
        for (i, l) in lines.iter().enumerate() {
            let last = i + 1 == lines.len();
            if l.len() > limit {
                long.push((want.len() as u64, l.len() as u64));
                if !last {
                    want.push(b'\n');
                }
            } else {
                want.extend_from_slice(l);
                if !last {
                    want.push(b'\n');
                }
            }
        }
        prop_assert_eq!(out, want);
        prop_assert_eq!(cap.long, long);
    }
}

#[test]
fn a_parallel_scan_of_a_large_block_is_the_scan() {
    let scanner = Scanner::new(&spec()).unwrap();
    let one = "(APIServer pid=7) INFO 04-07 17:19:59 [metrics.py:101] SpecDecoding metrics: Draft acceptance rate: 38.8%, Accepted: 150 tokens, Drafted: 387 tokens, Per-position acceptance rate: 0.100\n(EngineCore pid=8) INFO:  a\n";
    let text = one.repeat(20_000);
    let found = scanner.scan(&text);
    assert_eq!(found.procs.len(), 2);
    assert_eq!(found.shapes[0].lines.len(), 20_000);
    assert_eq!(scanner.scan_parallel(&text, 2), found);
}

/// The plain shapes of the repository's own definitions, as the scanner compiles them.
fn real_shapes() -> Vec<String> {
    let find = Regex::new(r"(?m)^pattern = '(.*)'$").unwrap();
    [
        include_str!("../../parsers/vllm_v1_spec_decode.toml"),
        include_str!("../../parsers/vllm_v1_engine_stats.toml"),
    ]
    .iter()
    .flat_map(|text| {
        find.captures_iter(text)
            .map(|c| format!("^(?P<__m>){}$", &c[1]))
            .collect::<Vec<_>>()
    })
    .collect()
}

/// A text the pattern matches, chosen by `seed` (optional parts in or out, repetitions
/// of any length the pattern allows up to a few more than its least).
fn sample(hir: &regex_syntax::hir::Hir, seed: &mut u64, out: &mut String) {
    use regex_syntax::hir::{Class, HirKind};
    let mut next = |n: u64| {
        *seed ^= *seed << 13;
        *seed ^= *seed >> 7;
        *seed ^= *seed << 17;
        *seed % n.max(1)
    };
    match hir.kind() {
        HirKind::Empty | HirKind::Look(_) => {}
        HirKind::Literal(l) => out.push_str(std::str::from_utf8(&l.0).unwrap()),
        HirKind::Class(Class::Unicode(c)) => {
            let r = c.ranges()[next(c.ranges().len() as u64) as usize];
            let span = u64::from(r.end()) - u64::from(r.start()) + 1;
            out.push(char::from_u32(u32::from(r.start()) + next(span) as u32).unwrap());
        }
        HirKind::Class(Class::Bytes(c)) => {
            let r = c.ranges()[next(c.ranges().len() as u64) as usize];
            out.push(char::from(r.start()));
        }
        HirKind::Repetition(r) => {
            let max = r.max.unwrap_or(r.min + 4).min(r.min + 4);
            let n = r.min + next(u64::from(max - r.min) + 1) as u32;
            for _ in 0..n {
                sample(&r.sub, seed, out);
            }
        }
        HirKind::Capture(c) => sample(&c.sub, seed, out),
        HirKind::Concat(v) => v.iter().for_each(|h| sample(h, seed, out)),
        HirKind::Alternation(v) => {
            let i = next(v.len() as u64) as usize;
            sample(&v[i], seed, out);
        }
    }
}

static SHAPES: LazyLock<Vec<(Regex, regex_syntax::hir::Hir, crate::template::Template)>> =
    LazyLock::new(|| {
        real_shapes()
            .iter()
            .map(|p| {
                let hir = regex_syntax::Parser::new().parse(p).unwrap();
                let template = crate::template::Template::new(p)
                    .unwrap_or_else(|| panic!("no template for {p}"));
                (Regex::new(p).unwrap(), hir, template)
            })
            .collect()
    });

proptest! {
    #![proptest_config(ProptestConfig::with_cases(20_000))]

    /// The one-pass reading of a shape gives the regex's groups, on records of the shape
    /// (every optional part in or out) and on records bent by a few edits.
    #[test]
    fn a_template_reads_what_the_regex_reads(
        which in 0usize..16,
        mut seed in 1u64..,
        edits in proptest::collection::vec((0usize..400, 0usize..3, "[0-9., %:A-Za-z/-]{1,3}"), 0..4),
    ) {
        let (regex, hir, template) = &SHAPES[which % SHAPES.len()];
        let mut text = String::new();
        sample(hir, &mut seed, &mut text);
        for (at, how, piece) in edits {
            let at = at % (text.len() + 1);
            match how {
                0 => text.insert_str(at, &piece),
                1 => { text.remove(at.min(text.len().saturating_sub(1)).min(text.len())); }
                _ => text.truncate(at),
            }
            if text.is_empty() { break; }
        }
        let want = regex.captures(&text).map(|c| {
            c.iter().skip(1).map(|m| m.map(|m| (m.start(), m.end()))).collect::<Vec<_>>()
        });
        let mut spans = Vec::new();
        let got = template.captures(text.as_bytes(), &mut spans).then(|| spans[1..].to_vec());
        prop_assert_eq!(got, want, "{}", text);
    }

    /// The scanner with templates classifies and cuts as the one without them.
    #[test]
    fn templates_change_no_scan(lines in proptest::collection::vec((0usize..16, 1u64.., 0usize..300, "[0-9., %]{0,2}"), 1..30)) {
        let mut text = String::new();
        for (which, mut seed, cut, piece) in lines {
            let (_, hir, _) = &SHAPES[which % SHAPES.len()];
            text.push_str("(APIServer pid=4741) INFO 04-07 17:19:59 [metrics.py:101] ");
            let mut record = String::new();
            sample(hir, &mut seed, &mut record);
            if cut < record.len() {
                record.insert_str(cut, &piece);
            }
            text.push_str(&record);
            text.push('\n');
        }
        let with = &*REAL;
        let without = &*REAL_BACKTRACKED;
        prop_assert_eq!(with.scan(&text), without.scan(&text));
    }
}

fn real_spec() -> Spec {
    let shapes = real_shapes()
        .into_iter()
        .map(|pattern| ShapeSpec {
            prefix: pattern
                .trim_start_matches("^(?P<__m>)")
                .chars()
                .take_while(|ch| !"\\()[]{}.*+?|^$".contains(*ch))
                .collect(),
            pattern,
        })
        .collect();
    Spec {
        shapes,
        max_list_bytes: 7 * 64 - 2,
        ..spec()
    }
}

static REAL: LazyLock<Scanner> = LazyLock::new(|| Scanner::build(&real_spec(), true).unwrap());
static REAL_BACKTRACKED: LazyLock<Scanner> =
    LazyLock::new(|| Scanner::build(&real_spec(), false).unwrap());

#[test]
fn every_real_shape_has_a_template() {
    assert!(SHAPES.len() >= 5);
}

#[test]
fn two_threads_never_part_a_record_from_its_rest() {
    let line = "(APIServer pid=4741) INFO 04-07 17:19:59 [metrics.py:101] SpecDecoding metrics: Draft acceptance rate: 25.5%, Accepted: 449 tokens, Drafted: 1760 tokens, Per-position acceptance rate: 0.486, 0.218";
    for lead in 0..40 {
        let mut text = "x".repeat(lead) + "\n";
        while text.len() < (1 << 20) + 4096 {
            let cut = 75 + text.len() % 60; // inside the numbers and labels alike
            text += &format!("{}\n{}\n", &line[..cut], &line[cut..]);
        }
        let one = SCANNER.scan(&text);
        assert!(one.kind.iter().filter(|&&k| k == REST).count() > 1000);
        assert_eq!(SCANNER.scan_parallel(&text, 2), one);
    }
}

/// A gzip stream's content is hashed as it is inflated: members one after another and the
/// NUL padding after them give the digest of the text (SHA-256 of "abc" is FIPS 180-2's
/// example), whatever the blocks; a plain file has none (Python hashes the file itself).
#[test]
fn a_gzip_streams_content_digest_is_of_its_text() {
    use crate::read::BlockReader;
    use flate2::{write::GzEncoder, Compression};
    use std::io::Write;

    let member = |text: &[u8]| {
        let mut gz = GzEncoder::new(Vec::new(), Compression::fast());
        gz.write_all(text).unwrap();
        gz.finish().unwrap()
    };
    let dir = std::env::temp_dir().join(format!("specscope-core-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let abc = "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad";
    let hex = |d: [u8; 32]| d.iter().map(|b| format!("{b:02x}")).collect::<String>();
    for (name, bytes) in [
        ("one.gz", member(b"abc")),
        ("two.gz", [member(b"a"), member(b"bc"), vec![0; 9]].concat()),
    ] {
        let path = dir.join(name);
        std::fs::write(&path, bytes).unwrap();
        let mut reader = BlockReader::open(path.to_str().unwrap(), 1, 1, 1 << 20, 1 << 20).unwrap();
        assert_eq!(reader.content_digest(), None);
        let mut text = Vec::new();
        while let Some(block) = reader.next_block().unwrap() {
            text.extend(block);
        }
        assert_eq!(text, b"abc");
        let (digest, size) = reader.content_digest().unwrap();
        assert_eq!((hex(digest).as_str(), size), (abc, 3));
    }
    let plain = dir.join("plain.log");
    std::fs::write(&plain, b"abc\n").unwrap();
    let mut reader = BlockReader::open(plain.to_str().unwrap(), 1, 1, 1 << 20, 1 << 20).unwrap();
    while reader.next_block().unwrap().is_some() {}
    assert_eq!(reader.content_digest(), None);
    std::fs::remove_dir_all(&dir).unwrap();
}

/// The same behind container stamps, one on each line or two (`docker logs -t` of a log a
/// container stamped): the rests are joined, and two threads never part a record from
/// its rest (the cut is looked for behind the prefixes).
#[test]
fn records_wrapped_behind_stamps_are_joined_on_either_thread() {
    let line = "(APIServer pid=4741) INFO 04-07 17:19:59 [metrics.py:101] SpecDecoding metrics: Draft acceptance rate: 25.5%, Accepted: 449 tokens, Drafted: 1760 tokens, Per-position acceptance rate: 0.486, 0.218";
    for stamp in [
        "2026-05-24T11:55:21.123456789Z ",
        "2026-05-24T11:55:21Z 2025-01-02T03:04:05.1Z ",
    ] {
        for lead in 0..20 {
            let mut text = "x".repeat(lead) + "\n";
            let mut pairs = 0;
            while text.len() < (1 << 20) + 4096 {
                let cut = 75 + pairs % 61; // inside the numbers and labels alike
                text += &format!("{stamp}{}\n{stamp}{}\n", &line[..cut], &line[cut..]);
                pairs += 1;
            }
            let one = SCANNER.scan(&text);
            assert!(one.kind.iter().filter(|&&k| k == REST).count() > 1000);
            assert!(one.year.contains(&2026) && !one.year.contains(&2025));
            assert_eq!(SCANNER.scan_parallel(&text, 2), one);
        }
    }
}
