"""A report over a fleet's rows (issue 23) sums them a batch of sources at a time
(``report.streamed``) and takes its findings from the rows ``detect`` needs; the same
report as from every row held at once. Real stores: a synthetic fleet written through the
store writer (pulls: rows matched to their engine stats by time) and a generated server log
cut into many runs (rows matched by line), each read in batches of a few sources."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import specscope
import specscope.report.build as build
import specscope.report.streamed as streamed
from specscope.report import setups
from specscope.report.build import build_report
from specscope.store.reading import open_store
from tests.helpers import ROOT

sys.path.insert(0, str(ROOT / "bench"))

from fleet_store import Fleet, write_fleet


@pytest.fixture(scope="module")
def pulled(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """42 servers of six setups for a day, a sickness each for some, a third of the
    intervals stored as rows (the rollups hold them all), a source per ten servers."""
    path = tmp_path_factory.mktemp("pulled") / "store"
    write_fleet(
        path,
        Fleet(servers=42, days=1, interval_s=60, sample=0.3, every_sickness=True, per_source=10),
    )
    return path


@pytest.fixture(scope="module")
def logged(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """2 MB of generated vLLM server log, restarted into 60 runs, in three files."""
    work = tmp_path_factory.mktemp("logged")
    store = work / "store"
    for part in range(3):
        log = work / f"server{part}.log"
        subprocess.run(
            [
                sys.executable,
                str(ROOT / "bench" / "generate.py"),
                "--size",
                "700K",
                "--runs",
                "20",
                "--seed",
                str(part + 1),
                "--out",
                str(log),
            ],
            check=True,
            stdout=subprocess.DEVNULL,
        )
        specscope.ingest(log, store=store).raise_for_errors()
    return store


def _both(path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[dict[str, Any], dict[str, Any]]:
    """The report from every row, and from the needed rows with the rest summed in batches
    of a few hundred rows (several sources a batch, many batches)."""
    store = open_store(path)
    assert store.sums_cover_rows()
    whole = build_report(store)
    monkeypatch.setattr(build, "NEEDED_OVER_ROWS", 0)
    monkeypatch.setattr(streamed, "BATCH_ROWS", 300)
    calls: list[int] = []
    real = streamed.streamed
    monkeypatch.setattr(build, "streamed", lambda *a, **k: calls.append(1) or real(*a, **k))
    batched = build_report(store)
    assert calls == [1], "the report did not take the fleet's path"
    assert whole.grouped and batched.grouped
    return _said(whole), _said(batched)


def _said(report: Any) -> dict[str, Any]:
    said = report.to_dict()
    said.pop("generated")
    said["chart_specs"] = [spec for _, _, spec in report.charts]
    return said


@pytest.mark.parametrize("store", ["pulled", "logged"])
def test_a_report_summed_in_batches_is_the_report_of_every_row(
    store: str, request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = request.getfixturevalue(store)
    whole, batched = _both(path, monkeypatch)
    # Every chart drawn (so each sum was made), and each the same.
    names = [c["name"] for c in whole["charts"]]
    assert {"over_time", "running", "across_runs", "per_position"} <= set(names), names
    for name, a, b in zip(names, whole["chart_specs"], batched["chart_specs"], strict=True):
        assert a == b, name
    assert whole["what_moves_acceptance"] and whole["findings"]
    for key in whole:
        assert whole[key] == batched[key], key


def test_a_run_asked_for_is_summed_alone(pulled: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store = open_store(pulled)
    runs = store.runs.collect()["run_id"].to_list()[:30]  # over 20: grouped
    whole = _said(build_report(store, run_ids=runs))
    monkeypatch.setattr(build, "NEEDED_OVER_ROWS", 0)
    monkeypatch.setattr(streamed, "BATCH_ROWS", 300)
    batched = _said(build_report(store, run_ids=runs))
    assert whole == batched
    assert whole["runs_not_listed"] + len(whole["runs"]) == 30


def _cut(move: dict[str, Any], keep: int) -> dict[str, Any]:
    """All of a factor's matched pairs cut, in full, to ``keep`` at each end."""
    pairs = move["matched_pairs"]
    if len(pairs) <= 2 * keep:
        return {**move, "matched_pairs_total": len(pairs)}

    def rank(p: dict[str, Any]) -> tuple[float, str, str]:
        return (p["difference"], p["run_a"], p["run_b"])

    ranked = sorted(pairs, key=rank)
    return {
        **move,
        "matched_pairs": ranked[:keep] + ranked[-keep:],
        "matched_pairs_total": len(pairs),
    }


def test_the_pairs_kept_are_those_at_either_end_of_all_of_them(pulled: Path) -> None:
    """Over many runs alike, what_moves counts the pairs and makes only those it keeps:
    the same as making every pair and cutting the list."""
    from specscope.analysis.evidence import gather
    from specscope.analysis.factors import what_moves

    ev = gather(open_store(pulled))
    rows = ev.spec.select("run_id", "drafts", "draft_tokens", "accepted_tokens", "running_reqs")
    every = what_moves(rows, ev.runs, z=1.96)
    kept = what_moves(rows, ev.runs, z=1.96, keep_pairs=12)
    assert max(len(m["matched_pairs"]) for m in every) > 24  # some factor was cut
    assert any(0 < len(m["matched_pairs"]) <= 24 for m in every)  # and some was not
    assert kept == [_cut(m, 12) for m in every]


def test_a_report_of_every_run_summed_in_batches_holds_no_row_and_says_the_same(
    pulled: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``report --per-run`` over a fleet: every run listed, from the rollups and the rows
    ``detect`` needs, its charts summed a batch at a time under each run's own name."""
    store = open_store(pulled)
    whole = build_report(store, per_run=True)
    monkeypatch.setattr(build, "NEEDED_OVER_ROWS", 0)
    monkeypatch.setattr(streamed, "BATCH_ROWS", 300)
    calls: list[int] = []
    real = streamed.streamed
    monkeypatch.setattr(build, "streamed", lambda *a, **k: calls.append(1) or real(*a, **k))
    batched = build_report(store, per_run=True)
    assert calls == [1], "the report did not take the fleet's path"
    a, b = _said(whole), _said(batched)
    assert not whole.grouped and not batched.grouped
    assert len(a["runs"]) == store.runs.collect().height > 100
    names = [c["name"] for c in a["charts"]]
    assert {"over_time", "running", "across_runs", "per_position"} <= set(names), names
    assert names == [c["name"] for c in b["charts"]]

    def listed(values: list[Any]) -> list[str]:
        # The runs come in another order (the rollups' from the needed rows' evidence).
        return sorted(json.dumps(v, sort_keys=True) for v in values)

    for name, x, y in zip(names, a["chart_specs"], b["chart_specs"], strict=True):
        if name in ("over_time", "prefix_cache"):
            continue  # binned over all runs at once when summed, not run by run
        x["data"]["values"], y["data"]["values"] = (
            listed(x["data"]["values"]),
            listed(y["data"]["values"]),
        )
        assert x == y, name
    # The pairs each factor matched are cut to those at either end, as in a grouped report.
    a["what_moves_acceptance"] = [_cut(m, setups.PAIRS_KEPT) for m in a["what_moves_acceptance"]]
    for key in a:
        if key in ("per_position", "advice"):
            assert listed(a[key]) == listed(b[key]), key
        elif key not in ("charts", "chart_specs", "redaction"):  # it counts the pairs' hosts
            assert a[key] == b[key], key
