"""Per-position denominators where k varies (issue 21): a position drafted on few steps is
judged on the steps that drafted it (TensorRT-LLM counts drafted tokens per position),
never called dead for not being drafted, and the finding says that k varied."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest

from specscope.acceptance import weighted_acceptance

LABELS = 'model_name="llama-3.1-8b",engine_type="trtllm"'


def _paste(drafted: list[int], accepted: list[int]) -> str:
    lines = []
    for family, counts in (("drafted", drafted), ("accepted", accepted)):
        name = f"trtllm_spec_decode_{family}_tokens_total"
        lines += [f'{name}{{{LABELS},token_position="{i}"}} {n}.0' for i, n in enumerate(counts)]
    return "\n".join(lines) + "\n"


def _findings(cli, tmp_path: Path, text: str) -> list[dict]:
    path = tmp_path / "metrics.txt"
    path.write_text(text, encoding="utf-8")
    r = cli("triage", path, "--json")
    assert r.status in (0, 11), r.err
    return json.loads(r.out)["findings"]


def test_a_rarely_drafted_tail_is_judged_on_the_steps_that_drafted_it(cli, tmp_path) -> None:
    # Position 3 drafted on 50 of 1,000 steps and accepted on 20 of them: 40%, not 2%.
    found = _findings(cli, tmp_path, _paste([1000, 1000, 1000, 50], [800, 640, 512, 20]))
    kinds = {f["kind"] for f in found}
    assert "k_too_large" not in kinds and "position_cliff" not in kinds


def test_the_same_counts_over_every_draft_are_a_dead_tail(cli, tmp_path) -> None:
    # The control: position 3 drafted on every step and accepted on 20 of 1,000.
    found = _findings(cli, tmp_path, _paste([1000, 1000, 1000, 1000], [800, 640, 512, 20]))
    assert "k_too_large" in {f["kind"] for f in found}


def test_a_dead_tail_where_k_varied_says_so(cli, tmp_path) -> None:
    # Position 3 drafted on 400 steps and accepted on 2 of them: dead on its own steps.
    found = _findings(cli, tmp_path, _paste([1000, 1000, 1000, 400], [800, 640, 512, 2]))
    (k_large,) = [f for f in found if f["kind"] == "k_too_large"]
    assert "k varied" in k_large["explanation"]
    assert k_large["measured"]["effective_k"] == pytest.approx(3.4)


def test_sums_take_each_positions_drafts_where_counted() -> None:
    rows = pl.DataFrame(
        {
            "run_id": ["a", "a", "b"],
            "drafts": [100, 100, 50],
            "draft_tokens": [260, 260, 150],
            "accepted_tokens": [148, 148, 60],
            "accepted_per_pos": [[80, 50, 18], [80, 50, 18], [30, 20, 10]],
            "drafted_per_pos": [[100, 100, 60], [100, 100, 60], None],
            "mean_acceptance_length": [None, None, None],
            "ts": [None, None, None],
            "k": [3, 3, 3],
        },
        schema_overrides={"mean_acceptance_length": pl.Float64, "ts": pl.Datetime},
    )
    got = {r["run_id"]: r for r in weighted_acceptance(rows).iter_rows(named=True)}
    assert got["a"]["per_position"] == pytest.approx([0.8, 0.5, 0.3])
    assert got["a"]["drafted_per_pos"] == [200, 200, 120]
    assert got["b"]["per_position"] == pytest.approx([0.6, 0.4, 0.2])
    assert got["b"]["drafted_per_pos"] == [50, 50, 50]
