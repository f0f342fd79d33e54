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

import numpy as np
import polars as pl
import pytest

from specscope.analysis.printed_sample import (
    bench_steps,
    counted_k,
    curve_drafts,
    least_drafts,
    printed_k,
)

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


# World case 5 (AEON-7 DFlash issue #6): one vLLM line, 89 of 975 drafted tokens at k = 15.
DFLASH_LINE = (WORLD / "05_dflash_15_positions.log").read_text()


def test_a_printed_list_needs_as_many_drafts_as_its_fractions_do() -> None:
    curve = [0.600, 0.385, 0.215, 0.108, 0.062] + [0.0] * 10
    assert least_drafts(curve) == 65  # 975 drafted tokens / k 15: the count it came from
    assert least_drafts([0.5, 0.25]) == 4
    assert least_drafts([0.0, 0.0, 0.0]) == 1  # zeros prove nothing of the count
    assert least_drafts([1.0, 1.0]) == 1
    assert least_drafts([0.3337]) < 1000  # 3 decimals never prove a thousand


def test_printed_lists_without_counts_rest_on_the_drafts_they_prove(tmp_path: Path) -> None:
    # World case 85: four trimmed vLLM lines, lists and mean lengths without counts; they
    # need 313 + 313 + 383 + 363 drafts, not the 40 a line was taken for.
    text = (WORLD / "85_vllm_eagle_llm_api_low_wrapped.log").read_text()
    # (the author's own 10% in the prose before is a run of its own)
    (low,) = [
        f
        for f in findings_of_paste(tmp_path, text)
        if f.kind == "low_acceptance" and "read" in f.confidence.sample
    ]
    assert low.confidence.sample["drafts"] == 1372
    assert "at least 1,372 drafts" in low.confidence.sample["read"]
    assert not any("verify steps" in a for a in low.confidence.assumptions)


def test_curve_drafts_read_only_a_servers_three_decimal_lists() -> None:
    spec = pl.LazyFrame(
        {
            "run_id": ["v", "v", "t", "c"],
            "format": [
                "vllm_v1_spec_decode_trimmed",
                "vllm_v1_spec_decode_fragment",
                "spec_decode_table",  # an author's table: 2 decimals, or retyped
                "vllm_v1_spec_decode",
            ],
            "per_position_rate": [[0.166, 0.093], [0.5, 0.25], [0.94, 0.86], [0.5]],
            "draft_tokens": [None, None, None, 40],  # counted: its own count, no bound
        }
    )
    got = dict(curve_drafts(spec, ["v", "t", "c"]).select("run_id", "curve_drafts").iter_rows())
    assert got == {"v": least_drafts([0.166, 0.093]) + 4}


def test_a_line_cut_before_its_list_gets_k_from_its_tokens_and_mean(tmp_path: Path) -> None:
    # World case 62: 26 accepted of 2,470 drafted at a mean of 1.05, the list cut: 26 / 0.05
    # is 473-578 drafts, and only 494 of them divides 2,470 into a whole k (5).
    text = (WORLD / "62_ascend_numbered_reply_cut.log").read_text()
    (zero,) = [f for f in findings_of_paste(tmp_path, text) if f.kind == "zero_acceptance"]
    assert zero.confidence.sample["drafts"] == 494
    assert "k 5 from the printed mean length" in zero.confidence.sample["read"]
    assert zero.confidence.level == "certain" and not zero.confidence.assumptions


def test_counted_k_needs_one_whole_k_on_every_row() -> None:
    spec = pl.LazyFrame(
        {
            "run_id": ["a", "b", "b", "c", "d"],
            "format": ["vllm_v1_spec_decode"] * 5,
            "draft_tokens": [300, 7684, 2470, 119, 670],
            "accepted_tokens": [10, 6405, 26, 55, 0],
            "mean_acceptance_length": [1.5, 2.67, 1.05, 2.38, 1.0],
        }
    )
    got = counted_k(spec, ["a", "b", "c", "d"])
    # a: 20 drafts of 15 (world 88); b: k 2 on one row, 5 on the other; c: no whole k fits
    # 119 tokens; d: nothing accepted, the mean tells no drafts
    assert dict(got.select("run_id", "counted_k").iter_rows()) == {"a": 15}


