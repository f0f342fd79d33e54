"""Acceptance an author states in a clause (``specscope.logs.claims`` cuts the sentence and
calls ``read_acceptance`` on each clause a hedge, a quote or a question leaves): nothing
accepted ('close to 0%', 接受率为0), a share ('~1/11 acceptance', 'acceptance rate was
~2.5%'), a length before and after ('from 1.4 to 1.8'), or acceptance called low in words
with no rate at all ('the acceptance rate is very low', 'almost no draft tokens are
accepted', 接受率大幅劣化): a claim of kind ``low``, kept without a value."""

from __future__ import annotations

import re

from specscope.logs.claim_positions import read_positions
from specscope.logs.claim_words import ATTRIBUTIVE, Claim, Lexicon, negated

_FROM_TO = re.compile(
    r"(?<![\w.])from\s+~?(\d+(?:\.\d+)?)\s?(%?)\s+to\s+~?(\d+(?:\.\d+)?)\s?(%?)(?![%\d.])(?!\s?[-–~]\s?\d)"
)  # (not to a range: '10% to 50% - 80%' sums up settings)
_PER_STEP_MAX = 16.0  # a mean acceptance length is at most a depth plus one
# A change of a setting, not of acceptance: the from-to is the depth's ('Increasing
# num_speculative_tokens from 3 to 5 gave a higher acceptance length').
_SETTING_CHANGED = re.compile(
    r"(?<![\w-])(?:k|depth|num[_-]speculative[_-]tokens|(?:draft|speculative|speculated)[\s_-]"
    r"(?:tokens|length|depth|steps)|n[_-]max|draft[_-](?:n[_-])?max|batch[\s_-]size|concurrency"
    r"|temperature|context(?:[\s_-]length)?)\s*$",
    re.I,
)
_SHARE = re.compile(r"(?:was|is|of|at|=|:)?\s*[~≈]?\s?(\d{1,2}(?:\.\d+)?|100)\s?%(?![\w%])")
_PAST_POSITION = re.compile(
    r"\s+(?:\w+\s+)?(?:past|after|beyond|from|at|for|in|on)\s+(?:the\s+)?(?:later\s+|deeper\s+)?"
    r"(?:draft\s+)?(?:position|pos|token|step|depth)s?\b",
    re.I,
)
# Later draft positions named: what is said of them is a cliff's, not the first position's.
_LATER = re.compile(
    r"(?<![\w-])(?:second|third|fourth|fifth|sixth|later|deeper|last|tail|positions?|pos)(?![\w-])",
    re.I,
)
_TO_VALUE = re.compile(r"\s+(?:to|at|by)\s+[~≈]?\s?\d")  # a fall to a value ('to 0-4%')
# A verb that makes a word of lowness after the measure its predicate ('acceptance rate is
# very low'; not 'acceptance rate at low temperature').
_LINKED = re.compile(
    r"(?<![\w-])(?:is|was|are|were|'s|seems?|seemed|looks?|looked|remains?|remained|stays?|"
    r"stayed|gets?|got|became|becomes|been|being|feels?|felt)(?![\w-])",
    re.I,
)
# What makes a share after the measure no level of acceptance: a change ('acceptance rate
# 5% higher than EAGLE-2', 'is 4% better with topk 4'), or a share of nothing ('MTP
# acceptance 0% (0/0)': no token drafted, colibri's footer with drafting off).
_NOT_A_LEVEL = re.compile(
    r"\s*(?:\(\s*0\s*/\s*0\s*\)|(?:points?\s+|pp\s+)?(?:higher|lower|better|worse|more|less|"
    r"improvements?|increases?|gains?|drops?)(?![\w-]))",
    re.I,
)
# The words between a measure of acceptance and its share ('acceptance rate was about ~1/11').
_LINK = re.compile(r"(?:\s*(?:rate|length|of|at|was|is|around|about|only|just|roughly))*\s*", re.I)


