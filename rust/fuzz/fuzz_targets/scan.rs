//! Any bytes through the core: the scanner (with the plain shapes of the repository's own
//! definitions, their one-pass templates against the backtracker), the hand-written header
//! parsers against the regexes they stand for, and the line cap. A panic, a disagreement or
//! a read past a buffer is a finding.
#![no_main]

use std::sync::LazyLock;

use libfuzzer_sys::fuzz_target;
use regex::Regex;
use specscope_core::header;
use specscope_core::read::LineCap;
use specscope_core::scan::{Scanner, ShapeSpec, Spec, RECORD, REST};
use specscope_core::typed::{self, Kind, Typed};

const LEVELS: &str = "DEBUG|INFO|WARN(?:ING)?|ERROR|CRITICAL";
const HEAD: &str = r"^\((?P<_proc>[A-Za-z][A-Za-z0-9_]{0,60}) pid=(?P<_pid>[0-9]{1,9})\) ";
const PREFIX: &str = concat!(
    r"^(?:[A-Za-z0-9][\w.-]{0,80}\s*\|\s?)?",
    r"(?:(\d{4})-\d\d-\d\dT\d\d:\d\d:\d\d(?:[.,]\d+)?(?:Z|[+-]\d\d:?\d\d)?",
    r"(?:\s+(?:stdout|stderr)\s+[FP])?\s+)?"
);
const ANSI: &str = r"\x1b(?:\[[0-?]*[ -/]*[@-~]|\][^\x07\x1b]*(?:\x07|\x1b\\)|[@-Z\\-_])";
// The plain shapes come from the definitions themselves, never a copy of them.
const DEFINITIONS: [&str; 2] = [
    include_str!("../../../parsers/vllm_v1_spec_decode.toml"),
    include_str!("../../../parsers/vllm_v1_engine_stats.toml"),
];

static SCANNER: LazyLock<Scanner> = LazyLock::new(|| Scanner::new(&spec()).unwrap());
// The same shapes read by the backtracker alone: the one-pass templates are held to it.
static BACKTRACKED: LazyLock<Scanner> = LazyLock::new(|| Scanner::build(&spec(), false).unwrap());

