"""low_acceptance where the method is named but the reference table has no entry for it at
the run's k (issue 16): a learned drafter's floor, said as the finding's assumption.

Before, naming the method made the detector blind: DFlash at k = 8 on a model the table
does not list, Medusa, or a method it does not know (DSpark) found no reference, so a
first position at 30% got no finding, while the same lines with the method unnamed were
judged against the floor of learned drafters and called low. Lookups (n-gram, suffix) keep
their own scale.
"""

from __future__ import annotations

from pathlib import Path

import pytest

import specscope
from specscope.analysis.detectors import detect

from .loglines import spec, start, stats

WORLD = Path(__file__).resolve().parent.parent / "fixtures" / "world"
LOW_8 = [120, 60, 30, 15, 8, 4, 2, 1]  # of 400 drafts: a1 30%, k = 8
HEALTHY_8 = [370, 330, 290, 250, 210, 180, 150, 120]  # a1 92%, tau 5.75


def _low(tmp_path: Path, lines: list[str], **overrides: object) -> list[specscope.Finding]:
    tmp_path.mkdir(parents=True, exist_ok=True)
    log = tmp_path / "paste.log"
    log.write_text("\n".join(lines) + "\n", encoding="utf-8")
    store = tmp_path / "store"
    specscope.ingest([log], store=store, year=2026, overrides=overrides or None)
    return [f for f in detect(specscope.open_store(store)) if f.kind == "low_acceptance"]


def _served(method: str | None, k: int, per_pos: list[int]) -> list[str]:
    lines = [start(1, "acme/Foo-32B", method, k)] if method else []
    for i in range(5):
        lines += [stats(i), spec(i, 400, per_pos)]
    return lines


@pytest.mark.parametrize(("method", "per_pos"), [("dflash", LOW_8), ("medusa", LOW_8[:4])])
def test_a_named_method_without_a_reference_is_judged_on_the_floor(tmp_path, method, per_pos):
    (found,) = _low(tmp_path, _served(method, len(per_pos), per_pos))
    assert found.confidence is not None and found.confidence.level == "suggestive"
    assert any(
        f"no entry for {method} at k={len(per_pos)}" in a for a in found.confidence.assumptions
    )
    assert "upper bound of a1" in found.confidence.test
    # ... as the same lines are with the method unnamed
    (unnamed,) = _low(tmp_path / "unnamed", _served(None, len(per_pos), per_pos))
    assert unnamed.confidence is not None
    assert any("method is not stated" in a for a in unnamed.confidence.assumptions)


def test_a_healthy_block_drafter_at_that_k_is_not(tmp_path):
    assert _low(tmp_path, _served("dflash", 8, HEALTHY_8)) == []


def test_a_method_with_its_own_first_position_is_not_judged_on_the_floor(tmp_path):
    """EAGLE-3's a_1 reference (0.7) decides: a first position at 72% is not low although
    the positions after it fall faster than the floor's curve (tau - 1 of 1.31 at k = 6
    is under half of its 2.95) and the table has no EAGLE-3 tau at k = 6."""
    per_pos = [288, 140, 60, 24, 8, 4]  # of 400: 72%, 35%, 15%, 6%, 2%, 1%
    assert _low(tmp_path, _served("eagle3", 6, per_pos)) == []
    assert _low(tmp_path / "unnamed", _served(None, 6, per_pos)) != []  # the floor's claim


@pytest.mark.parametrize("method", ["ngram", "suffix"])
def test_lookups_keep_their_own_scale(tmp_path, method):
    for found in _low(tmp_path, _served(method, 4, LOW_8[:4])):
        assert found.confidence is not None
        assert not any("learned drafter" in a for a in found.confidence.assumptions)


def test_a_real_low_paste_keeps_its_verdict_when_a_method_the_table_lacks_is_named(tmp_path):
    """World 85 (four wrapped vLLM SpecDecoding records of an EAGLE run at k = 4, and the
    author's '~10% acceptance'): low unnamed, and the same runs low with a method named that
    the table has no entry for (``--set spec_method=dspark``)."""
    paste = (WORLD / "85_vllm_eagle_llm_api_low_wrapped.log").read_text(encoding="utf-8")
    lines = paste.splitlines()
    unnamed = _low(tmp_path, lines)
    named = _low(tmp_path / "named", lines, spec_method="dspark")
    assert unnamed and [f.run_id for f in named] == [f.run_id for f in unnamed]
    for found in named:  # the records, and the author's '~10%' below them
        assert found.confidence is not None
        assert any("no entry for dspark" in a for a in found.confidence.assumptions)


LLAMACPP_8PCT = "draft acceptance rate = 0.08000 (   80 accepted /  1000 generated)"


@pytest.mark.parametrize("method", ["draft_model", "mtp"])
def test_a_named_method_with_k_unknown_claims_only_what_holds_at_any_k(tmp_path, method):
    """llama-server's request line counts tokens, not verify steps: 80 of 1,000 drafted
    tokens at k = 3 assumed put a_1 under 28%, low for a draft model (30%) or MTP (40%);
    at llama.cpp's default draft-max of 16 the same tokens are 62 drafts and a_1 may be
    anything. Unnamed, the line was never called low on the k assumed; named, neither."""
    assert _low(tmp_path, [LLAMACPP_8PCT], spec_method=method) == []
    assert _low(tmp_path / "unnamed", [LLAMACPP_8PCT]) == []


def test_a_named_method_with_k_said_is_judged_at_that_k(tmp_path):
    """With k said (``--set k=16``) the verify steps are known: 8 of 1,000 drafted tokens
    are 62 drafts whose a_1 is under 21% (one-sided 95%), low for a draft model (30%) and
    no assumption of k."""
    line = "draft acceptance rate = 0.00800 (    8 accepted /  1000 generated)"
    (found,) = _low(tmp_path, [line], spec_method="draft_model", k=16)
    assert found.confidence is not None and found.confidence.level == "likely"
    assert found.confidence.test.startswith("95% one-sided upper bound of a1 ")
    assert not any(a.startswith("k not stated") for a in found.confidence.assumptions)


def test_request_lines_take_k_from_the_statistics_lines_of_the_same_tokens(tmp_path):
    """llama-server's request lines count tokens, its since-start statistics lines the
    verify steps of the same tokens (#gen drafts): the largest k the request lines' claim
    must hold at is the statistics' (3 here), not 16, and 30 of 300 is low for EAGLE-3."""
    from .test_forced_llamacpp import COMMAND, _log

    found = _low(tmp_path, _log(COMMAND, accepted=30).splitlines())
    tests = sorted(f.confidence.test for f in found if f.confidence is not None)
    assert len(found) == 2
    assert any("k up to 3, the statistics lines' drafts" in t for t in tests)
