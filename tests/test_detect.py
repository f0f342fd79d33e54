"""`specscope detect` and `advise`: the seed scenarios give what a careful reader expects,
and each finding kind fires on the data that should trigger it and not on healthy data."""

from __future__ import annotations

import json

import polars as pl
import pytest

import specscope
from specscope.analysis.advise import advise, k_curve
from specscope.analysis.detectors import detect
from specscope.analysis.findings import Severity
from specscope.errors import ExitStatus
from specscope.stats import wilson
from specscope.thresholds import load_reference

from .helpers import SEEDS
from .loglines import spec, start, stats

INT4 = SEEDS / "003_83783f5568908b19.txt"
DFLASH = SEEDS / "002_2dcac71f91935498.txt"


def _store(tmp_path, *paths, **kw):
    store = tmp_path / "store"
    specscope.ingest(list(paths), store=store, year=2026, **kw).raise_for_errors()
    return specscope.open_store(store)


def _log(tmp_path, name, lines):
    path = tmp_path / name
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def _kinds(findings, severity=Severity.INFO):
    return {(f.kind, f.run_id) for f in findings if f.severity >= severity}


# -- the seeds ------------------------------------------------------------------------------


def test_seed_003_int4_mtp_is_zero_acceptance(tmp_path):
    store = _store(tmp_path, INT4)
    found = detect(store)
    zero = [f for f in found if f.kind == "zero_acceptance"]
    assert [f.run_id for f in zero] == ["s54e95cd2ea-2"]
    assert zero[0].severity == Severity.CRITICAL
    assert "MTP" in zero[0].explanation and "INT4" in zero[0].explanation
    assert zero[0].lines == (20, 44)
    assert zero[0].sample["drafts"] == 4869
    # the BF16 run (85.8% at its end) is healthy
    assert not {f for f in found if f.run_id == "s54e95cd2ea-3" and f.severity >= Severity.WARNING}


def test_seed_003_with_the_quantization_said(tmp_path):
    store = _store(tmp_path, INT4, overrides={"quantization": "int4-awq"})
    (zero,) = [f for f in detect(store) if f.kind == "zero_acceptance"]
    assert "quantized target (int4-awq)" in zero.explanation
    assert "BF16 or FP8" in zero.next_step


def test_seed_002_concurrency_collapse(tmp_path):
    store = _store(tmp_path, DFLASH)
    found = detect(store)
    (collapse,) = [f for f in found if f.kind == "concurrency_collapse"]
    assert collapse.severity == Severity.CRITICAL
    assert collapse.measured["rate_one_running"] == pytest.approx(0.372, abs=0.01)
    assert collapse.measured["rate_two_or_more"] == pytest.approx(0.106, abs=0.01)
    # the benchmark runs on BF16 and FP8 (tau 8.09 and 7.98) are healthy
    for run_id in ("s09b4732cdd-2", "s09b4732cdd-3"):
        assert not [f for f in found if f.run_id == run_id and f.severity >= Severity.WARNING]


def test_healthy_seed_runs_have_no_warning(tmp_path):
    store = _store(tmp_path, INT4, DFLASH)
    flagged = _kinds(detect(store), Severity.WARNING)
    healthy = {"s54e95cd2ea-3", "s09b4732cdd-2", "s09b4732cdd-3"}
    assert not {run for _, run in flagged if run in healthy}


# -- each kind on a scenario built for it ------------------------------------------------------


def _scenario(tmp_path, name, lines, **kw):
    return _store(tmp_path, _log(tmp_path, name, lines), **kw)


def test_position_cliff(tmp_path):
    lines = [start(7, "meta-llama/Llama-3.1-8B-Instruct", "eagle3", 3)]
    for i in range(1, 8):
        lines += [stats(i, pid=7), spec(i, 100, [83, 7, 5], pid=7)]
    (cliff,) = [
        f for f in detect(_scenario(tmp_path, "cliff.log", lines)) if f.kind == "position_cliff"
    ]
    assert cliff.measured["position"] == 1
    assert cliff.measured["conditional"] == pytest.approx(7 / 83, abs=0.01)


