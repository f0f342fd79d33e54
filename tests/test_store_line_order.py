"""A source's rows come back in line order whatever day folders hold them (``store.order``):
a log whose days go back (a paste of two days, records without a time between timed
ones, a log that grew with an earlier day) reads as the same log written before
partitions, row for row and in order, and so does every consumer of that order (the runs
and their sums, detect over every row and over the rows it needs, the report summed in
batches). A log whose days go forward is read as listed: no row is sorted."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import polars as pl
import pytest
from polars.testing import assert_frame_equal

import specscope
import specscope.report.build as build
import specscope.report.streamed as streamed
from specscope.analysis.detectors.needed import gather_needed
from specscope.analysis.evidence import gather
from specscope.report.build import build_report
from specscope.store import writing
from specscope.store.layout import NO_DAY
from specscope.store.order import in_line_order, sort_shuffled
from tests.helpers import ROOT, SEEDS

TABLES = ("spec_decode", "engine_stats", "events", "runs", "run_sums", "bench")
_STAMP = re.compile(r"^(\(APIServer pid=\d+\) INFO) \d\d-\d\d (\d\d:\d\d:\d\d) (\[[^\]]+\] )")
_DOCKER = re.compile(r"^\d{4}-\d\d-\d\dT\S+Z ")  # the generator's docker prefix: a UTC day


def _generated(out: Path, seed: int, size: str = "60K", runs: int = 3) -> list[str]:
    generate = [sys.executable, str(ROOT / "bench" / "generate.py")]
    subprocess.run(
        [*generate, "--size", size, "--runs", str(runs), "--seed", str(seed), "--out", str(out)],
        check=True,
        stdout=subprocess.DEVNULL,
    )
    return out.read_text().splitlines()


def _redated(lines: list[str], days: list[str | None]) -> list[str]:
    """The lines cut into ``len(days)`` stretches, each stamped with its day (None: the
    prefix dropped, so its records have no time)."""
    out = []
    for i, line in enumerate(lines):
        day = days[i * len(days) // len(lines)]
        line = _DOCKER.sub("", line)
        m = _STAMP.match(line)
        if m and day is None:
            line = line[m.end() :]
        elif m:
            line = f"{m.group(1)} {day} {m.group(2)} {m.group(3)}{line[m.end() :]}"
        out.append(line)
    return out


def _ingest_all(store: Path, logs: list[tuple[Path, list[str] | None]], old: bool) -> None:
    """Each log ingested; one given lines is ingested with them first, then whole (grown)."""
    with pytest.MonkeyPatch.context() as mp:
        if old:
            mp.setattr(writing, "DATED", ())  # the writer before partitions
        for log, first in logs:
            whole = log.read_text()
            if first is not None:
                log.write_text("\n".join(first) + "\n")
                specscope.ingest([str(log)], store=store, year=2026).raise_for_errors()
                log.write_text(whole)
            specscope.ingest([str(log)], store=store, year=2026).raise_for_errors()


@pytest.fixture(scope="module")
def stores(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The same logs written by day (``new``) and before partitions (``old``): a log whose
    days go back with a stretch without time, one that grew by an earlier day, one whose
    days go forward, and the seeds."""
    work = tmp_path_factory.mktemp("order")
    back = work / "back.log"
    back.write_text(  # 25 runs: a grouped report, summed in batches
        "\n".join(
            _redated(_generated(back, 1, "150K", 25), ["08-27", "08-25", None, "08-26", "08-25"])
        )
        + "\n"
    )
    grown = work / "grown.log"
    lines = _redated(_generated(grown, 2), ["08-26", "08-24"])
    grown.write_text("\n".join(lines) + "\n")
    forward = work / "forward.log"
    # One run: its clock goes forward (a generated log's restarts go back to any hour).
    days = ["08-24", "08-25", "08-26"]
    forward.write_text("\n".join(_redated(_generated(forward, 3, runs=1), days)) + "\n")
    logs: list[tuple[Path, list[str] | None]] = [
        (back, None),
        (grown, lines[: len(lines) * 3 // 5]),
        (forward, None),
    ]
    logs += [(p, None) for p in sorted(SEEDS.glob("*.txt"))]
    out = {"new": work / "new", "old": work / "old"}
    _ingest_all(out["new"], logs, old=False)
    _ingest_all(out["old"], logs, old=True)
    return out


def _sources(store: Path) -> dict[str, str]:
    rows = specscope.open_store(store).sources.collect()
    return {Path(p).name: s for p, s in rows.select("path", "source_id").iter_rows()}


def test_every_table_reads_row_for_row_as_written_before_partitions(stores):
    new, old = (specscope.open_store(stores[k]) for k in ("new", "old"))
    days = {p.name for p in (stores["new"] / "spec_decode").glob("date=*")}
    assert {"date=2026-08-24", "date=2026-08-27", f"date={NO_DAY}"} <= days
    assert not list((stores["old"] / "spec_decode").glob("date=*"))
    sources = _sources(stores["new"])
    assert sources == _sources(stores["old"])
    # A log whose days go back and forth interleaves its files' lines; one going forward
    # not (nor one whose days went back once: its files are put in order, whole).
    for table in ("spec_decode", "engine_stats"):
        assert sources["back.log"] in new.shuffled(table), table
        assert sources["forward.log"] not in new.shuffled(table), table
        assert not old.shuffled(table)
    for table in TABLES:
        got, want = new.table(table).collect(), old.table(table).collect()
        assert got.height == want.height > 0 or table == "events", table
        assert_frame_equal(got, want, check_exact=True)
    spec = new.spec_decode.collect()
    for (source,), rows in spec.group_by("source_id"):
        assert rows["line"].is_sorted(), source
    # The log that grew: its rows of the first ingest, then the second's, in one order.
    grown = spec.filter(pl.col("source_id") == sources["grown.log"])
    assert grown["ts"].dt.day().unique().sort().to_list() == [24, 26]


def test_a_log_whose_days_go_forward_sorts_no_row(stores):
    store = specscope.open_store(stores["new"])
    forward = _sources(stores["new"])["forward.log"]
    mine = [p for p in store.files("spec_decode") if p.parent.name == f"source_id={forward}"]
    days = [p.parent.parent.name for p in mine]
    assert len(set(days)) == len(days) == 3 and days == sorted(days)  # a file a day, in order
    frame = pl.DataFrame({"source_id": ["a", "a"], "line": [2, 1]})
    assert sort_shuffled(frame, frozenset()) is frame  # nothing read where nothing moves
    assert sort_shuffled(frame, {"a"})["line"].to_list() == [1, 2]
    assert in_line_order([]) == ([], frozenset())


def _findings(ev: Any) -> list[dict[str, Any]]:
    from specscope.analysis.detectors import findings_of

    return sorted((f.to_dict() for f in findings_of(ev)), key=repr)


def test_detect_over_every_row_and_over_the_needed_rows_says_the_same(stores):
    new, old = (specscope.open_store(stores[k]) for k in ("new", "old"))
    whole = gather(new)
    assert_frame_equal(whole.spec, gather(old).spec, check_exact=True)
    assert whole.per_run == gather(old).per_run
    assert _findings(whole) == _findings(gather(old))
    needed = gather_needed(new, batch_rows=50)
    assert _findings(needed) == _findings(gather_needed(old, batch_rows=50))
    assert _findings(needed) == _findings(whole)


def _said(report: Any) -> dict[str, Any]:
    said = report.to_dict()
    said.pop("generated")
    said["chart_specs"] = [spec for _, _, spec in report.charts]
    return said


def test_the_report_summed_in_batches_is_the_one_written_before(stores, monkeypatch):
    want = _said(build_report(specscope.open_store(stores["old"])))
    monkeypatch.setattr(build, "NEEDED_OVER_ROWS", 0)
    monkeypatch.setattr(streamed, "BATCH_ROWS", 40)
    calls: list[int] = []
    real = streamed.streamed
    monkeypatch.setattr(build, "streamed", lambda *a, **k: calls.append(1) or real(*a, **k))
    got = _said(build_report(specscope.open_store(stores["new"])))
    assert calls == [1], "the report did not take the fleet's path"
    assert got.keys() == want.keys()
    for key in want:
        assert got[key] == want[key], key
