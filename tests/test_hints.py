"""The commands a finding's next step names work as printed (with their placeholders
filled in): saying what a log did not (``--set``) on a stored run re-reads nothing and
changes that run alone; the same on a paste given to triage."""

from __future__ import annotations

import re

import specscope
from specscope.analysis.detectors import detect

from .loglines import spec, start, stats

# An MTP run at zero acceptance (its log says nothing of the quantization), then a healthy
# run of another model: two runs of one log.
LINES = [
    start(1, "org/Qwen3.5-27B", "mtp", 3),
    *[line for i in range(1, 4) for line in (stats(i), spec(i, 200, [0, 0, 0]))],
    start(2, "org/Other-8B", "eagle3", 3),
    *[line for i in range(4, 7) for line in (stats(i, pid=2), spec(i, 200, [150, 100, 60], 2))],
]


def _stored(cli, tmp_path):
    """The log, ingested into a store of its own: (log, store)."""
    log = tmp_path / "server.log"
    log.write_text("\n".join(LINES) + "\n", encoding="utf-8")
    store = tmp_path / "store"
    assert cli("ingest", log, "--store", store, "--year", "2026").status == 0
    return log, store


def _zero(store):
    (zero,) = [f for f in detect(specscope.open_store(store)) if f.kind == "zero_acceptance"]
    return zero


def test_the_set_hint_of_a_stored_run_works_as_printed(cli, tmp_path):
    log, store = _stored(cli, tmp_path)
    zero = _zero(store)
    assert "quantized target (int4-awq)" not in zero.explanation
    hint = re.search(r"specscope ingest LOG --run (\S+) for the stored run", zero.next_step)
    assert hint is not None and "--set quantization=NAME" in zero.next_step, zero.next_step
    run_id = hint.group(1)
    assert run_id == zero.run_id
    r = cli("ingest", log, "--run", run_id, "--set", "quantization=int4-awq", "--store", store)
    assert r.status == 0, r.err
    assert f"quantization=int4-awq set on {run_id} (the log was not re-read)" in r.out
    runs = {r["run_id"]: r for r in specscope.open_store(store).runs.collect().to_dicts()}
    assert runs[run_id]["quantization"] == "int4-awq"
    assert runs[run_id]["quantization_source"] == "user"
    other = next(rid for rid in runs if rid != run_id)
    assert runs[other]["quantization"] is None  # the other run of the log is left alone
    assert "quantized target (int4-awq)" in _zero(store).explanation


def test_set_on_an_unchanged_log_sets_all_its_runs_and_label_is_a_setting(cli, tmp_path):
    log, store = _stored(cli, tmp_path)
    r = cli("ingest", log, "--set", "label=before-fix", "--set", "hardware=H100", "--store", store)
    assert r.status == 0, r.err
    runs = specscope.open_store(store).runs.collect()
    assert runs["label"].to_list() == ["before-fix", "before-fix"]
    assert runs["hardware"].to_list() == ["H100", "H100"]
    assert runs.height == 2  # the runs were rewritten, not added to


def test_a_run_that_is_not_in_the_store_is_a_usage_error(cli, tmp_path):
    log, store = _stored(cli, tmp_path)
    r = cli("ingest", log, "--run", "s000-9", "--set", "k=3", "--store", store)
    assert r.status == 2 and "--run s000-9: no such run in the store" in r.err


def test_the_set_hint_works_on_a_paste_given_to_triage(cli, tmp_path):
    log = tmp_path / "paste.log"
    log.write_text("\n".join(LINES) + "\n", encoding="utf-8")
    before = cli("triage", log)
    assert "specscope triage LOG" in before.out
    assert "quantized target (int4-awq)" not in before.out
    after = cli("triage", log, "--set", "quantization=int4-awq")
    assert "quantized target (int4-awq)" in after.out