def test_k_too_large_for_a_chain_drafter(tmp_path):
    lines = [start(3, "Qwen/Qwen3-8B", "eagle", 8)]
    for i in range(1, 8):
        lines += [stats(i, pid=3), spec(i, 100, [80, 60, 40, 5, 2, 1, 0, 0], pid=3)]
    store = _scenario(tmp_path, "k.log", lines)
    (k,) = [f for f in detect(store) if f.kind == "k_too_large"]
    assert k.expected["k"] == 3
    assert k.expected["tau"] == pytest.approx(2.8, abs=0.01)
    (advice,) = advise(store)
    assert advice.best_k == 3 and advice.k == 8 and not advice.block


def test_no_k_advice_for_a_healthy_curve(tmp_path):
    lines = [start(3, "Qwen/Qwen3-8B", "eagle", 3)]
    for i in range(1, 8):
        lines += [stats(i, pid=3), spec(i, 100, [80, 60, 45], pid=3)]
    assert not [
        f
        for f in detect(_scenario(tmp_path, "ok.log", lines))
        if f.kind != "k_too_large" and f.severity >= Severity.WARNING
    ]
    assert not [
        f for f in detect(specscope.open_store(tmp_path / "store")) if f.kind == "k_too_large"
    ]


def test_low_acceptance_against_the_reference(tmp_path):
    lines = [start(5, "deepseek-ai/DeepSeek-V3", "deepseek_mtp", 1)]
    for i in range(1, 10):
        lines += [stats(i, pid=5), spec(i, 200, [30], pid=5)]
    (low,) = [
        f for f in detect(_scenario(tmp_path, "low.log", lines)) if f.kind == "low_acceptance"
    ]
    # The reference entry for MTP on DeepSeek-V3 (its technical report), not the generic one.
    (entry,) = [
        e
        for e in load_reference()
        if e["method"] == "mtp" and e.get("model") == "deepseek-v3" and "a1" in e
    ]
    assert low.expected["a1"] == entry["a1"] and low.measured["a1"] == pytest.approx(0.15)
    assert low.severity == Severity.CRITICAL  # below a quarter of what MTP reaches
    assert low.confidence is not None and low.confidence.level == "certain"  # 0.15 of 1,800


def test_prefix_cache_penalty_across_runs(tmp_path):
    lines = [start(11, "Qwen/Qwen3.5-27B", "dflash", 3, enable_prefix_caching=True)]
    for i in range(1, 8):
        lines += [stats(i, pid=11), spec(i, 100, [40, 20, 10], pid=11)]
    lines += [start(12, "Qwen/Qwen3.5-27B", "dflash", 3, enable_prefix_caching=False)]
    for i in range(10, 17):
        lines += [stats(i, pid=12), spec(i, 100, [80, 60, 40], pid=12)]
    found = detect(_scenario(tmp_path, "pc.log", lines))
    (penalty,) = [f for f in found if f.kind == "prefix_cache_penalty"]
    assert penalty.measured["rate_caching_on"] == pytest.approx(70 / 300)
    assert penalty.measured["rate_caching_off"] == pytest.approx(180 / 300)


def test_kv_cache_saturation(tmp_path):
    lines = []
    for i in range(1, 9):
        lines += [stats(i, running=30, waiting=12, kv=98.5), spec(i, 100, [70, 50])]
    assert [
        f.kind
        for f in detect(_scenario(tmp_path, "kv.log", lines))
        if f.kind == "kv_cache_saturation"
    ] == ["kv_cache_saturation"]


def test_acceptance_drift(tmp_path):
    lines = []
    for i in range(1, 9):
        lines += [stats(i), spec(i, 100, [70, 50] if i < 5 else [20, 5])]
    (drift,) = [
        f for f in detect(_scenario(tmp_path, "drift.log", lines)) if f.kind == "acceptance_drift"
    ]
    assert drift.severity == Severity.WARNING
    assert drift.measured["rate_before"] == pytest.approx(0.6)
    assert drift.measured["rate_after"] == pytest.approx(0.125)


def test_insufficient_data(tmp_path):
    """10 drafts at about 50%: too few to call it low or healthy; the finding says what
    would settle it."""
    found = detect(_scenario(tmp_path, "few.log", [stats(1), spec(1, 10, [6, 4])]))
    assert [f.kind for f in found] == ["insufficient_data"]
    assert "more drafts would tell" in found[0].explanation


