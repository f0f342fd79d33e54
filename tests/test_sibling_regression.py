"""Two arms of one paste where what changes is code on the same setup (a version, a build,
a fix): with counts on both sides, a drop of tau - 1 past ``regression_margin`` that the
bounds prove is low_acceptance (world 137's counts, 41570 of 71925 draft tokens on
v0.18.0rc2 against 45217 of 60981 on v0.17.0rc1); arms that differ by a change that lowers
acceptance by design, a drop within the margin, a sample too small to prove it, or numbers
printed without counts are not blamed by it."""

from __future__ import annotations

from pathlib import Path

import pytest

import specscope
from specscope.analysis.detectors.sibling_change import change
from specscope.analysis.siblings import Side
from tests.helpers import findings_of_paste


def _table(rows: list[tuple[str, int, int, int]], corner: str = "Image") -> str:
    """A markdown table of counts a row: label, drafts, accepted / drafted tokens."""
    body = "\n".join(f"| {label} | {d} | {a} / {t} |" for label, d, a, t in rows)
    return (
        "Same benchmark, same flags:\n\n"
        f"| {corner} | Drafts | Accepted / Drafted |\n|---|---|---|\n{body}\n"
    )


def _low(tmp_path: Path, text: str) -> list[specscope.Finding]:
    return [
        f
        for f in findings_of_paste(tmp_path, text)
        if f.kind == "low_acceptance" and "sibling" in f.measured
    ]


# World 137's counts (vllm-ascend #9871), each image a row.
OLD = ("v0.17.0rc1", 20327, 45217, 60981)
NEW = ("v0.18.0rc2", 23975, 41570, 71925)


def test_a_version_regression_on_tens_of_thousands_of_drafts_is_low(tmp_path: Path) -> None:
    [found] = _low(tmp_path, _table([OLD, NEW]))
    assert found.measured["tau_minus_1"] == pytest.approx(41570 / 23975, abs=0.005)
    assert found.measured["sibling_tau_minus_1"] == pytest.approx(45217 / 20327, abs=0.005)
    assert "'v0.18.0rc2'" in found.explanation and "'v0.17.0rc1'" in found.explanation
    assert "version, build or fix" in found.explanation
    assert found.confidence is not None and found.confidence.level in ("likely", "certain")
    assert found.confidence.sample == {"drafts": 23975, "sibling drafts": 20327}


@pytest.mark.parametrize(
    ("good", "bad"),
    [
        (("b10423", 4000, 2800, 8000), ("b10430", 4000, 2000, 8000)),
        (("after the fix", 3000, 5400, 9000), ("before", 3000, 3800, 9000)),
    ],
)
def test_builds_and_fixes_are_versions_too(tmp_path: Path, good: tuple, bad: tuple) -> None:
    [found] = _low(tmp_path, _table([good, bad], corner="Build"))
    assert found.explanation.startswith(f"Against its sibling '{good[0]}'")


@pytest.mark.parametrize(
    "rows",
    [
        # within a fifth: 2.05 against 2.22 tokens a draft
        [OLD, ("v0.18.0rc2", 20000, 41000, 60000)],
        # a fifth and more lost, on too few drafts to prove it
        [("v0.17.0rc1", 60, 133, 180), ("v0.18.0rc2", 60, 100, 180)],
        # what changes lowers acceptance by design
        [("temperature 0", 20327, 45217, 60981), ("temperature 1.0", 23975, 41570, 71925)],
        [("ShareGPT", 20327, 45217, 60981), ("HumanEval (code)", 23975, 41570, 71925)],
        [("EAGLE-3", 20327, 45217, 60981), ("MTP", 23975, 41570, 71925)],
        [("k=1", 20000, 16000, 20000), ("k=3", 20000, 40000, 60000)],
        # a configuration change is held to known_margin (0.6), not the regression's
        [("bf16 KV cache", 20327, 45217, 60981), ("fp8 KV cache", 23975, 41570, 71925)],
    ],
)
def test_arms_not_blamed(tmp_path: Path, rows: list) -> None:
    assert not _low(tmp_path, _table(rows)), rows


