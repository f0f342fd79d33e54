"""A run without draft counts still has a sample where it printed enough beside its mean
length: k from the rate printed with it, the verify steps from a benchmark's generated
tokens (specscope/analysis/printed_sample.py).

The block is world case 344 (vllm-project/vllm#40551, a maintainer's MT-Bench run of EAGLE3
on Model Runner V2, pasted cut before its Drafts/Accepted lines): 19.92% over 80 requests
and 20,480 generated tokens is low for a learned drafter, and no longer 'too little to
judge' because 40 verify steps were assumed for it.
"""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest

from specscope.analysis.printed_sample import bench_steps, printed_k

from .helpers import findings_of_paste

WORLD = Path(__file__).parent.parent / "fixtures" / "world"
CUT_BLOCK = (WORLD / "344_vllm_issue40551_mrv2_eagle3_bench_block_1992pct_cut.log").read_text()


def test_a_cut_bench_block_at_twenty_percent_is_low_on_its_generated_tokens(
    tmp_path: Path,
) -> None:
    found = {f.kind: f for f in findings_of_paste(tmp_path, CUT_BLOCK)}
    assert "insufficient_data" not in found
    low = found["low_acceptance"]
    # (20,480 - 80) / 2.3: the verify steps behind the mean, not 40 assumed for one line
    assert low.sample["drafts"] == pytest.approx(8870, abs=1)
    said = " ".join(low.confidence.assumptions)
    assert "generated tokens" in said and "k 7 from the printed mean length and rate" in said


def test_the_same_block_at_a_healthy_rate_is_not_blamed(tmp_path: Path) -> None:
    healthy = CUT_BLOCK.replace("19.92", "70.00").replace(
        "Acceptance length:                       2.3",
        "Acceptance length:                       3.80",
    )
    found = {f.kind for f in findings_of_paste(tmp_path, healthy)}
    assert not found & {"low_acceptance", "zero_acceptance", "position_cliff"}, found


def _spec(rows: list[tuple[str, float | None, float | None]]) -> pl.LazyFrame:
    return pl.LazyFrame(
        rows,
        schema={
            "run_id": pl.String,
            "mean_acceptance_length": pl.Float64,
            "acceptance_rate": pl.Float64,
        },
        orient="row",
    )


def test_k_is_read_only_where_every_row_implies_the_same_one() -> None:
    spec = _spec(
        [
            ("one", 3.80, 0.70),  # 2.80 / 70% = 4
            ("one", 2.20, 0.30),  # 1.20 / 30% = 4
            ("two", 2.76, 0.2519),  # 7 (a script's summary, world case 349) ...
            ("two", 3.73, 0.5466),  # ... and 5: two runs pasted as one, no k of it
            ("odd", 1.50, 0.005),  # 100: beyond any drafter's k, a misreading
            ("bare", 2.0, None),
        ]
    )
    got = printed_k(spec, ["one", "two", "odd", "bare"])
    assert dict(got.select("run_id", "printed_k").iter_rows()) == {"one": 4}


def test_steps_need_every_block_to_print_what_they_take() -> None:
    bench = pl.DataFrame(
        {
            "run_id": ["r", "r", "s"],
            "total_generated_tokens": [10_080, 5_040, 1_000],
            "successful_requests": [80, 40, None],
            "acceptance_length": [2.5, 2.0, 2.0],
        }
    )
    steps, said = bench_steps(bench, "r", 2.3) or (0.0, "")
    assert steps == pytest.approx(10_000 / 2.5 + 5_000 / 2.0)
    assert "15,120 generated tokens" in said
    assert bench_steps(bench, "s", 2.0) is None  # no request count: no steps from it
    assert bench_steps(bench, "r", 1.0) is None  # nothing accepted: the mean tells no steps


def test_a_first_position_nobody_counted_is_not_shown_as_measured(tmp_path: Path) -> None:
    (low,) = [f for f in findings_of_paste(tmp_path, CUT_BLOCK) if f.kind == "low_acceptance"]
    assert low.measured["a1"] is None  # bounded by 1.30 tokens a draft, never measured
    assert low.measured["mean_acceptance_length"] == pytest.approx(2.3)


def test_an_unnamed_method_is_no_expectation_in_the_text(tmp_path: Path) -> None:
    from specscope.cli.render import finding_text

    (low,) = [f for f in findings_of_paste(tmp_path, CUT_BLOCK) if f.kind == "low_acceptance"]
    assert low.expected["method"] is None
    text = finding_text(low)
    assert "None" not in text and "  expected: tau - 1 3.161" in text.splitlines(), text
