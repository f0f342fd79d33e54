"""What an author's labels and headings say of a table's runs (``logs.label_config``): the
depth a row sets and the heading above its table, where nothing else says them; rows under
headings naming other target models are no arms of one comparison (world 371: an n-gram
depth sweep in three sections, one per model)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import specscope
from specscope.analysis.detectors.sibling_change import change
from specscope.analysis.siblings import Side
from specscope.logs.label_config import depth_of

WORLD = Path(__file__).parent.parent / "fixtures" / "world"
SWEEP = "371_mlxswiftlm_pr143_ngram_hybrid_27b_slower_every_depth_tables.log"


@pytest.mark.parametrize(
    ("label", "k"),
    [
        ("ngram D=12 adapt+strict", 12),
        ("k=3", 3),
        ("EAGLE-3 K = 5", 5),
        ("depth 6", 6),
        ("n-max 8", 8),
        ("draft_n=5", 5),
        ("num_speculative_tokens=2", 2),
        ("steps=3", 3),
        # no depth, two, or not one
        ("ngram D=2/D=8", None),
        ("ngram", None),
        ("4k context", None),
        ("top-k 20", None),
        ("d=4", None),
        ("k=64", None),
        ("200 steps", None),
        ("steps 200", None),
    ],
)
def test_the_depth_a_label_sets(label: str, k: int | None) -> None:
    assert depth_of(label) == k


def _ingest(tmp_path: Path, text: str) -> specscope.Store:
    log = tmp_path / "paste.log"
    log.write_text(text, encoding="utf-8")
    store = tmp_path / "store"
    specscope.ingest([log], store=store, year=2026)
    return specscope.open_store(store)


def test_world_371_rows_get_depth_and_heading(tmp_path: Path) -> None:
    store = tmp_path / "store"
    specscope.ingest([WORLD / SWEEP], store=store, year=2026)
    opened = specscope.open_store(store)
    runs = opened.runs.collect().sort("ordinal").to_dicts()
    assert [r["k"] for r in runs] == [4, 4, 12, 2, 4, 8, 12]
    headings = [json.loads(r["config"])["heading"] for r in runs]
    assert headings[0].startswith("Qwen3.5-9B-4bit")
    assert headings[2].startswith("Qwen3.5-35B-A3B-4bit")
    assert headings[-1].startswith("Qwen3.6-27B-4bit")
    kinds = {f.kind for f in specscope.detect(opened)}
    # The 27B's rows are not set against the 35B's: no sibling blame; its slowdown stays.
    assert "low_acceptance" not in kinds
    assert "no_speedup" in kinds


def _sections(first: str, second: str, low: str = "44.5%") -> str:
    return (
        f"### {first}\n\n| Config | acceptance |\n|---|---:|\n| ngram D=4 | 92.2% |\n\n"
        f"### {second}\n\n| Config | acceptance |\n|---|---:|\n| ngram D=4 | {low} |\n"
    )


def _sibling_low(store: specscope.Store) -> list[specscope.Finding]:
    return [
        f
        for f in specscope.detect(store)
        if f.kind == "low_acceptance" and "sibling" in (f.measured or {})
    ]


def test_rows_under_headings_of_two_target_models_are_not_compared(tmp_path: Path) -> None:
    store = _ingest(tmp_path, _sections("Qwen3.5-35B-A3B-4bit", "Llama-3.1-8B"))
    assert _sibling_low(store) == []


def test_rows_under_headings_that_name_a_change_of_code_are_still_compared(
    tmp_path: Path,
) -> None:
    # The same row under 'before' and 'after' headings: one setup, a change of code, the
    # same depth: the heading is no reason to stop comparing them.
    text = _sections("Before the cache patch", "After the cache patch", low="30.0%")
    [found] = _sibling_low(_ingest(tmp_path, text))
    assert found.measured["tau_minus_1"] == pytest.approx(0.30 * 4)
    # and the same two tables under headings of two target models: not compared
    other = tmp_path / "other"
    other.mkdir()
    assert _sibling_low(_ingest(other, _sections("Qwen3-8B", "Qwen3-32B", low="30.0%"))) == []


def test_a_label_does_not_override_what_the_run_says(tmp_path: Path) -> None:
    text = (
        "| Config | Accepted / Drafted |\n|---|---|\n"
        "| MTP k=2 | 300 / 1000 |\n| MTP k=2 patched | 600 / 1000 |\n"
    )
    log = tmp_path / "paste.log"
    log.write_text(text, encoding="utf-8")
    store = tmp_path / "store"
    specscope.ingest([log], store=store, year=2026, overrides={"k": 3})
    runs = specscope.open_store(store).runs.collect().to_dicts()
    assert runs and {r["k"] for r in runs} == {3}  # --set wins over the label
    plain = tmp_path / "plain"
    specscope.ingest([log], store=plain, year=2026)
    assert {r["k"] for r in specscope.open_store(plain).runs.collect().to_dicts()} == {2}


def _side(run_id: str, label: str) -> Side:
    return Side(run_id, "paste.log", None, False, (1, 1), {}, labels=[label])


@pytest.mark.parametrize(
    ("a", "b", "said"),
    [
        # a depth's value alone changes, as 'k=3' against 'k=5'
        ("ngram D=4", "ngram D=8", "expected"),
        ("draft_n=4", "draft_n=8", "expected"),
        ("k=3", "k=5", "expected"),
        # something besides the depth: still a change the paste names
        ("ngram D=4", "ngram D=4 paged-kv", "named"),
        ("ngram D=4", "ngram D=12 adapt+strict", "named"),
    ],
)
def test_a_depth_written_d_is_a_setting_of_the_label(a: str, b: str, said: str) -> None:
    assert change(_side("r-1", a), _side("r-2", b), {}) == said
