"""Acceptance an author says breaks at a later draft position, in a clause
(``specscope.logs.claims`` cuts the sentence; ``claim_acceptance.read_acceptance`` asks here
first): a later position named and a collapse said of it ('per-position acceptance collapses
after position 0', 'destroying acceptance for positions 1 and above', 'the third draft
token is almost never accepted', 第三个token的接受率基本为0), or a fall of the later
positions' acceptance under a setting named ('when X=False ..., the acceptance rate of the
second and third tokens will decrease'). A claim of kind ``cliff``, kept without counts:
the rate the author states at the later position, if any, and nothing made up.

A later position's acceptance that merely falls ('acceptance decreases for later
positions', 'position 2 is at 10%') is the curve every drafter has, no cliff: only words
of a collapse, a share of about nothing, or a fall a setting causes are read. The first
position alone ('collapses at position 0') is low acceptance, not a cliff, and left to
``read_acceptance``."""

from __future__ import annotations

import re

from specscope.logs.claim_words import Claim, Lexicon, negated

_ORD = (
    r"(?:second|third|fourth|fifth|sixth|seventh|eighth|2nd|3rd|[4-9]th|later|subsequent"
    r"|deeper|tail|remaining)"
)
_NOUN = (
    r"(?:draft(?:ed)?\s+|mtp\s+|predicted\s+|speculative\s+|spec\s+)?"
    r"(?:tokens?|positions?|steps?|heads?|indices|index|drafts?)"
)
# A position by its number: a position or an index, or a token, step or head of the draft
# ('draft step 2', 'token 2 onward'; not 'depth 3' or 'Step 3', a setting and a recipe's step).
_NUMBERED = (
    r"(?:(?:draft\s+)?(?:positions?|pos|indices|index|idx)|(?:draft|mtp|spec\w*)\s+"
    r"(?:steps?|tokens?|heads?|layers?)|tokens?)\s*#?\s*[~≈]?\s*(\d{1,2})"
)
# A later position named: by its ordinal ('the second and third tokens', 'later draft
# positions'), by its number with what follows it ('positions 1 and above', 'draft steps
# 1+', 'position 2'), after one ('past draft position 1', 'after position 0'), or in Chinese
# (第三个token, 第二个位置).
_LATER = re.compile(
    rf"(?<![\w-])(?:the\s+)?{_ORD}(?:\s*(?:,|and|or|&|/)\s*(?:the\s+)?{_ORD})*\s+{_NOUN}(?![\w-])"
    rf"|(?<![\w-]){_NUMBERED}"
    r"(?:\s*\+|\s+(?:and|or)\s+(?:above|beyond|later|up|after|higher|on)|\s+onwards?)?(?![\w.%])",
    re.I,
)
_AFTER = re.compile(
    rf"(?<![\w-])(?:past|after|beyond|from)\s+(?:the\s+)?(?:{_NUMBERED}"
    r"|(?:first|1st)\s+(?:draft\s+)?(?:tokens?|positions?|steps?)"
    r"|(?:match[\s-])?depth\s*[~≈]?\s*\d{1,2})(?![\w.%])",  # ('past match-depth 3')
    re.I,
)
# The positions past one named by its ordinal, with a word of the draft on either side
# ('proposals past the third', 'after the second draft token'); an ordinal alone ('after the
# third day') is no position. The index is the one after the ordinal's.
_PAST_ORD = re.compile(
    r"(?<![\w-])(?:proposals?|drafts?|(?:draft(?:ed)?\s+)?tokens?|positions?)\s+(?:past|after|beyond)"
    r"\s+the\s+(first|1st|second|2nd|third|3rd|fourth|4th)(?![\w-])"
    r"|(?<![\w-])(?:past|after|beyond)\s+the\s+(first|1st|second|2nd|third|3rd|fourth|4th)\s+"
    r"(?:draft(?:ed)?\s+)?(?:tokens?|positions?|proposals?|drafts?)(?![\w-])",
    re.I,
)
_ZH_LATER = re.compile(r"第\s*[二三四五六七八2-8]\s*个?\s*(?:token|位置|草稿|预测|头)", re.I)
# A per-position measure, or the measure beside a position ('per-position MTP acceptance').
_PER_POSITION = re.compile(
    r"(?<![\w-])(?:per[\s-]?(?:position|pos|index|idx|step|depth|token|head)|positional"
    r"|position[\s-]?wise)(?![\w])",
    re.I,
)
# A collapse: words that say it broke, not that it fell ('collapses', 'destroying', 'drops
# off a cliff', 'is almost never accepted', 'goes to zero').
_COLLAPSE = re.compile(
    r"(?<![\w-])(?:collaps\w*|destroy\w*|dies|died|dead|plummet\w*|crater\w*|tank(?:s|ed)"
    r"|(?:drops?|dropped|falls?|fell)\s+off\s+a\s+cliff|cliff|"
    r"(?:near(?:ly)?|close\s+to|almost|basically|essentially|practically|virtually)\s+"
    r"(?:zero|0(?:\.0+)?\s?%?|nothing|never|none)"
    r"|(?:goes|went|drops?|dropped|falls?|fell|is|was|are|were|stays?|at)\s+(?:to\s+)?(?:zero|0(?:\.0+)?\s?%)"
    r"|never\s+(?:gets?\s+|got\s+|is\s+|are\s+)?accepted)(?![\w-])",
    re.I,
)
# The words of a break no other reader's trigger holds: a line with them is read
# (``claims.ClaimWatch``).
BREAK_WORDS = r"(?<![\w-])(?:destroy\w*|dies|died|dead|cliff|crater\w*)(?![\w-])"
_ZH_COLLAPSE = re.compile(
    r"(?:接受率|接收率)\s*(?:为|是|只有|几乎为|接近|基本为|基本是|几乎是|降为|降到|降至|掉到)?\s*0(?![\d.])"
    r"|(?:接受率|接收率)(?:几乎|基本)?(?:为零|是零|归零|崩|极低|大幅下降)",
)
# A fall of the later positions' acceptance, read only where a setting is said to cause it.
# (a change, not a level: 'is lower' under k=3 is the curve every draft has)
_FALL = re.compile(
    r"(?<![\w-])(?:decreas\w*|drops?|dropped|fall(?:s|ing)?|fell|degrad\w*|declin\w*"
    r"|reduc\w*)(?![\w-])",
    re.I,
)
# What makes a fall the curve's own shape, said of drafting in general.
_USUAL = re.compile(
    r"(?<![\w-])(?:naturally|as\s+expected|expected(?:ly)?|normal(?:ly)?|usual(?:ly)?|of\s+course"
    r"|inevitabl[ey]|always|each|every|further|as\s+usual|steadily|gradually|geometric\w*)(?![\w-])",
    re.I,
)
_FIRST_ONLY = re.compile(
    r"(?<![\w-])(?:at|for|of|on)\s+(?:the\s+)?(?:(?:draft\s+)?position\s*0|first\s+(?:draft\s+)?(?:token|position))(?![\w-])",
    re.I,
)
# A fall to a share a drafter keeps (a quarter or more): the word is louder than the number.
_TO_HIGH = re.compile(
    r"\s+to\s+[~≈]?\s*(?:2[5-9]|[3-9]\d|100)(?:\.\d+)?\s*(?:[-–]\s*\d+(?:\.\d+)?\s*)?%"
)
# A collapse said to be over: the run spoken of is the one after it.
_UNDONE = re.compile(
    r"(?<![\w-])(?:(?:is|was|are|were)\s+gone|disappear\w*|recover\w*|restor\w*|back\s+up)(?![\w-])",
    re.I,
)
# A share stated in the clause, and what it is the share of: the position named in the
# few words before it ('position 2 ≈ 10%', 'the third token at 3%', 'first token is 90%').
_PERCENT = re.compile(r"[~≈]?\s*(\d{1,3}(?:\.\d+)?)\s?%")
_FIRST = re.compile(
    r"(?<![\w-])(?:(?:first|1st)\s+(?:draft(?:ed)?\s+)?(?:tokens?|positions?)|(?:positions?|pos|index)\s*#?\s*0)(?![\w.])",
    re.I,
)
_NEAR = 40  # how far before its share a position is named
_AT = re.compile(r"\s*(?:at|for|on|in)\s+([^,;()]{1,30}?)(?=\s+(?:and|but|while|vs)\s|[,;()]|$)")