def test_zero_acceptance_from_a_small_sample(tmp_path):
    """0 accepted of 150 drafts already bounds the rate far below any working drafter: no
    count gate keeps it back, and its confidence says how sure it is."""
    found = detect(_scenario(tmp_path, "zero.log", [stats(1), spec(1, 150, [0, 0, 0])]))
    (zero,) = [f for f in found if f.kind == "zero_acceptance"]
    assert zero.confidence is not None and zero.confidence.level == "certain"
    assert zero.confidence.sample == {"drafts": 150}
    assert "insufficient_data" not in {f.kind for f in found}
    # 0 of 3 drafts proves nothing
    (tmp_path / "b").mkdir()
    few = detect(_scenario(tmp_path / "b", "few0.log", [stats(1), spec(1, 3, [0, 0, 0])]))
    assert [f.kind for f in few] == ["insufficient_data"]


@pytest.mark.parametrize(
    ("drafted", "level", "assumes_k"),
    [(150, "suggestive", True), (402, "likely", False), (2000, "certain", False)],
)
def test_zero_acceptance_with_k_unknown(tmp_path, drafted, level, assumes_k):
    """A pasted counts pair says no k: a claim that holds even at the largest k a drafter
    uses (the fewest drafts the tokens can be) assumes none; one that needs k=3 says so."""
    log = _log(tmp_path, "pair.log", [f"Accepted: 0 tokens, Drafted: {drafted} tokens"])
    found = detect(_store(tmp_path, log))
    (zero,) = [f for f in found if f.kind == "zero_acceptance"]
    assert zero.confidence is not None and zero.confidence.level == level
    assert any("k not stated" in a for a in zero.confidence.assumptions) == assumes_k
    assert ("any k up to 16" in zero.confidence.test) != assumes_k


def test_a_dead_tail_on_one_interval(tmp_path):
    """164 drafts at k=16 with positions 7-16 at 0: the tail is dead on one interval."""
    counts = [150, 130, 110, 90, 60, 30, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]
    found = detect(_scenario(tmp_path, "tail.log", [stats(1), spec(1, 164, counts)]))
    (tail,) = [f for f in found if f.kind == "k_too_large"]
    assert tail.expected["k"] <= 6 and tail.confidence is not None
    assert "insufficient_data" not in {f.kind for f in found}


def test_every_finding_carries_its_confidence(tmp_path):
    store = tmp_path / "s"
    specscope.ingest([INT4, DFLASH], store=store, year=2026).raise_for_errors()
    found = detect(specscope.open_store(store))
    assert found and all(f.confidence is not None for f in found)
    for f in found:
        d = f.to_dict()["confidence"]
        assert d["level"] in ("certain", "likely", "suggestive") and d["phrase"].startswith(
            d["level"]
        )


def test_a_confidence_phrase_counts_one_in_the_singular():
    from specscope.analysis.findings import Confidence

    assert Confidence("certain", "the log says so", {"events": 1}).phrase() == (
        "certain (the log says so; 1 event)"
    )
    assert Confidence("likely", "bound", {"drafts": 1_025, "records": 1}).phrase() == (
        "likely (bound; 1,025 drafts, 1 record)"
    )


def test_error_signature(tmp_path):
    lines = [
        stats(1),
        spec(1, 300, [200, 100]),
        "RuntimeError: The size of tensor a (5120) must match the size of tensor b "
        "(4096) at non-singleton dimension 1",
    ]
    (err,) = [
        f for f in detect(_scenario(tmp_path, "err.log", lines)) if f.kind == "error_signature"
    ]
    assert err.severity == Severity.CRITICAL and err.lines == (3, 3)


