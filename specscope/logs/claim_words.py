"""The parts every reader of a clause shares (``specscope.logs.claims`` reads speed and the
sentence, ``specscope.logs.claim_acceptance`` acceptance): the word lists of
``parsers/stated_claims.toml`` compiled by role, a clause's claim, and a negation's reach."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

import regex

from specscope.logs.definitions import Definition

ROLES = (
    "speed", "time", "acceptance", "prefill", "slower", "lower", "higher", "faster", "zero",
    "reference", "hedge", "will", "quote", "negation", "condition", "concrete", "concurrent",
    "versus", "rate", "depth", "first_person", "worse", "subject_zh", "slower_zh", "hedge_zh",
    "cause", "unreal", "consequence", "minimiser", "linking", "referent", "fraction", "aside",
    "low", "fall", "few", "zero_zh", "low_zh", "crowd", "times_slower", "percent_slower",
    "share_of", "time_zh", "fall_zh", "rise_zh", "among_zh", "deeper", "depth_worse", "depth_set",
    "shallower", "depth_pair",
)  # fmt: skip
ATTRIBUTIVE = re.compile(r"(?<![\w-])(?:the|a|an)\s+$", re.I)  # ('a low rate': a thing named)
_ABSENT = re.compile(r"spec|draft|mtp|eagle|(?<![a-z])sd(?![a-z])", re.I)  # 'no-spec', 'w/o SD'


@dataclass(frozen=True)
class Lexicon:
    """The compiled word lists of the claims definitions."""

    subject: regex.Pattern[str]
    acceptance_subject: regex.Pattern[str]
    words: Mapping[str, regex.Pattern[str]]

    def find(self, role: str, text: str) -> regex.Match[str] | None:
        return self.words[role].search(text)

    def has(self, role: str, text: str) -> bool:
        return self.words[role].search(text) is not None


@dataclass
class Claim:
    """One clause's verdict: ``kind`` slower / faster / zero / length / rate / comparison /
    baseline; the words quoted, the condition kept, the values bound."""

    # (and 'low': acceptance called low in words, no rate; 'collapse': speed or acceptance
    # falling with more than one request at once, against fewer, not against no speculation)
    kind: str
    stated: str
    condition: str | None = None
    concurrency: bool = False
    spec: float | None = None
    base: float | None = None
    unit: str | None = None
    k: int | None = None
    needs_subject: bool = False  # speculation must be named on a line around it
    colon: bool = False  # the sentence ends in ':' and introduces what follows

    @property
    def blames(self) -> bool:
        return self.kind != "faster"


def lexicon(definitions: Iterable[Definition]) -> Lexicon | None:
    """The lexicons, from the definitions that hold them (None without them)."""
    defs = {d.name: d for d in definitions if d.parse == "claims"}
    speed, acc = defs.get("stated_claims"), defs.get("stated_claims_acceptance")
    if speed is None or acc is None or speed.anchor is None or acc.anchor is None:
        return None
    words = {r: regex.compile(speed.keys[r], regex.I) for r in ROLES if r in speed.keys}
    if len(words) != len(ROLES):
        return None
    return Lexicon(speed.anchor, acc.anchor, words)


def negated(lex: Lexicon, clause: str, at: int) -> bool:
    """A negation in the few words before a predicate ('not slower', "doesn't hurt", 'no
    slowdown', 'no longer drops')."""
    before = clause[max(0, at - 24) : at]
    return lex.has("negation", before) or bool(re.search(r"(?<![\w-])no\s+$", before, re.I))


def without_aside(lex: Lexicon, clause: str) -> str:
    """The clause without an aside on another run after a stated share ('~1/11 acceptance on
    prompts where the PoC binary reported 100%': the report is the PoC's)."""
    frac = lex.words["fraction"].search(clause)
    if frac is None:
        return clause
    aside = lex.find("aside", clause[frac.end() :])
    return clause if aside is None else clause[: frac.end() + aside.start()]


def names_absence(lex: Lexicon, clause: str) -> bool:
    """The reference names speculation itself ('when no draft model is used')."""
    return any(_ABSENT.search(m[0]) for m in lex.words["reference"].finditer(clause))


__all__ = [
    "ATTRIBUTIVE",
    "ROLES",
    "Claim",
    "Lexicon",
    "lexicon",
    "names_absence",
    "negated",
    "without_aside",
]