def read_positions(lex: Lexicon, clause: str, conditioned: bool = False) -> Claim | None:
    """A cliff the clause states, or None. ``conditioned``: a setting the claim holds under
    is named (then a later position's plain fall is read as well)."""
    zh = _ZH_LATER.search(clause)
    if zh is not None:
        said = _ZH_COLLAPSE.search(clause, zh.end())
        return (
            Claim("cliff", clause, spec=0.0 if said and "0" in said[0] else None) if said else None
        )
    if not (
        lex.acceptance_subject.search(clause)
        or _PER_POSITION.search(clause)
        or "accept" in clause.lower()
    ):
        return None
    later = _later_named(clause)
    if later is None:
        return None
    collapse = _COLLAPSE.search(clause)
    if collapse is not None and _TO_HIGH.match(clause, collapse.end()):
        collapse = None  # ('depths 2-3 collapse to ~44-62% acceptance': a level, no break)
    if collapse is not None and _UNDONE.search(clause):
        collapse = None  # ('the recovery: non-zero out to pos 14, i.e. the cliff is gone')
    cond = lex.find("condition", clause)
    if collapse is not None and cond is not None and cond.start() < later.start():
        collapse = None  # ('the signature only when later positions also collapse': a rule)
    if collapse is not None and not negated(lex, clause, collapse.start()):
        if (
            _FIRST_ONLY.search(clause)
            and _AFTER.search(clause) is None
            and later.re is not _PAST_ORD
        ):
            return None  # ('collapses at position 0': the first position's, low acceptance)
        return _cliff(clause)
    if (numbers := _by_numbers(clause)) is not None:
        return numbers
    fall = _FALL.search(clause)
    if (
        conditioned
        and fall is not None
        and later.start() < fall.start()
        and not negated(lex, clause, fall.start())
        and not _USUAL.search(clause)
        and not _TO_HIGH.match(clause, fall.end())
    ):
        return _cliff(clause)
    return None


