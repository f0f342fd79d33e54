"""Detection over many runs (issue 23): the screens that keep row-reading detectors to the
runs they need give the findings of the detectors run over every run, and the rollups
give what the rows give. Real stores: a synthetic fleet written through the store writer
(``bench/fleet_store.py``) and every real excerpt of the fixtures ingested together."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import polars as pl
import pytest
from polars.testing import assert_frame_equal

import specscope
from specscope.acceptance import weighted_acceptance
from specscope.analysis.detectors import findings_of
from specscope.analysis.evidence import evidence_from, gather
from specscope.store.reading import open_store
from specscope.store.rollup import per_run
from tests.helpers import FIXTURES, ROOT, SEEDS

sys.path.insert(0, str(ROOT / "bench"))

from fleet_store import Fleet, write_fleet


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """40 servers for a day at one interval a minute, every row stored, every sickness."""
    path = tmp_path_factory.mktemp("fleet") / "store"
    write_fleet(path, Fleet(servers=40, days=1, interval_s=60, sample=1.0, every_sickness=True))
    return path


def _said(findings: list[Any]) -> list[dict[str, Any]]:
    return [f.to_dict() for f in findings]


def test_fleet_rollups_are_the_sums_of_its_rows(fleet: Path) -> None:
    store = open_store(fleet)
    assert store.sums_cover_rows()
    from_rollups = per_run(store.run_sums).sort("run_id")
    from_rows = weighted_acceptance(store.spec_decode, ["run_id"]).sort("run_id")
    assert from_rollups.height == store.runs.collect().height > 100
    assert_frame_equal(from_rollups, from_rows, check_dtypes=False)


def test_screens_keep_every_finding_of_the_fleet(fleet: Path) -> None:
    ev = gather(open_store(fleet))
    everything = _said(findings_of(ev, screened=False))
    kinds = {f["kind"] for f in everything}
    # Each sickness the fleet was given is found, so each screen had something to keep.
    assert {
        "zero_acceptance",
        "low_acceptance",
        "concurrency_collapse",
        "acceptance_drift",
        "kv_cache_saturation",
        "prefix_cache_penalty",
        "k_too_large",
    } <= kinds
    assert _said(findings_of(ev)) == everything


def test_rollup_path_gives_the_row_path_findings(fleet: Path) -> None:
    store = open_store(fleet)
    from_rollups = gather(store)
    from_rows = evidence_from(
        store.spec_decode.collect(),
        store.engine_stats.collect(),
        store.runs.collect(),
        store.events.collect(),
        store.bench.collect(),
    )
    assert list(from_rollups.per_run) == list(from_rows.per_run)
    assert _said(findings_of(from_rollups)) == _said(findings_of(from_rows, screened=False))


@pytest.fixture(scope="module")
def excerpts(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Every seed and world excerpt in one store: runs of every engine and shape, launches
    without speculation beside ones with it, benchmarks and stated comparisons."""
    logs = sorted(SEEDS.glob("*.txt")) + sorted((FIXTURES / "world").glob("*.log"))
    assert len(logs) > 50
    store = tmp_path_factory.mktemp("excerpts") / "store"
    specscope.ingest(logs, store=store, year=2026)
    return store


def test_screens_keep_every_finding_of_the_real_excerpts(excerpts: Path) -> None:
    store = excerpts
    ev = gather(open_store(store))
    everything = _said(findings_of(ev, screened=False))
    assert len({f["kind"] for f in everything}) >= 8
    assert _said(findings_of(ev)) == everything
    # The same without the benchmarks, where no_speedup's screen narrows to the sources
    # that hold a launch without speculation.
    bare = gather(open_store(store))
    bare.bench = bare.bench.clear()
    assert _said(findings_of(bare)) == _said(findings_of(bare, screened=False))


def test_a_store_of_many_runs_detects_the_same_whatever_the_order(fleet: Path) -> None:
    """Narrowing keeps the runs' order: findings come in it, and so do reports."""
    ev = gather(open_store(fleet))
    ids = list(ev.runs)
    from specscope.analysis.detectors.screens import narrowed

    half = narrowed(ev, ids[::2])
    assert list(half.runs) == ids[::2]
    assert half.spec is ev.spec
    assert pl.Series(list(half.runs)).is_in(ids).all()


def _sampled_fleet(path: Path) -> Path:
    write_fleet(path, Fleet(servers=35, days=2, interval_s=30, sample=0.2, every_sickness=True))
    return path