fn spec() -> Spec {
    let find = Regex::new(r"(?m)^pattern = '(.*)'$").unwrap();
    let mut shapes = Vec::new();
    for text in DEFINITIONS {
        for c in find.captures_iter(text) {
            let pattern = c[1].to_string();
            let prefix: String = pattern
                .chars()
                .take_while(|ch| !"\\()[]{}.*+?|^$".contains(*ch))
                .collect();
            shapes.push(ShapeSpec {
                prefix,
                pattern: format!("^(?P<__m>){pattern}$"),
            });
        }
    }
    assert!(
        shapes.len() >= 4,
        "the definitions' plain shapes were not found"
    );
    let literals: Vec<String> = [
        "SpecDecoding",
        "Engine",
        "model",
        "Per-position acceptance rate",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let prefixes = literals
        .iter()
        .flat_map(|l| (1..l.len()).map(move |j| l[..j].to_string()))
        .collect();
    Spec {
        literals,
        anchor_literals: ["SpecDecoding", "Engine", "Draft acceptance rate", "Accept"]
            .iter()
            .map(|s| s.to_string())
            .collect(),
        prefixes,
        shapes,
        max_list_bytes: 7 * 64 - 2,
        ansi: ANSI.into(),
        prefix: PREFIX.into(),
        inner_head: format!(r"pid=|\[\d{{4}}-\d\d-\d\d|\([^)]*$|(?:{LEVELS})\s+\d\d-\d\d"),
    }
}
static DATED: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(&format!(
        r"(?P<_head>{HEAD}(?P<_level>{LEVELS}) (?P<_month>0[1-9]|1[0-2])-(?P<_day>0[1-9]|[12][0-9]|3[01]) (?P<_time>(?:[01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9]) \[[A-Za-z0-9_./-]{{1,200}}:[0-9]{{1,6}}\] )\S"
    ))
    .unwrap()
});
static UNDATED: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(&format!(r"{HEAD}(?P<_body>\S.*)$")).unwrap());
static PREFIX_RE: LazyLock<Regex> = LazyLock::new(|| Regex::new(PREFIX).unwrap());

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    // The scanner: whole lines, records as many as RECORD lines and the second records of
    // glued ones, one thread or two.
    let found = SCANNER.scan(&text);
    assert_eq!(found.offsets.len(), found.kind.len() + 1);
    assert_eq!(*found.offsets.last().unwrap() as usize, text.len());
    let records: usize = found.shapes.iter().map(|s| s.lines.len()).sum();
    let glued: usize = found
        .shapes
        .iter()
        .map(|s| s.second.iter().filter(|&&g| g == 1).count())
        .sum();
    assert_eq!(
        records,
        found.kind.iter().filter(|&&k| k == RECORD).count() + glued
    );
    if text.len() > 1 << 12 {
        assert_eq!(SCANNER.scan_parallel(&text, 2), found);
    }
    assert_eq!(BACKTRACKED.scan(&text), found);
    // The groups read as their types: rows or text, never a panic.
    for rows in &found.shapes {
        for column in &rows.columns {
            for kind in [Kind::Int, Kind::Float, Kind::Percent, Kind::FloatList] {
                if let Some(Typed::List(offsets, values)) = typed::read(column, kind) {
                    assert_eq!(*offsets.last().unwrap() as usize, values.len());
                }
            }
        }
    }
    // A record line cut at a column the input picks: the core reads it as the line
    // itself (the same groups, its rest taken) or leaves the rest to the line parser.
    if let (Some(&pick), Some(i)) = (data.first(), found.kind.iter().position(|&k| k == RECORD)) {
        let (a, b) = (found.offsets[i] as usize, found.offsets[i + 1] as usize);
        let line = text[a..b].trim_end_matches('\n');
        let whole = SCANNER.scan(line);
        let cut = 1 + usize::from(pick) * 7 % line.len().max(2).saturating_sub(1);
        if whole.kind == [RECORD] && line.is_char_boundary(cut) && cut < line.len() {
            let split = SCANNER.scan(&format!("{}\n{}", &line[..cut], &line[cut..]));
            if split.kind.get(1) == Some(&REST) {
                assert_eq!(split.kind, [RECORD, REST]);
                let rows = |s: &specscope_core::scan::BlockScan| {
                    s.shapes
                        .iter()
                        .map(|r| r.columns.clone())
                        .collect::<Vec<_>>()
                };
                assert_eq!(rows(&split), rows(&whole), "{line:?} at {cut}");
            }
        }
    }
    // The header parsers: what the regexes say, on every line.
    for line in text.split('\n').take(64) {
        let want = DATED.captures(line).map(|c| c.name("_head").unwrap().end());
        assert_eq!(header::dated(line).map(|h| h.body), want, "{line:?}");
        let want = UNDATED
            .captures(line)
            .map(|c| c.name("_body").unwrap().start());
        assert_eq!(header::undated(line).map(|h| h.body), want, "{line:?}");
        if let Ok((end, year)) = header::prefix(line.as_bytes()) {
            let c = PREFIX_RE.captures(line).unwrap();
            assert_eq!(end, c.get(0).unwrap().end(), "{line:?}");
            assert_eq!(year, c.get(1).map(|y| y.as_str().parse::<u32>().unwrap()));
        }
    }
    // The line cap: what is kept is the short lines, whatever the chunks.
    if let Some((&first, rest)) = data.split_first() {
        let limit = usize::from(first % 64) + 1;
        let mut cap = LineCap::new(limit);
        let mut out = Vec::new();
        for chunk in rest.chunks(usize::from(first % 7) + 1) {
            cap.push(&mut out, chunk);
        }
        cap.finish(&out);
        let kept: Vec<&[u8]> = rest
            .split(|&b| b == b'\n')
            .map(|l| if l.len() > limit { &b""[..] } else { l })
            .collect();
        // A line over the limit leaves its \n (the last one: nothing) behind.
        let want = kept.join(&b'\n');
        assert_eq!(out, want);
    }
});