def test_counted_k_holds_on_every_row_of_a_long_log() -> None:
    # 5,000 intervals at k = 3, each mean printed to 2 decimals as vLLM does: the rounding
    # edges (a mean of exactly x.xx5) must not leave one row without its k.
    rng = np.random.default_rng(3)
    drafts = rng.integers(20, 600, 5_000)
    accepted = (drafts * 3 * rng.uniform(0.05, 0.95, 5_000)).astype(int) + 1
    spec = pl.LazyFrame(
        {
            "run_id": ["r"] * 5_000,
            "format": ["vllm_v1_spec_decode"] * 5_000,
            "draft_tokens": drafts * 3,
            "accepted_tokens": accepted,
            "mean_acceptance_length": [
                float(f"{1 + a / d:.2f}") for a, d in zip(accepted, drafts, strict=True)
            ],
        }
    )
    assert counted_k(spec, ["r"])["counted_k"].to_list() == [3]


def test_the_spread_of_accepted_lengths_bounds_their_mean(tmp_path: Path) -> None:
    # The 65 drafts' per-position counts give the spread of their accepted lengths: the
    # mean's bound at 95% is 1.71 tokens a draft, under half of a learned drafter's 3.86
    # at k = 15; as a proportion (every draft accepting none or all 15) it was 2.51.
    (low,) = [f for f in findings_of_paste(tmp_path, DFLASH_LINE) if f.kind == "low_acceptance"]
    assert "upper bound of tau - 1 1.71 < 1.93" in low.confidence.test
    # The same block drafter accepting 292 of 975 (tau 5.49) is not blamed.
    counts = [60, 54, 48, 40, 32, 24, 16, 10, 6, 2, 0, 0, 0, 0, 0]
    healthy = DFLASH_LINE.replace("Accepted: 89 tokens", "Accepted: 292 tokens").replace(
        "Mean acceptance length: 2.37", "Mean acceptance length: 5.49"
    )
    listed = ", ".join(f"{c / 65:.3f}" for c in counts)
    healthy = healthy.replace(
        "0.600, 0.385, 0.215, 0.108, 0.062, 0.000, 0.000, 0.000, 0.000, 0.000, 0.000, 0.000, "
        "0.000, 0.000, 0.000",
        listed,
    )
    assert listed in healthy
    found = {f.kind for f in findings_of_paste(tmp_path / "healthy", healthy)}
    assert not found & {"low_acceptance", "zero_acceptance", "position_cliff"}, found


def test_the_spread_bound_covers_the_mean_it_bounds() -> None:
    # 2,000 samples of 65 drafts from a geometric chain at k = 15 (a_i = 0.6^i): the 95%
    # one-sided bound from each sample's own spread stays above the true mean in at least
    # 93% of them (the normal approximation is not exact at 65 drafts, and must not be far
    # off).
    from specscope.analysis.evidence import Trials
    from specscope.analysis.gain_bound import gain_upper, spread_of

    rng = np.random.default_rng(16)
    k, n = 15, 65
    shares = 0.6 ** np.arange(1, k + 1)
    truth = shares.sum()
    # P(L = j) for j = 0..k from P(L >= i)
    at = -np.diff(np.concatenate([[1.0], shares, [0.0]]))
    covered = 0
    for _ in range(2000):
        lengths = rng.choice(k + 1, size=n, p=at)
        counts = [int((lengths >= i).sum()) for i in range(1, k + 1)]
        agg = {"accepted_per_pos": counts, "drafts": n, "accepted_tokens": sum(counts)}
        trials = Trials(float(n), float(k), float(sum(counts)), spread=spread_of(agg))
        covered += gain_upper(trials, 1.645) >= truth
    assert covered / 2000 >= 0.93, covered
