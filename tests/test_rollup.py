"""The run sums written beside the rows give what the rows give, whoever wrote them."""

from __future__ import annotations

import math
import sys
from pathlib import Path

import pytest

import specscope
from specscope.acceptance import weighted_acceptance
from specscope.analysis.evidence import gather
from specscope.store import rollup

from .loglines import spec, start, stats
from .prom_servers import Misbehaving

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
SEEDS = sorted((FIXTURES / "seeds").iterdir())
REAL = SEEDS + sorted((FIXTURES / "world").glob("*.log"))


def same(a: object, b: object) -> bool:
    if isinstance(a, float) and isinstance(b, float):
        return (math.isnan(a) and math.isnan(b)) or math.isclose(a, b, rel_tol=1e-12)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    return a == b


def assert_rollups_match_rows(store: specscope.Store) -> None:
    assert store.sums_cover_rows()
    from_rollups = rollup.per_run(store.run_sums)
    from_rows = weighted_acceptance(store.spec_decode, ["run_id"])
    assert from_rollups.schema == from_rows.schema
    assert from_rollups["run_id"].to_list() == from_rows["run_id"].to_list()
    for a, b in zip(from_rollups.to_dicts(), from_rows.to_dicts(), strict=True):
        for column in a:
            assert same(a[column], b[column]), (a["run_id"], column, a[column], b[column])


@pytest.mark.parametrize("seed", REAL, ids=lambda p: p.name)
def test_rollups_of_each_real_log_match_its_rows(seed, tmp_path):
    specscope.ingest([seed], store=tmp_path / "s")
    store = specscope.Store(tmp_path / "s")
    if not store.exists() or store.spec_decode.collect().height == 0:
        pytest.skip("no spec-decode records")
    assert_rollups_match_rows(store)


def test_rollups_of_generated_logs_match_their_rows(tmp_path):
    sys.path.insert(0, str(FIXTURES))
    import synth

    logs = []
    for n in range(12):
        text = synth.generate_seed(n, ("glue", "hardwrap", "compose")[n % 3 : n % 3 + 1]).text
        path = tmp_path / f"g{n}.log"
        path.write_bytes(text if isinstance(text, bytes) else text.encode())
        logs.append(path)
    specscope.ingest(logs, store=tmp_path / "s")
    assert_rollups_match_rows(specscope.open_store(tmp_path / "s"))


def test_a_run_over_two_ingests_sums_as_one(tmp_path):
    # One launch of k = 4 over two ingests of a growing log. (A change of k between
    # records with no restart line is another launch since a9012d7: tests/test_launches.)
    log = tmp_path / "server.log"
    first = [start(7, "m", "eagle", 4), stats(1), spec(2, 100, [80, 60, 40, 20])]
    first += [stats(3), spec(4, 100, [70, 50, 30, 10])]
    log.write_text("\n".join(first) + "\n")
    specscope.ingest([log], store=tmp_path / "s")
    with log.open("a") as f:
        f.write("\n".join([stats(5), spec(6, 50, [40, 30, 20, 10]), stats(7)]) + "\n")
        f.write(spec(8, 50, [45, 35, 25, 15]) + "\n")
    report = specscope.ingest([log], store=tmp_path / "s")
    assert report.sources[0].status == "grown"
    store = specscope.open_store(tmp_path / "s")
    # The grown log's rows went into the source's file, their sums into its rollup's: two
    # rows of sums for the run, in one file each.
    assert len(store.files("run_sums")) == len(store.files("spec_decode")) == 1
    assert store.run_sums.collect().height == 2
    assert_rollups_match_rows(store)
    (row,) = rollup.per_run(store.run_sums).to_dicts()
    assert row["records"] == 4 and row["k"] == 4 and row["drafts"] == 300


def test_a_pull_writes_rollups_too(tmp_path):
    server = Misbehaving("matrix")
    try:
        specscope.pull(server.url, store=tmp_path / "s", since="1h", retries=0)
        specscope.pull(server.url, store=tmp_path / "s", since="1h", retries=0)
    finally:
        server.stop()
    store = specscope.open_store(tmp_path / "s")
    assert store.spec_decode.collect().height > 0
    assert_rollups_match_rows(store)


def test_a_store_without_rollups_for_some_rows_is_summed_from_its_rows(tmp_path):
    logs = SEEDS[:3]
    for log in logs:  # one ingest each
        specscope.ingest([log], store=tmp_path / "s")
    store = specscope.open_store(tmp_path / "s")
    whole = gather(store).per_run
    store.files("run_sums")[0].unlink()  # as if written before rollups were
    assert not store.sums_cover_rows()
    assert gather(store).per_run == whole
    one = next(iter(whole))
    assert list(gather(store, run_ids=[one]).per_run) == [one]


def test_runs_overview_takes_the_rollups_or_the_rows_alike(tmp_path):
    from specscope.analysis.runs import runs_overview

    for log in SEEDS:
        specscope.ingest([log], store=tmp_path / "s")
    store = specscope.open_store(tmp_path / "s")
    with_rollups = runs_overview(store)
    for f in store.files("run_sums"):
        f.unlink()
    assert not store.sums_cover_rows()
    from_rows = runs_overview(store)
    assert with_rollups.columns == from_rows.columns
    for a, b in zip(with_rollups.to_dicts(), from_rows.to_dicts(), strict=True):
        for column in a:
            assert same(a[column], b[column]), (column, a[column], b[column])
