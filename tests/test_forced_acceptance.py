"""Runs whose acceptance a setting forces (issue 21): vLLM's synthetic rejection sampling
(vllm-project/tpu-inference#2819: synthetic length 3.0 printed 'Per-position acceptance
rate: 1.000, 1.000, 0.000'), block or lossy verification. No finding judges their
acceptance; one says why."""

from __future__ import annotations

from pathlib import Path

import pytest

import specscope

from .loglines import spec, stamp, stats


def _launch(spec_config: str) -> str:
    return (
        f"{stamp(0)} [utils.py:233] non-default args: {{'model': 'meta-llama/Llama-3.1-8B', "
        f"'speculative_config': {spec_config}}}"
    )


def _findings(tmp_path: Path, spec_config: str) -> list:
    # tpu-inference#2819's curve: the first two positions always accepted, the third never.
    lines = [_launch(spec_config)]
    for i in range(1, 9):
        lines += [stats(i), spec(i, 200, [200, 200, 0])]
    log = tmp_path / "server.log"
    log.write_text("\n".join(lines) + "\n", encoding="utf-8")
    specscope.ingest(log, store=tmp_path / "s", year=2026).raise_for_errors()
    return specscope.detect(specscope.open_store(tmp_path / "s"))


def test_the_same_curve_is_a_cliff_when_the_drafter_made_it(tmp_path) -> None:
    found = _findings(tmp_path, "{'method': 'eagle3', 'num_speculative_tokens': 3}")
    kinds = {f.kind for f in found}
    assert kinds & {"position_cliff", "k_too_large"} and "forced_acceptance" not in kinds


@pytest.mark.parametrize(
    ("setting", "said"),
    [
        ("'rejection_sample_method': 'synthetic', 'synthetic_acceptance_length': 3.0", "forced"),
        ("'rejection_sample_method': 'block'", "another rule"),
        ("'rejection_sample_method': 'fly'", "lossy"),
    ],
)
def test_a_forced_run_is_judged_on_nothing_its_setting_decides(tmp_path, setting, said) -> None:
    config = f"{{'method': 'eagle3', 'num_speculative_tokens': 3, {setting}}}"
    found = _findings(tmp_path, config)
    kinds = {f.kind for f in found}
    assert not kinds & {"position_cliff", "k_too_large", "low_acceptance", "zero_acceptance"}
    (f,) = [f for f in found if f.kind == "forced_acceptance"]
    assert said in f.explanation and "not raised:" in f.explanation
    assert f.measured["rejection_sample_method"] in ("synthetic", "block", "fly")


def test_the_standard_method_named_is_no_setting(tmp_path) -> None:
    found = _findings(
        tmp_path,
        "{'method': 'eagle3', 'num_speculative_tokens': 3, 'rejection_sample_method': 'standard'}",
    )
    assert "forced_acceptance" not in {f.kind for f in found}


def test_compare_says_a_forced_run_measures_its_setting(tmp_path) -> None:
    from specscope.analysis.compare import compare, comparison_text

    paths = []
    for name, config in (
        ("drafter.log", "{'method': 'eagle3', 'num_speculative_tokens': 3}"),
        (
            "synthetic.log",
            "{'method': 'eagle3', 'num_speculative_tokens': 3, "
            "'rejection_sample_method': 'synthetic', 'synthetic_acceptance_length': 3.0}",
        ),
    ):
        curve = [200, 200, 0] if name == "synthetic.log" else [150, 90, 40]
        lines = [_launch(config)] + [spec(i, 200, curve) for i in range(1, 5)]
        path = tmp_path / name
        path.write_text("\n".join(lines) + "\n", encoding="utf-8")
        paths.append(path)
    specscope.ingest(paths, store=tmp_path / "s", year=2026).raise_for_errors()
    store = specscope.open_store(tmp_path / "s")
    runs = {Path(r["source"]).name: r["run_id"] for r in store.runs.collect().to_dicts()}
    c = compare(store, runs["drafter.log"], runs["synthetic.log"])
    assert len(c.notes) == 1 and "forced by synthetic acceptance" in c.notes[0]
    assert runs["synthetic.log"] in c.notes[0] and "note: run" in comparison_text(c)


def test_what_moves_leaves_a_forced_run_out() -> None:
    import json

    import polars as pl

    from specscope.analysis.factors import what_moves

    sums = pl.DataFrame(
        {
            "run_id": ["a", "b", "c"],
            "accepted_tokens": [390, 600, 420],
            "draft_tokens": [600, 600, 600],
            "drafts": [200, 200, 200],
            "running": [1.0, 1.0, 1.0],
        }
    )
    synthetic = {"rejection_sample_method": "synthetic", "synthetic_acceptance_length": 4.0}
    runs = {
        "a": {"model": "m", "k": 3, "config": "{}"},
        "b": {"model": "m", "k": 3, "config": json.dumps(synthetic)},
        "c": {"model": "m", "k": 3, "config": "{}", "enable_prefix_caching": True},
    }
    runs["a"]["enable_prefix_caching"] = runs["b"]["enable_prefix_caching"] = False
    moves = {m["factor"]: m for m in what_moves(None, runs, z=1.96, sums=sums)}
    caching = moves["enable_prefix_caching"]
    # b's 100% is its setting's: only a (off) and c (on) weigh, as one pair.
    assert [g["runs"] for g in caching["groups"]] == [1, 1]
    (pair,) = caching["matched_pairs"]
    assert {pair["run_a"], pair["run_b"]} == {"a", "c"}
    runs["b"]["config"] = "{}"
    moves = {m["factor"]: m for m in what_moves(None, runs, z=1.96, sums=sums)}
    assert [g["runs"] for g in moves["enable_prefix_caching"]["groups"]] == [2, 1]