def test_reading_the_rows_a_question_needs_finds_what_reading_all_finds(tmp_path: Path) -> None:
    """``gather_needed`` reads the rows of a few runs (most runs of a fleet are healthy)
    and finds exactly what every row gives, by batches of any size, on any threads."""
    from specscope.analysis.detectors.needed import gather_needed

    store = open_store(_sampled_fleet(tmp_path / "store"))
    everything = gather(store)
    want = _said(findings_of(everything))
    assert len(want) > 20
    for workers, batch in ((2, 30_000), (1, 10**9)):
        needed = gather_needed(store, workers=workers, batch_rows=batch)
        assert needed.spec.height < everything.spec.height
        assert _said(findings_of(needed)) == want
    some = list(everything.runs)[::7]
    assert _said(findings_of(gather_needed(store, run_ids=some))) == _said(
        findings_of(gather(store, run_ids=some))
    )


def test_reading_what_is_needed_on_the_real_excerpts(excerpts: Path) -> None:
    from specscope.analysis.detectors.needed import gather_needed

    opened = open_store(excerpts)
    assert opened.sums_cover_rows()
    want = _said(findings_of(gather(opened)))
    assert _said(findings_of(gather_needed(opened, batch_rows=500))) == want


@pytest.fixture(scope="module")
def restarts(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``bench/generate.py --size 20M --runs 1000`` (the report benchmark's 651-run store):
    a server restarted with every synthetic run, a fifth of them data parallel."""
    from generate import write_server

    root = tmp_path_factory.mktemp("restarts")
    with (root / "server.log").open("w") as out:
        write_server(out, 20 * 2**20, 0, runs=1000)
    specscope.ingest([root / "server.log"], store=root / "store", year=2026)
    return root / "store"


def test_screens_keep_every_engine_finding_of_data_parallel_runs(restarts: Path) -> None:
    """Drift and concurrency in one pass over every run, engine by engine where a run has
    more than one: the same findings as every run's rows looked at one run at a time."""
    from specscope.analysis.detectors import screens

    ev = gather(open_store(restarts))
    dp = ev.data_parallel()
    assert 50 < len(dp) < len(ev.runs) / 2
    everything = _said(findings_of(ev, screened=False))
    by_engine = {f["kind"] for f in everything if "engine" in f["measured"]}
    assert {"acceptance_drift", "concurrency_collapse", "low_acceptance"} <= by_engine
    assert _said(findings_of(ev)) == everything
    # A data-parallel run passes the concurrency screen only where an engine collapses:
    # most do not, and each one found is let through.
    kept = screens.concurrency(ev)
    assert kept is not None
    collapsed = {f["run_id"] for f in everything if f["kind"] == "concurrency_collapse"}
    assert collapsed <= kept
    assert len(dp & kept) < len(dp) / 4
    # Engine sums made in one pass are each run's own, engine by engine.
    from specscope.analysis.evidence import engine_sums

    for run_id in sorted(dp)[:20]:
        rows = ev.spec_of(run_id)
        for engine, sums in engine_sums(ev, run_id):
            mine = rows.filter(pl.col("engine") == engine)
            assert sums["draft_tokens"] == mine["draft_tokens"].sum()
            assert sums["records"] == mine.height


@pytest.mark.parametrize("seed", range(4))
def test_drift_splits_many_series_as_drift_split_splits_each(seed: int) -> None:
    """The drift detector's batch of series split at once gives each series' own
    ``stats.drift_split``: steady series, a change of level, ties and series whose
    sides never hold enough drafts, taken from rows in any order."""
    import numpy as np

    from specscope.analysis.detectors.drift import _splits
    from specscope.stats import drift_split

    rng = np.random.default_rng(seed)
    rows = []
    for _ in range(60):
        n = int(rng.integers(2, 40))
        drafts = rng.integers(0, 30, n)
        level = np.where(
            np.arange(n) < rng.integers(1, n + 1), rng.uniform(0, 1), rng.uniform(0, 1)
        )
        tokens = drafts * 3
        rows.append(np.column_stack([drafts, tokens, np.floor(tokens * level).astype(np.int64)]))
    counts = np.concatenate(rows)
    ends = np.cumsum([len(r) for r in rows])
    ats = [np.arange(e - len(r), e) for e, r in zip(ends, rows, strict=True)]
    ats = [at[rng.permutation(len(at))] if i % 5 == 0 else at for i, at in enumerate(ats)]
    for z in (1.96, 3.29):
        got = _splits(counts, ats, 40, 0.1, z)
        want = [drift_split(*np.cumsum(counts[at], axis=0).T, 40, 0.1, z) for at in ats]
        assert got == want
        assert any(w is not None for w in want) and any(w is None for w in want)
