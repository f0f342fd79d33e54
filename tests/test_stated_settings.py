"""Bullets of settings and their decode rates, one with speculation off
(parsers/stated_speedup_settings.toml, specscope/logs/bullets.py): judged as a table of
configurations is, by no_speedup and, for a sweep of the draft depth, by k_too_large."""

from __future__ import annotations

import specscope
from specscope.logs.parser import parse_text

from .helpers import findings_of_paste

LEMONADE = """Measured sustained tg1024 performance:

- MTP, p_min=0.75: 19.02 t/s, GPUs approximately 30-70% utilized
- MTP, p_min=0.0: 48.03 t/s, GPUs approximately 90%+ utilized
- MTP disabled: 23.46 t/s, GPUs approximately 100% utilized
"""


def _kinds(found: list[specscope.Finding]) -> set[str]:
    return {f.kind for f in found}


def test_a_setting_slower_than_speculation_off_is_no_speedup_though_another_helps(
    tmp_path,
) -> None:
    (slow,) = [f for f in findings_of_paste(tmp_path, LEMONADE) if f.kind == "no_speedup"]
    assert slow.lines == (3, 3)  # the p_min=0.75 bullet, not the faster p_min=0.0
    assert "MTP, p_min=0.75: 19.02 against 23.46" in slow.explanation
    assert slow.confidence is not None and slow.confidence.level == "suggestive"


def test_every_setting_faster_is_no_finding(tmp_path) -> None:
    faster = LEMONADE.replace("19.02", "29.02")
    assert "no_speedup" not in _kinds(findings_of_paste(tmp_path, faster))


def test_a_depth_sweep_slower_at_depth_three_is_k_too_large(tmp_path) -> None:
    sweep = """- baseline_mtp_off: 64 tokens, 2.9815s, 21.47 tok/s
- mtp_draft_1: 65 tokens, 2.3853s, 27.25 tok/s, 1.27x
- mtp_draft_2: 64 tokens, 2.6478s, 24.17 tok/s, 1.13x
- mtp_draft_3: 64 tokens, 2.9710s, 21.54 tok/s, 1.00x
"""
    found = findings_of_paste(tmp_path, sweep)
    (deep,) = [f for f in found if f.kind == "k_too_large"]
    assert deep.measured["k"] == 3 and deep.expected["k at most"] == 1
    assert "no_speedup" not in _kinds(found)  # its best depth pays


def test_two_baselines_or_none_compare_nothing() -> None:
    two = "- baseline: 20 tok/s\n- no spec: 21 tok/s\n- MTP: 15 tok/s\n"
    none = "- MTP k=1: 30 tok/s\n- MTP k=2: 18 tok/s\n"
    for text in (two, none):
        assert parse_text(text).tables.get("bench", []) == []
