"""`advise` answers the question a user asks: which k, or none at all."""

from __future__ import annotations

import specscope
from specscope.analysis.advise import advice_text, advise

from .loglines import spec, stats


def _store(tmp_path, counts: list[int], drafts: int = 400):
    log = tmp_path / "server.log"
    log.write_text("\n".join([stats(1), spec(1, drafts, counts)]) + "\n", encoding="utf-8")
    specscope.ingest(log, store=tmp_path / "s", year=2026).raise_for_errors()
    return specscope.open_store(tmp_path / "s")


def test_a_curve_that_pays_names_the_best_k(tmp_path):
    (a,) = advise(_store(tmp_path, [360, 320, 280, 240]), cost=0.05)
    assert a.pays and 1 <= a.best_k <= 4
    text = advice_text([a])
    assert "<- best" in text and "does not pay" not in text
    assert "(no speculation)" in text


def test_when_no_k_beats_none_it_says_so_instead_of_naming_a_best(tmp_path):
    """40 of 400 drafts accepted at the first position and c = 0.2: tau(1) = 1.1 for a cost
    of 1.2, a speedup of 0.917 at best; nothing beats speculation off."""
    (a,) = advise(_store(tmp_path, [40, 4, 0]), cost=0.2)
    assert not a.pays and a.to_dict()["pays"] is False
    text = advice_text([a])
    assert "<- best" not in text and "<- least loss" in text
    assert "speculation does not pay here" in text


def test_the_report_says_speculation_should_be_off(tmp_path):
    """8 of 400 drafts accepted at the first position: tau(1) = 1.02 against a default cost
    of 1.1 a position, and even the interval's upper bound is under 1 (0.965): the report
    says speculation should be off at this load, as `advise --json` says `off`."""
    from specscope.report.build import build_report
    from specscope.report.markdown import render_markdown

    report = build_report(_store(tmp_path, [8, 0, 0]), with_charts=False)
    (a,) = report.advice
    assert a["pays"] is False and a["off"] is True and a["speedup_interval"][1] <= 1
    text = render_markdown(report, tmp_path / "r.md", images=False)
    assert "**Speculation should be off at the load this run saw**" in text
    from specscope.report.html import render_html

    page = render_html(report)
    assert "<b>Speculation should be off at the load this run saw</b>" in page
    assert f"{a['speedup_interval'][1]:.3f}x" in text
    assert "Best k by the cost model" not in text and "does not pay" not in text


def test_too_few_drafts_to_say_off_the_report_says_only_it_does_not_pay(tmp_path):
    """1 of 20 drafts accepted: under 1 at the point estimate (0.955), but 20 drafts leave
    the upper bound at 1.42, so the report does not tell the user to turn it off."""
    from specscope.report.build import build_report
    from specscope.report.markdown import render_markdown

    report = build_report(_store(tmp_path, [1, 0, 0], drafts=20), with_charts=False)
    (a,) = report.advice
    assert a["pays"] is False and a["off"] is False
    text = render_markdown(report, tmp_path / "r.md", images=False)
    assert "**it does not pay**" in text and "should be off" not in text
