"""'Deeper is worse' stated in words (specscope/logs/claim_depth.py, detectors/depth_words.py):
a deeper draft named with what it cost, or a shallower one found better, in a run of the
author's, read as a claim of kind ``deeper`` and judged a suggestive k_too_large on the
author's word. The world excerpts are real threads (fixtures/world/179, 187); the variants
beside them are other authors' wordings, with the sentences of the same words that state no
such result (questions, rules, beliefs, papers, a rate that falls with k as it should)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import specscope
from specscope.logs.claims import lexicon, read_claims
from specscope.logs.definitions import load_definitions

LEX = lexicon(load_definitions())
WORLD = Path(__file__).resolve().parent.parent / "fixtures" / "world"


def _deeper(text: str) -> list[str]:
    assert LEX is not None
    return [c.stated for c in read_claims(LEX, text) if c.kind == "deeper"]


@pytest.mark.parametrize(
    "text",
    [
        "Beyond k=2 it only gets slower on my box.",
        "Increasing num_speculative_tokens to 5 made decoding slower for us than k=3.",
        "We saw that a larger k hurts throughput on this model: k=1 is best.",
        "Going with longer drafts on our setup just wastes verification: most of them get "
        "rejected.",
        "In my runs, raising the draft length past 3 made TPOT go up every time.",
        "lowering `num_speculative_tokens` from the shipped 4 to 2 was better for us on every "
        "metric.",
        "With --speculative-num-steps 2 we are fine, but any increase from this just makes "
        "latency increase.",
        "For me k=3 was faster than k=5.",
        "In my tests num_speculative_tokens=2 beats 4 on every metric.",
        "On this box, k=5 is slower than k=3.",
        "With our setup k=2 gives better throughput than k=4.",
    ],
)
def test_a_deeper_draft_that_costs_is_read(text: str) -> None:
    assert _deeper(text), text


@pytest.mark.parametrize(
    "text",
    [
        "Does deeper speculation mostly draft tokens that get rejected?",
        "Deeper speculation mostly drafts tokens that get rejected.",  # whose run?
        "If you increase k beyond 4, latency will increase.",
        "I think a larger k would be slower on this model.",
        "On this model deeper speculation is not worse at all.",
        "The paper reports that deeper speculation hurts on small models.",
        "We found that larger k gives a lower acceptance rate but higher throughput.",
        "With k=4 our acceptance rate drops to 40%, as a larger k lowers the per-token rate.",
        "I tried a larger k and it is faster, even though more drafts are wasted.",
        "Lowering num_speculative_tokens from 4 to 2 made it slower on my box.",
        "Lowering k might be better for you.",
        "On a four-Spark TP=4 cluster, `DSPARK_BLOCK_SIZE=3` is consistently slower than "
        "`k=5` on a code-generation prompt.",
        "In our runs any increase will just cause latencies to increase.",  # of what?
        "More draft tokens get rejected with the quantized head on my setup.",
        "In my runs k=3 is slower than k=5.",  # the shallower one slower
        "k=2 is 36% faster and k=4 is 28% faster than vanilla.",
        "Is k=3 faster than k=5 for you?",
        "I think k=2 would be faster than k=4 here.",
        "In my tests k=3 is not faster than k=5.",
        "tp=4 is faster than tp=2 on my box.",
        "num_speculative_tokens=2 outperforms the default of 4",  # whose run?
    ],
)
def test_the_same_words_stating_no_such_result_are_not_read(text: str) -> None:
    assert not _deeper(text), text


@pytest.mark.parametrize(
    "text",
    [
        "Increasing num_speculative_tokens from 3 to 5 gave a higher acceptance length and "
        "faster decode for us.",
        "We moved k from 2 to 4 and the acceptance length went up with it.",
    ],
)
def test_a_depth_changed_from_to_is_no_acceptance_length(text: str) -> None:
    # The from-to is the setting's: read as a length, 3 would be a level nobody stated.
    rows = specscope.parse_text(text + "\n").tables.get("spec_decode", [])
    assert not [r for r in rows if r.get("mean_acceptance_length") is not None], rows


def _detect(path: Path, tmp_path: Path) -> list[specscope.Finding]:
    store = tmp_path / "store"
    specscope.ingest([path], store=store, year=2026)
    return specscope.detect(specscope.open_store(store))


@pytest.mark.parametrize(
    "name",
    [
        "179_atlas_gb10_mtp_drafts1_optimum_text_block.log",
        "187_sglang_suffix_longer_drafts_worse_quote.log",
    ],
)
def test_a_world_excerpt_is_k_too_large_on_the_authors_word(name: str, tmp_path: Path) -> None:
    found = _detect(WORLD / name, tmp_path)
    deep = [f for f in found if f.kind == "k_too_large"]
    assert len(deep) == 1
    assert deep[0].confidence is not None and deep[0].confidence.level == "suggestive"
    said = json.dumps(deep[0].sample)
    assert "author" in said
    # Nothing else is blamed on those words: not slower than no speculation, not low.
    assert {f.kind for f in found} <= {"k_too_large", "insufficient_data"}


def test_a_run_with_its_own_curve_is_judged_on_it(tmp_path: Path) -> None:
    # The per-position rates are the counted detector's to judge; the words add nothing.
    paste = tmp_path / "paste.log"
    paste.write_text(
        "INFO 04-07 17:19:59 [metrics.py:101] SpecDecoding metrics: Mean acceptance length: "
        "2.70, Accepted throughput: 27.00 tokens/s, Drafted throughput: 40.00 tokens/s, "
        "Accepted: 2700 tokens, Drafted: 4000 tokens, Per-position acceptance rate: 0.900, "
        "0.800, 0.000, 0.000, Avg Draft acceptance rate: 67.5%\n"
        "Deeper speculation on this model mostly drafts tokens that get rejected.\n",
        encoding="utf-8",
    )
    found = _detect(paste, tmp_path)
    deep = [f for f in found if f.kind == "k_too_large"]
    assert len(deep) == 1, [f.kind for f in found]
    assert deep[0].confidence is not None and deep[0].confidence.level != "suggestive"
