"""World corpus: real log excerpts against what a careful reader counts in them.

Each case in fixtures/world/expected.toml names a .log file (a verbatim excerpt from a
public issue, PR or notes file) and the records a human reader finds in it. See the
header of expected.toml for the keys.
"""

from __future__ import annotations

import math
import tomllib
from pathlib import Path

import pytest

import specscope

WORLD = Path(__file__).resolve().parent.parent / "fixtures" / "world"
CASES = tomllib.loads((WORLD / "expected.toml").read_text(encoding="utf-8"))["case"]
TABLES = {"spec": "spec_decode", "engine": "engine_stats"}


def _params(cases: list[dict], pick=lambda c: True) -> list:
    out = []
    for case in cases:
        if not pick(case):
            continue
        marks = []
        if case.get("uncertain"):
            marks.append(pytest.mark.xfail(reason=case.get("note", "uncertain"), strict=False))
        elif case.get("ingest_gap"):
            # A format specscope does not read yet, named in the case: counted, not hidden.
            marks.append(pytest.mark.xfail(reason=case["ingest_gap"], strict=False))
        out.append(pytest.param(case, id=case["file"].removesuffix(".log"), marks=marks))
    return out


_cache: dict[str, specscope.ParseResult] = {}


def _parse(case: dict) -> specscope.ParseResult:
    name = case["file"]
    if name not in _cache:
        text = (WORLD / name).read_text(encoding="utf-8")
        _cache[name] = specscope.parse_text(text)
    return _cache[name]


def _same(got: object, want: object) -> bool:
    if want == "none":
        return got is None
    if isinstance(want, float) or isinstance(got, float):
        if got is None or (isinstance(got, float) and math.isnan(got)):
            return False
        return math.isclose(float(got), float(want), rel_tol=1e-9, abs_tol=1e-9)
    return got == want


def _brief(row: dict) -> dict:
    keys = (
        "line",
        "end_line",
        "engine",
        "engines_aggregated",
        "k",
        "accepted_tokens",
        "draft_tokens",
        "acceptance_rate",
        "mean_acceptance_length",
        "running_reqs",
        "waiting_reqs",
        "kv_cache_usage",
        "prefix_cache_hit_rate",
    )
    return {k: row.get(k) for k in keys if k in row}


def _partial(case: dict, kind: str) -> list[int]:
    return list(case.get(f"partial_{kind}_lines", []))


def test_world_corpus_complete() -> None:
    logs = sorted(p.name for p in WORLD.glob("*.log"))
    assert logs == sorted(c["file"] for c in CASES)


@pytest.mark.parametrize("case", _params(CASES))
@pytest.mark.parametrize("kind", ["spec", "engine"])
def test_counts(case: dict, kind: str) -> None:
    result = _parse(case)
    rows = result.tables.get(TABLES[kind], [])
    want = case["spec_decode" if kind == "spec" else "engine_stats"]
    partial = _partial(case, kind)
    detail = [_brief(r) for r in rows]
    assert want <= len(rows) <= want + len(partial), (
        f"{TABLES[kind]}: got {len(rows)} rows, want {want}"
        + (f" (+ up to {len(partial)} cut records)" if partial else "")
        + f"\nrows: {detail}\nskipped: {[(s.line, s.reason) for s in result.skipped]}"
    )


@pytest.mark.parametrize("case", _params(CASES, lambda c: "bench" in c))
def test_bench_count(case: dict) -> None:
    """Serving-benchmark result blocks (`bench` table), checked where a case says so."""
    result = _parse(case)
    rows = result.tables.get("bench", [])
    assert len(rows) == case["bench"], f"bench: got {len(rows)} rows, want {case['bench']}"


@pytest.mark.parametrize(
    "case", _params(CASES, lambda c: c.get("partial_spec_lines") or c.get("partial_engine_lines"))
)
def test_cut_records_parse_or_are_skipped(case: dict) -> None:
    """A record cut off by the excerpt's end either parses or is reported skipped."""
    result = _parse(case)
    skipped_lines = [s.line for s in result.skipped]
    for kind in ("spec", "engine"):
        partial = _partial(case, kind)
        if not partial:
            continue
        want = case["spec_decode" if kind == "spec" else "engine_stats"]
        extra = len(result.tables.get(TABLES[kind], [])) - want
        unaccounted = [line for line in partial if line not in skipped_lines]
        assert len(unaccounted) <= max(extra, 0), (
            f"{TABLES[kind]}: cut record(s) on line(s) {unaccounted} neither parsed "
            f"nor skipped; skipped = {[(s.line, s.reason) for s in result.skipped]}"
        )


def _value_params() -> list:
    out = []
    for p in _params(CASES):
        case = p.values[0]
        for which in ("first_spec", "last_spec", "first_engine", "last_engine"):
            if which in case:
                out.append(pytest.param(case, which, id=f"{p.id}-{which}", marks=p.marks))
    return out