def test_no_speedup_from_bench_blocks(tmp_path):
    block = """============ Serving Benchmark Result ============
Successful requests:                     100
Maximum request concurrency:             8
Benchmark duration (s):                  60.0
Output token throughput (tok/s):         {tput}
{spec}=================================================="""
    section = """---------------Speculative Decoding---------------
Acceptance rate (%):                     30.00
Acceptance length:                       2.20
Drafts:                                  10000
Draft tokens:                            40000
Accepted tokens:                         12000
"""
    text = block.format(tput="588.00", spec="") + "\n" + block.format(tput="410.00", spec=section)
    found = detect(_scenario(tmp_path, "bench.txt", text.splitlines()))
    (slow,) = [f for f in found if f.kind == "no_speedup"]
    assert slow.measured["speedup"] == pytest.approx(410 / 588)


# -- the command ------------------------------------------------------------------------------


def test_cli_exit_statuses_and_json(cli, tmp_path):
    store = tmp_path / "s"
    assert cli("ingest", INT4, "--store", store).status == 0
    r = cli("detect", "--store", store, "--fail-on", "critical")
    assert r.status == ExitStatus.FINDINGS
    assert r.out.startswith("CRITICAL zero_acceptance")
    data = json.loads(cli("detect", "--store", store, "--json").out)
    assert data[0]["kind"] == "zero_acceptance" and data[0]["severity"] == "critical"
    assert (
        cli("detect", "--store", store, "--run", "s54e95cd2ea-3", "--fail-on", "warning").status
        == 0
    )
    bad = cli("detect", "--store", store, "--run", "nope")
    assert bad.status == ExitStatus.USAGE and "no run nope" in bad.err
    assert cli("detect", "--store", store, "--fail-on", "loud").status == ExitStatus.USAGE


def test_cli_advise(cli, tmp_path):
    store = tmp_path / "s"
    assert cli("ingest", DFLASH, "--store", store).status == 0
    # The k=16 run of most intervals (the author's stated rates are runs of their own, so
    # its ordinal moves with what the parser reads of the prose around it).
    spec = specscope.open_store(store).spec_decode.filter(pl.col("k") == 16).collect()
    run = spec["run_id"].value_counts(sort=True)["run_id"][0]
    r = cli("advise", "--store", store, "--run", run, "--cost-ratio", "0.1")
    assert r.status == 0 and "<- best" in r.out
    (item,) = json.loads(cli("advise", "--store", store, "--run", run, "--json").out)
    assert item["k"] == 16 and 1 <= item["best_k"] < 16


def test_config_overrides_thresholds(cli, tmp_path):
    store = tmp_path / "s"
    cli("ingest", INT4, "--store", store)
    config = tmp_path / "detect.toml"
    # Demanding far wider intervals: nothing can be claimed, every run is insufficient data.
    config.write_text(
        "[evidence]\nz = 60.0\nz_claim = 60.0\nz_certain = 80.0\nmin_drafts_per_side = 100000\n"
    )
    data = json.loads(cli("detect", "--store", store, "--config", config, "--json").out)
    assert {d["kind"] for d in data} == {"insufficient_data"}
    config.write_text("[nonsense]\nx = 1\n")
    assert cli("detect", "--store", store, "--config", config).status == ExitStatus.USAGE


def test_wilson_and_k_curve():
    low, high = wilson(50, 100, 1.96)
    assert low < 0.5 < high and high - low < 0.2
    assert wilson(0, 0, 1.96) == (0.0, 1.0)
    curve = k_curve([0.8, 0.6, 0.1], 0.1, block=False)
    assert [round(p["tau"], 2) for p in curve] == [1.8, 2.4, 2.5]
    assert curve[1]["speedup"] == pytest.approx(2.4 / 1.2)


def _drift_split_loop(drafts, tokens, accepted, need, min_change, z):
    """The split search as a plain loop over Python floats: what drift_split vectorises."""
    from specscope.stats import rate_interval as _rate_interval

    total_d, total_t, total_a = drafts[-1], tokens[-1], accepted[-1]
    best = None
    for i in range(1, len(drafts)):
        d1, t1, a1 = drafts[i - 1], tokens[i - 1], accepted[i - 1]
        d2, t2, a2 = total_d - d1, total_t - t1, total_a - a1
        if d1 < need or d2 < need or not t1 or not t2:
            continue
        r1, r2 = a1 / t1, a2 / t2
        lo1, hi1 = _rate_interval(a1, d1, t1 / d1, z)
        lo2, hi2 = _rate_interval(a2, d2, t2 / d2, z)
        if (
            abs(r2 - r1) >= min_change
            and (hi1 < lo2 or hi2 < lo1)
            and (best is None or abs(r2 - r1) > abs(best[1] - best[0]))
        ):
            best = (r1, r2, i)
    return best