def test_unlabelled_arms_are_held_to_what_a_dataset_gives(tmp_path: Path) -> None:
    """137's two result blocks with nothing said of them: a dataset alone could give that
    drop, so nothing is called (the paste's versions are in sentences no reader reads)."""
    block = (
        '- "spec_decode_num_drafts": {d}\n- "spec_decode_draft_tokens": {t}\n'
        '- "spec_decode_accepted_tokens": {a}\n'
    )
    text = (
        block.format(d=23975, t=71925, a=41570) + "\n\n" + block.format(d=20327, t=60981, a=45217)
    )
    assert not _low(tmp_path, text)


def test_the_same_drop_printed_without_counts_is_held_to_the_named_margin(
    tmp_path: Path,
) -> None:
    table = "| | v0.17.0rc1 | v0.18.0rc2 |\n|---|---|---|\n| Accept length | 3.22 | {} |\n"
    assert not _low(tmp_path, table.format("2.73"))
    (tmp_path / "far").mkdir()
    [found] = _low(tmp_path / "far", table.format("1.80"))
    assert found.confidence is not None and found.confidence.level == "suggestive"


def _side(label: str, run: str = "r1") -> Side:
    return Side(run, "paste.log", None, False, (1, 1), {}, labels=[label] if label else [])


@pytest.mark.parametrize(
    ("a", "b", "said"),
    [
        ("v0.17.0rc1", "v0.18.0rc2", "regression"),
        ("before", "after the fix", "regression"),
        ("main", "PR 1234", "regression"),
        ("b10423", "b10430", "regression"),
        ("v0.9 on vLLM", "v0.4 on SGLang", "named"),  # another stack, not only the code
        ("MTP only", "PD+MTP", "named"),
        ("This repo (DSpark)", "r0b0tlab vLLM SM121", "named"),  # one drafter, two stacks
        ("old prompt", "new prompt", "expected"),  # the prompt is what is old and new
        ("previous drafter", "latest drafter", "expected"),
        ("MTP before the fix", "MTP after the fix", "regression"),
        ("DSpark", "default", "expected"),
        (
            "Qwen3-8B v0.11.0",
            "Qwen3-32B v0.12.0",
            "expected",
        ),  # another target model  # a drafter against a side that names no stack
        ("EAGLE-3", "MTP", "expected"),
        ("temperature 0", "temperature 0.7", "expected"),
        ("k=3, chat", "k=3, code", "expected"),
        ("t=0.0 tree draft", "t=1.0 chain draft", "expected"),  # world 237's table
        ("t=0.0 v0.17.0", "t=1.0 v0.18.0", "expected"),  # a temperature beside the version
        ("k=1 main", "k=2 PR", "regression"),  # the depth is set against its positions
        ("k=1 main", "k=1 PR", "regression"),
        ("", "", "unknown"),
    ],
)
def test_what_changes_between_two_labels(a: str, b: str, said: str) -> None:
    assert change(_side(a, "r1"), _side(b, "r2"), {}) == said


def test_two_launches_of_two_versions_are_a_change_named_not_a_regression() -> None:
    """Nothing but the author's labels ties two runs as arms on the same workload."""
    runs = {"r1": {"vllm_version": "0.10.1"}, "r2": {"vllm_version": "0.11.0"}}
    assert change(_side("", "r1"), _side("", "r2"), runs) == "named"


def test_one_drafter_on_two_stacks_real_excerpt(tmp_path: Path) -> None:
    """World 348 (MiaAI-Lab #260): the same weights on this repo's DSpark stack at ~19-22%
    and on another vLLM recipe at 54.5%, two rows of one table: the row naming the drafter
    is set against the row naming a stack, as printed (suggestive)."""
    world = Path(__file__).resolve().parent.parent / "fixtures" / "world"
    [case] = world.glob("348_*.log")
    [found] = _low(tmp_path, case.read_text(encoding="utf-8"))
    assert found.explanation.startswith("Against its sibling 'r0b0tlab vLLM SM121'")
    assert "'This repo (DSpark)'" in found.explanation
    assert found.measured["tau_minus_1"] < 0.5 * found.measured["sibling_tau_minus_1"]
    assert found.confidence is not None and found.confidence.level == "suggestive"