@pytest.mark.parametrize(("case", "which"), _value_params())
def test_first_last_values(case: dict, which: str) -> None:
    result = _parse(case)
    kind = which.split("_")[1]
    rows = result.tables.get(TABLES[kind], [])
    want_n = case["spec_decode" if kind == "spec" else "engine_stats"]
    # First and last COMPLETE record by position; a cut record, if it parsed, comes after.
    index = 0 if which.startswith("first") else want_n - 1
    assert len(rows) > index, f"no {TABLES[kind]} row #{index + 1}; rows: {len(rows)}"
    row = rows[index]
    expected = case[which]
    wrong = {
        key: (row.get(key), want) for key, want in expected.items() if not _same(row.get(key), want)
    }
    assert not wrong, f"{which} (got, want): {wrong}\nrow: {_brief(row)}"


@pytest.mark.parametrize("case", _params(CASES, lambda c: "config" in c))
def test_run_config(case: dict) -> None:
    result = _parse(case)
    want = case["config"]
    configs = [run.config for run in result.runs]
    assert any(all(_same(cfg.get(k), v) for k, v in want.items()) for cfg in configs), (
        f"no run config holds {want}; configs: {[{k: c.get(k) for k in want} for c in configs]}"
    )


# -- verdicts: what detect says about each excerpt against what its thread concluded ---------

# Kinds that put the blame on speculation: a healthy excerpt must get none of them.
BLAME = {"zero_acceptance", "low_acceptance", "position_cliff", "concurrency_collapse"}
# A reader's kind is matched by any kind of its family (a dead tail is a cliff and a k that
# is too large at once; a reader names one, detect may name the other).
FAMILY = {"position_cliff": {"position_cliff", "k_too_large"}}
FAMILY["k_too_large"] = FAMILY["position_cliff"]


def verdict_agrees(reader: list[str], found: set[str]) -> tuple[bool, str]:
    """Does what detect found agree with the reader's verdict? Every kind the reader names
    is found (or one of its family), and nothing that blames speculation is found that the
    reader did not name; "insufficient data" and a healthy verdict both forbid any blame."""
    wanted = [r for r in reader if r != "insufficient_data"]
    missing = [r for r in wanted if not (FAMILY.get(r, {r}) & found)]
    named = set().union(*(FAMILY.get(r, {r}) for r in wanted)) if wanted else set()
    extra = (found & BLAME) - named
    if missing or extra:
        return False, f"missing {missing}, extra {sorted(extra)}"
    return True, ""


def _verdict_params() -> list:
    out = []
    for case in CASES:
        marks = []
        if case.get("verdict_uncertain") or case.get("verdict_gap"):
            reason = case.get("verdict_gap") or case.get("reader_note", "uncertain")
            marks.append(pytest.mark.xfail(reason=reason, strict=False))
        out.append(pytest.param(case, id=case["file"].removesuffix(".log"), marks=marks))
    return out


_found: dict[str, set[str]] = {}


def detect_kinds(case: dict, tmp_path_factory: pytest.TempPathFactory) -> set[str]:
    """The kinds `specscope detect` reports on the excerpt ingested as a user would (info
    findings about events other than errors left out: they judge nothing)."""
    name = case["file"]
    if name not in _found:
        store = tmp_path_factory.mktemp("world") / "store"
        specscope.ingest([WORLD / name], store=store, year=2026)
        if not (store / "specscope.json").exists():  # nothing stored: no telemetry, no crash
            _found[name] = set()
        else:
            findings = specscope.detect(specscope.open_store(store))
            _found[name] = {
                f.kind
                for f in findings
                if not (f.kind == "error_signature" and f.severity == specscope.Severity.INFO)
            }
    return _found[name]


@pytest.mark.parametrize("case", _verdict_params())
def test_verdict_agrees_with_the_thread(case: dict, tmp_path_factory) -> None:
    found = detect_kinds(case, tmp_path_factory)
    ok, why = verdict_agrees(case["verdict"], found)
    assert ok, f"{why}; reader: {case['verdict']} ({case['reader_note']}); found: {sorted(found)}"


@pytest.mark.parametrize(
    ("reader", "found", "agrees"),
    [
        ([], set(), True),
        ([], {"k_too_large"}, True),  # advice, not blame
        # A request at about 0 or 1 is a sign about the output (garbled, a loop), not blame
        # on speculation; the requests' distribution describes.
        ([], {"request_outlier", "request_acceptance"}, True),
        ([], {"low_acceptance"}, False),
        (["insufficient_data"], {"zero_acceptance"}, False),
        (["zero_acceptance"], {"zero_acceptance", "insufficient_data"}, True),
        (["zero_acceptance"], {"insufficient_data"}, False),
        (["k_too_large"], {"position_cliff"}, True),
        (["low_acceptance"], {"low_acceptance", "concurrency_collapse"}, False),
    ],
)
def test_verdict_agreement_rule(reader, found, agrees) -> None:
    assert verdict_agrees(reader, found)[0] is agrees