def _by_numbers(clause: str) -> Claim | None:
    """A cliff the shares alone state: the first position at half or more and one of the
    next three at the k_too_large floor or under ('position 0 at 88%, position 2 at 2%').
    A tail further out, or a later position alone, may be the steady decay of a long draft."""
    said = _cliff(clause)
    if said.base is None or said.spec is None or said.base < 0.5 or said.spec > _DEAD:
        return None
    later = _later_named(clause)
    index = _index(later) if later is not None else None
    return said if index is not None and index <= 3 else None


_DEAD = 0.05  # (detect.toml's k_too_large floor: a position accepting less pays for nothing)
_ORDINALS = {"second": 1, "2nd": 1, "third": 2, "3rd": 2, "fourth": 3, "4th": 3}


def _index(m: re.Match[str]) -> int | None:
    """The 0-based index of the later position named, where the words give it (counted from
    0 where a number is written: vLLM's 'position 2' is the third; one past it after 'after
    position N')."""
    if m.re is _PAST_ORD:
        ordinal = (m[1] or m[2]).lower()
        return 1 if ordinal in ("first", "1st") else _ORDINALS[ordinal] + 1
    digits = re.search(r"\d+", m[0])
    if digits is not None:
        return int(digits[0]) + (1 if m.re is _AFTER else 0)
    word = re.match(r"(?:the\s+)?(\w+)", m[0])
    return _ORDINALS.get(word[1].lower()) if word else None


def _later_named(clause: str) -> re.Match[str] | None:
    """Where the clause names a position past the first: after one ('after position 0'),
    an ordinal, a number above 1, or 1 with what follows it ('positions 1 and above', '1+':
    0-based counting; 'position 1' alone may be the first, counted from 1)."""
    after = _AFTER.search(clause) or _PAST_ORD.search(clause)
    if after is not None:
        return after
    for m in _LATER.finditer(clause):
        number = m.group(1)
        if number is None or int(number) >= 2:
            return m
        if int(number) == 1 and m[0].rstrip().lower().endswith(_ONWARD):
            return m
    return None


_ONWARD = ("+", "above", "beyond", "later", "up", "after", "higher", "on")


def _cliff(clause: str) -> Claim:
    """The claim, with the shares the clause states at the first and at a later position
    (``base`` and ``spec``; none made up where the words give none)."""
    first = at = None
    for m in _PERCENT.finditer(clause):
        value = float(m[1])
        if value > 100:
            continue
        # (the position named just after the share, 'at position 2', else just before it)
        after = _AT.match(clause, m.end())
        where = after[1] if after else clause[max(0, m.start() - _NEAR) : m.start()]
        if (named := _later_named(where)) is not None and not _FIRST.search(where[named.end() :]):
            at = round(value / 100, 12)
        elif _FIRST.search(where):
            first = round(value / 100, 12)
    return Claim("cliff", clause, spec=at, base=first)


__all__ = ["BREAK_WORDS", "read_positions"]