@pytest.mark.parametrize("seed", range(300))
def test_drift_split_is_the_loop_it_replaces(seed):
    import itertools
    import random

    from specscope.stats import drift_split

    rng = random.Random(seed)
    n = rng.randrange(2, 60)
    k = rng.randrange(1, 9)
    change_at = rng.randrange(n)
    rates = (rng.random(), rng.random())
    drafts = [rng.randrange(0, 400) for _ in range(n)]
    tokens = [d * k for d in drafts]
    accepted = [
        min(t, round(t * rates[i >= change_at] * rng.uniform(0.8, 1.2)))
        for i, t in enumerate(tokens)
    ]
    if seed % 5 == 0:  # equal changes at several splits: the first must win in both
        drafts, tokens = [100] * n, [100 * k] * n
        accepted = [(50 if i % 2 else 0) for i in range(n)]
    cum = [list(itertools.accumulate(x)) for x in (drafts, tokens, accepted)]
    if cum[1][-1] == 0:
        return
    args = (*cum, rng.choice([50, 100, 300]), rng.choice([0.0, 0.05, 0.1]), 1.96)
    assert drift_split(*args) == _drift_split_loop(*args)


def test_drift_split_of_a_long_run_tries_evenly_spaced_points(monkeypatch):
    """Past SPLIT_POINTS intervals the search thins its candidates: the change it finds is
    within one spacing of the true one, with the rates on either side."""
    import numpy as np

    from specscope import stats

    monkeypatch.setattr(stats, "SPLIT_POINTS", 1000)
    n, change_at = 20_000, 12_345
    drafts = np.full(n, 100)
    tokens = drafts * 4
    accepted = np.where(np.arange(n) < change_at, 200, 80)
    cum = [np.cumsum(x) for x in (drafts, tokens, accepted)]
    r1, r2, at = stats.drift_split(*cum, 300, 0.05, 1.96)
    assert abs(at - change_at) <= n // 1000
    assert r1 == pytest.approx(0.5, abs=0.01) and r2 == pytest.approx(0.2, abs=0.01)


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ('[zero_acceptance]\nmax_rate = "high"\n', "[zero_acceptance] max_rate must be a number"),
        ("[zero_acceptance]\nmax_rat = 0.1\n", "did you mean 'max_rate'?"),
        ("[evidnce]\nz = 2.0\n", "unknown section [evidnce] (did you mean 'evidence'?)"),
        ("[rules]\nwindow = 5\n", "[rules] window must be a string"),
    ],
)
def test_a_bad_config_is_one_line_naming_file_section_and_key(cli, tmp_path, text, said):
    config = tmp_path / "detect.toml"
    config.write_text(text)
    r = cli("detect", "--store", tmp_path, "--config", config)
    assert r.status == ExitStatus.USAGE
    assert said in r.err and str(config) in r.err and len(r.err.strip().splitlines()) == 1


def test_insufficient_data_says_an_assumption_when_the_interval_is_narrow(tmp_path):
    """60 SGLang lines of `accept len: 3.00` give a narrow interval resting on what had to
    be assumed (k, verify steps per line): the finding says that, not 'wider than'."""
    lines = [
        f"[2025-06-01 10:{i:02d}:00 TP0] Decode batch. #running-req: 1, #token: 1200, "
        "token usage: 0.01, accept len: 3.00, gen throughput (token/s): 45.10, #queue-req: 0"
        for i in range(60)
    ]
    found = detect(_store(tmp_path, _log(tmp_path, "sglang.log", lines)))
    (unsure,) = [f for f in found if f.kind == "insufficient_data"]
    assert unsure.confidence is not None
    assert "resting on assumptions" in unsure.confidence.test
    assert "wider than" not in unsure.confidence.test
    assert "--set k=N" in unsure.next_step and "rests on what had to be assumed" in (
        unsure.explanation
    )