def read_acceptance(
    lex: Lexicon, clause: str, k: int | None, conditioned: bool = False
) -> Claim | None:
    """What the clause states of acceptance; ``conditioned``: under a setting it names
    (a later position's fall is then a cliff, ``read_positions``)."""
    said = read_positions(lex, clause, conditioned)
    if said is not None:
        return said
    said = _zh_acceptance(lex, clause)
    if said is not None:
        return said
    few = lex.find("few", clause)
    if few is not None and (
        lex.acceptance_subject.search(clause) or lex.subject.search(clause)
    ):  # ('almost no draft tokens are accepted': almost nothing, no share said)
        if negated(lex, clause, few.start()) or _LATER.search(clause):
            return None  # ('the fourth and later draft tokens are ... almost never accepted')
        return Claim("low", clause)
    zero = lex.find("zero", clause)
    # ('nothing is accepted by the MTP head': the words of acceptance are the predicate's)
    spoken = lex.acceptance_subject.search(clause) is not None
    if zero is not None and (
        spoken or ("accept" in zero[0].lower() and lex.subject.search(clause))
    ):
        return None if negated(lex, clause, zero.start()) else Claim("zero", clause, spec=0.0)
    if not spoken:
        return None
    share = _fraction(lex, clause)
    if share is None:
        share = _percent(lex, clause)
    if share is not None:
        return Claim("rate", clause, spec=share)
    change = _FROM_TO.search(clause)
    if change is not None and _SETTING_CHANGED.search(clause, 0, change.start()):
        return None  # (a setting's from-to: the acceptance it gave is said in words)
    if change is None:
        return Claim("low", clause) if _called_low(lex, clause) else None
    a, b = float(change[1]), float(change[3])
    percent = bool(change[2] or change[4])
    rate_word = re.search(r"rate", clause[: change.start()], re.I) is not None
    if percent or (rate_word and max(a, b) <= 1):
        value = min(a, b) / (100 if percent else 1)
        return Claim("rate", clause, spec=round(value, 12))
    if min(a, b) < 1 or max(a, b) > _PER_STEP_MAX:
        return None
    return Claim("length", clause, spec=min(a, b), k=k)


def _percent(lex: Lexicon, clause: str) -> float | None:
    """A share in percent right after the measure of acceptance, past linking words alone
    ('acceptance rate was ~2.5%'; not 'acceptance rate of the 7B at 4 bits: 30%')."""
    for acc in lex.acceptance_subject.finditer(clause):
        if "accepted" in acc[0].lower():
            continue  # (tokens accepted: a count follows, not a share)
        link = _LINK.match(clause, acc.end())
        value = _SHARE.match(clause, link.end() if link else acc.end())
        if value is None or _NOT_A_LEVEL.match(clause, value.end()):
            continue
        if not negated(lex, clause, acc.start()):
            return round(float(value[1]) / 100, 12)
    return None


def _zh_acceptance(lex: Lexicon, clause: str) -> Claim | None:
    """Acceptance (接受率) at zero or called low in Chinese, where no hedge (可能, 吗) is."""
    if lex.has("hedge_zh", clause):
        return None
    if lex.has("zero_zh", clause):
        return Claim("zero", clause, spec=0.0)
    return Claim("low", clause) if lex.has("low_zh", clause) else None


def _called_low(lex: Lexicon, clause: str) -> bool:
    """The measure of acceptance called low in words: a word of lowness after it past a
    linking verb ('the acceptance rate on 2.0 is very low'), just before it with at most two
    words between, no article and speculation or the author named ('low MTP acceptance
    rate'; not 'a low acceptance rate', a thing in general), or a fall after it ('acceptance
    dropped significantly'); none denied ('acceptance is not bad')."""
    subjects = list(lex.acceptance_subject.finditer(clause))
    # (before the measure, whose? 'workers with low acceptance rate' is no drafter's)
    whose = lex.subject.search(clause) is not None or lex.has("first_person", clause)
    for word in lex.words["low"].finditer(clause):
        if negated(lex, clause, word.start()):
            continue
        for acc in subjects:
            if acc.end() <= word.start():
                gap = clause[acc.end() : word.start()]
                if len(gap) <= 40 and _LINKED.search(gap) and not lex.has("versus", gap):
                    return True
            elif word.end() <= acc.start():
                between = clause[word.end() : acc.start()].split()
                if whose and len(between) <= 2 and not ATTRIBUTIVE.search(clause[: word.start()]):
                    return True
    for fall in lex.words["fall"].finditer(clause):
        before = clause[max(0, fall.start() - 40) : fall.start()]
        if _TO_VALUE.match(clause, fall.end()) or negated(lex, clause, fall.start()):
            continue  # ('collapses to 0-4%': a rate stated, the numbered readers')
        if _PAST_POSITION.match(clause, fall.end()):
            continue  # ('collapses past draft position 1': a cliff, no low first position)
        if lex.acceptance_subject.search(before):
            return True
    return False


def _fraction(lex: Lexicon, clause: str) -> float | None:
    """A share written as a fraction next to the measure of acceptance ('~1/11 acceptance',
    'acceptance of about 1 in 11'), past linking words alone."""
    for acc in lex.acceptance_subject.finditer(clause):
        if "accepted" in acc[0].lower():
            continue  # ('1/11 tokens accepted': counts, not a share)
        for frac in lex.words["fraction"].finditer(clause):
            a, b = int(frac[1]), int(frac[2])
            if b < 2 or a > b:
                continue
            if frac.end() <= acc.start():
                near = not clause[frac.end() : acc.start()].strip()
            else:
                between = clause[acc.end() : frac.start()]
                near = len(between) <= 30 and _LINK.fullmatch(between) is not None
            if near and not negated(lex, clause, frac.start()):
                return round(a / b, 12)
    return None


__all__ = ["read_acceptance"]
