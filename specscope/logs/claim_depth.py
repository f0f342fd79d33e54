"""'Deeper is worse' stated in words (``specscope.logs.claims`` calls ``read_depth`` on each
sentence): the author drafted deeper than a depth that works and says what it cost ('any
increase from this will just cause latencies to increase', 'Deeper speculation on this
model mostly drafts tokens that get rejected', 'beyond k=2 it only gets slower'). That is
k_too_large's claim, on the author's word: a claim of kind ``deeper``, kept without a value
(no depth's rate or speed is made up for it).

Three parts must meet in one sentence (``parsers/stated_claims.toml``'s ``deeper``,
``depth_worse``, ``depth_set``): a deeper draft named, a cost of it said and not denied,
and a run of the author's (first person, or 'this model', 'here'). A rate that falls as the
depth grows is no cost: a share of draft tokens falls with k as it should, and only the
time or the drafts wasted say the depth does not pay. Not read: a question, a hedge or a
belief ('I think a larger k would be slower'), someone else's words (a paper, the docs),
a rule ('if k is larger, latency increases', unless under a setting named by its number),
and speed said to improve with the depth in the same stretch."""

from __future__ import annotations

import re

from specscope.logs.claim_words import Claim, Lexicon, negated

# The author's own run, when no first person says so ('on this model', 'here').
_OWN = re.compile(
    r"(?<![\w-])(?:this|these|here|in (?:all|every|each|both|my|our) (?:runs?|tests?|cases))"
    r"(?![\w-])|^(?:testing|tested|benchmarking|measuring|measured)\s",
    re.I,
)  # (and a sentence that opens with the author's act: 'Testing the recipe on a DGX Spark, ...')
# A belief is no measurement ('I think a larger k would be slower').
_BELIEF = re.compile(
    r"(?<![\w-])(?:think|believe|suspect|assum\w*|imagine|feel like)(?![\w-])", re.I
)
# 'any increase from this' points back at a depth the sentence set before it.
_POINTS_BACK = re.compile(r"(?<![\w-])any (?:increase|more)\s", re.I)
_CLAUSE_START = re.compile(
    r"[,;:]\s+(?:(?:and|but|so|however|whereas|although|though)\s+)?"
    r"|\s(?:but|however|whereas|although|though)\s",
    re.I,
)


def read_depth(lex: Lexicon, sentence: str, mark: str, mine_before: bool) -> Claim | None:
    """The 'deeper is worse' of one sentence, or None; ``mine_before``: its line spoke of
    the author's own run before it."""
    if mark in ("?", "\uff1f"):
        return None
    deeper = lex.find("deeper", sentence)
    if deeper is None:
        return _shallower(lex, sentence, mine_before) or _pair(lex, sentence, mine_before)
    worse = next(
        (
            m
            for m in lex.words["depth_worse"].finditer(sentence)
            if not negated(lex, sentence, m.start())
        ),
        None,
    )
    if worse is None:
        return None
    if _POINTS_BACK.match(deeper[0]) and not lex.has("depth_set", sentence[: deeper.start()]):
        return None  # ('any increase from this': from what? no depth set before it)
    first, last = min(deeper.start(), worse.start()), max(deeper.end(), worse.end())
    if last - first > 160:
        return None  # (two ends of a long sentence: not one claim)
    # The stretch that says it: from the clause the first part opens in to the second's end.
    starts = [m.end() for m in _CLAUSE_START.finditer(sentence, 0, first)]
    span = sentence[starts[-1] if starts else 0 : last]
    if negated(lex, span, deeper.start() - (starts[-1] if starts else 0)):
        return None  # ('not deeper speculation but ...')
    if lex.has("hedge", span) or lex.has("quote", span) or _BELIEF.search(span):
        return None
    if lex.has("will", span) and not lex.has("first_person", sentence):
        return None  # (a forecast, or a document's advice: 'a larger k will be slower')
    cond = lex.find("condition", span)
    if cond is not None and not lex.has("concrete", span[cond.end() :]):
        return None  # ('if the depth is larger, it gets slower': a rule)
    at = worse.start() - (starts[-1] if starts else 0)
    if lex.has("faster", span[:at] + " " + span[at + len(worse[0]) :]):
        return None  # (speed said to improve as well: 'faster, but more drafts wasted')
    if not (_own(lex, sentence) or mine_before):
        return None  # whose run? ('deeper speculation wastes drafts' in a guide)
    return Claim("deeper", span.strip())


def _shallower(lex: Lexicon, sentence: str, mine_before: bool) -> Claim | None:
    """The same claim from the other side: a shallower draft found better ('lowering
    `num_speculative_tokens` from the shipped 4 to 2 was better on every stable metric')."""
    less = lex.find("shallower", sentence)
    if less is None:
        return None
    better = next(
        (
            m
            for m in lex.words["faster"].finditer(sentence, less.end())
            if not negated(lex, sentence, m.start())
        ),
        None,
    )
    if better is None or better.start() - less.end() > 120:
        return None
    span = sentence[less.start() : better.end()]
    if negated(lex, sentence, less.start()) or lex.has("hedge", span) or _BELIEF.search(span):
        return None  # ('not lowering k', 'lowering k might be better')
    if (
        lex.has("will", span)
        or lex.has("quote", span)
        or lex.has("condition", sentence[: less.start()])
    ):
        return None  # (advice, a document's words, a rule)
    if not (_own(lex, sentence) or mine_before):
        return None
    return Claim("deeper", span.strip())


_BETTER = re.compile(r"outperform|beat|faster|better", re.I)


def _pair(lex: Lexicon, sentence: str, mine_before: bool) -> Claim | None:
    """Two depths set against each other by number, the deeper one worse ('k=3 was faster
    than k=5', 'k=5 is slower than k=3'); the shallower one worse is no such claim."""
    m = lex.find("depth_pair", sentence)
    if m is None or negated(lex, sentence, m.start("verb")):
        return None
    a, b = int(m["a"]), int(m["b"])
    better = _BETTER.match(m["verb"]) is not None
    if a == b or (a < b) != better:
        return None  # (the shallower one slower: 'k=3 is slower than k=5')
    span = m[0]
    if lex.has("hedge", span) or _BELIEF.search(sentence) or lex.has("quote", sentence):
        return None
    if lex.has("condition", sentence[: m.start()]) or not (_own(lex, sentence) or mine_before):
        return None  # (a rule, or whose run?)
    return Claim("deeper", span.strip())


def _own(lex: Lexicon, sentence: str) -> bool:
    return lex.has("first_person", sentence) or _OWN.search(sentence) is not None


__all__ = ["read_depth"]
