"""An author's verdict on speculation stated in prose, read by sentence and clause instead of
one regex per wording (``parsers/stated_claims.toml`` holds the lexicons and the samples,
``parsers/stated_claims_acceptance.toml`` the acceptance this reader keeps).

A sentence is cut into clauses; in each the reader looks for a subject (speculation named, or
a measure of it), a predicate with its polarity, a reference (decoding without speculation)
and the numbers on either side. A hedge, a quote or a question belongs to its clause: it makes
that clause no claim and leaves the others alone. A condition ('if NUM_PARALLEL is larger than
one') is kept with the claim it conditions. Only what blames speculation is kept as a record
(``bench`` rows like ``stated_speedup_words``, partial ``spec_decode`` rows like
``stated_acceptance``); a positive claim is read (``read_claims``) and kept nowhere.

Every pattern is a flat alternation of words (no nested quantifier): a line of any length is
read in linear time. The reader sees the lines the line parser is fed (its own literals are
words in Chinese no server log prints): a server log's lines stay where the bulk reader
puts them. A sentence wrapped over lines is read across the break (``ClaimWatch``).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import polars as pl
import regex

from specscope.logs.claim_acceptance import read_acceptance
from specscope.logs.claim_depth import read_depth
from specscope.logs.claim_positions import BREAK_WORDS, read_positions
from specscope.logs.claim_speed import (
    against_off,
    among_methods,
    dismissed,
    falls_with_load,
    slowdown_of,
    slower_zh,
    speed_of,
    turned_off_first,
)
from specscope.logs.claim_words import Claim, Lexicon, lexicon, names_absence, without_aside
from specscope.logs.clean import clean_line
from specscope.logs.definitions import Definition
from specscope.logs.limits import max_line_bytes
from specscope.logs.reading import Reading

CONTEXT_LINES = 6  # how far a sentence's subject may be on a line around it
_MARKUP = re.compile(
    r"\*\*|__|`|(?<![\w*])\*(?=\w)|(?<=\w)\*(?![\w*])|^\s*(?:[-*+>]\s+|#+\s+|\d+\.\s+)+"
)  # (and '*slower*', a word in italics)
_CLAUSE = re.compile(
    r"[,:](?=\s)|[\uff0c\uff1a]|\s(?=(?:but|however|although|though|whereas)\s)", re.I
)  # (a full-width comma or colon is one with its space)
_ENDS = "!?;\u3002\uff01\uff1f\uff1b"  # and their full-width forms
_LEAD = re.compile(r"^(?:and|so|also|but|however|although|though|whereas)\s+", re.I)
_RATIO = re.compile(r"\d\s?(?:%|×|x(?![a-z]))", re.I)
_BASE_AFTER = re.compile(r"\s*\(?\s*(?:without|w/o|baseline)(?![\w-])", re.I)
_OBSERVED = re.compile(
    r"(?:I|we)\s+(?:have\s+|had\s+|also\s+|just\s+)?(?:observed|noticed|found|saw|measured)\s+that\s",
    re.I,
)  # (a report's opening words: 'I observed that', 'we have noticed that')
# An abbreviation's full stop ends no sentence ('collapses after position 0 (e.g. position 2').
_ABBREVIATION = re.compile(r"(?:^|[\s(])(?:e\.g|i\.e|vs|approx|cf)$", re.I)
_ASKS_CAUSE = re.compile(r"^\s*why\s|的原因|为什么|为何", re.I)  # a question that asks the cause
_INVERTED = re.compile(r"(?:had|were)\s", re.I)  # a condition by inversion: 'Had it been ...'
# A line wrapped mid-sentence ends in a word, a comma, a bracket or a mark of emphasis (ASCII:
# a Chinese line ends its sentence); a line that opens a block never continues one.
_WRAPPED = re.compile(r"[A-Za-z0-9,)(%*`_\-]\s*$")
# The next line goes on a sentence: it opens with a small letter or a number, or emphasis or a
# bracket before one ('*slower*: the flag costs'); a capital opens a sentence as often.
_GOES_ON = re.compile(r"\s*(?:[*_`(]{1,2})?[a-z0-9]")
_FENCE = re.compile(r"\s*(?:```|~~~)")
_WRAP_LEAST = 60  # a line shorter is no wrap
# The widths prose is wrapped at: editors' fill columns (70, 72, 79: Emacs, git, PEP 8),
# terminals' 80, and wider terminals and viewers'.
_WIDTHS = (70, 72, 76, 78, 79, 80, 100, 120)
_STATED = '"baseline":'  # a stated comparison's extra: the author's numbers
_ACCEPTANCE = ("zero", "rate", "length", "low", "cliff", "deeper")  # kept as stated acceptance

# The words a line must hold for the reader to look at it at all (one search a line).
_TRIGGERS = (
    "slower", "worse", "lower", "higher", "faster", "zero", "slower_zh", "fraction", "low", "fall",
    "few", "zero_zh", "low_zh", "percent_slower", "share_of", "rise_zh", "deeper", "shallower",
    "depth_pair",
)  # fmt: skip

Keep = Callable[[Definition, int, Reading], None]


def sentences(text: str) -> list[tuple[str, str]]:
    """The sentences of a line, each with the mark that ended it ('' at the line's end): a
    full stop that is no decimal point, part of a name or an abbreviation's ('0.8',
    'vllm0.25.1', 'e.g.'), ';', '!',
    '?' or ':' at the end."""
    out: list[tuple[str, str]] = []
    start = 0
    for i, ch in enumerate(text):
        full_stop = ch == "." and (i + 1 == len(text) or text[i + 1].isspace())
        full_stop = full_stop and _ABBREVIATION.search(text, max(0, i - 8), i) is None
        ends = full_stop or ch in _ENDS
        if ends:
            if text[start:i].strip():
                out.append((text[start:i].strip(), ch))
            start = i + 1
    if text[start:].strip():
        tail = text[start:].strip()
        mark = ":" if tail.endswith(":") else ""
        out.append((tail.rstrip(":").strip(), mark))
    return out


def _clauses(sentence: str) -> list[str]:
    out, start = [], 0
    for m in _CLAUSE.finditer(sentence):
        out.append(sentence[start : m.start()].strip())
        start = m.end()
    out.append(sentence[start:].strip())
    return [_LEAD.sub("", c) for c in out if c]


def _condition(lex: Lexicon, clause: str, before: str | None) -> str | None:
    """The condition of a clause: the last clause before it that opens with one
    (``before``), or the words from one inside it, after its predicate."""
    if before is not None:
        return before
    m = lex.find("condition", clause)
    if m is None or m.start() == 0 or lex.has("reference", clause[m.start() :]):
        return None  # ('compared to when no draft model is used': the other side)
    return clause[m.start() :]


def _depth(lex: Lexicon, sentence: str) -> int | None:
    m = lex.find("depth", sentence)
    return int(next(g for g in m.groups() if g)) if m is not None else None


def _rates(lex: Lexicon, sentence: str) -> Claim | None:
    """A rate set against a stated base rate, or a usual rate alone (the baseline side)."""
    found = list(lex.words["rate"].finditer(sentence))
    if not found or len(found) > 2 or not lex.has("first_person", sentence):
        return None  # (whose rates? a label's, a document's)
    base = []
    last = 0
    for m in found:
        before = sentence[max(last, m.start() - 40) : m.start()]
        after = sentence[m.end() : m.end() + 20]
        refs = list(lex.words["reference"].finditer(before))
        base.append(bool(refs) or re.match(r"\s*(?:without|w/o|baseline)", after, re.I) is not None)
        last = m.end()
    if len(found) == 2 and base.count(True) == 1:
        spec = found[base.index(False)]
        bas = found[base.index(True)]
        s, b = float(spec[1]), float(bas[1])
        if s >= b:
            return Claim("faster", sentence)
        # The author's own rate against the base rate they state: what is measured against
        # decoding without speculation is speculation (its name may be lines away).
        return Claim("comparison", sentence, spec=s, base=b, unit=spec[2])
    if len(found) == 1 and base[0]:
        return Claim("baseline", sentence, base=float(found[0][1]), unit=found[0][2])
    return None


def _blocked(lex: Lexicon, clause: str, conditioned: bool) -> bool:
    """A hedge, a forecast, a quote of others in the clause: no claim of the author's own."""
    if lex.has("hedge", clause) or lex.has("quote", clause):
        return True
    return lex.has("will", clause) and not conditioned


def read_sentence(
    lex: Lexicon, sentence: str, mark: str, spoken_of: bool, mine_before: bool = False
) -> list[Claim]:
    """The claims of one sentence; ``spoken_of``: its line named speculation before it,
    ``mine_before``: its author spoke of their own run before it ('I've tried several
    draft models. However, none of them gave any speedup')."""
    if (deeper := read_depth(lex, sentence, mark, mine_before)) is not None:
        return [deeper]  # (its slower is a deeper draft's, against a shallower one)
    clauses = _clauses(sentence)
    if mark in ("?", "\uff1f"):
        # The cause of a cliff asked is the cliff said ('why does acceptance collapse past
        # position 1', GLM 预测第三个token的接受率基本为0的原因是啥).
        asked = _ASKS_CAUSE.search(sentence) and not lex.has("hedge_zh", sentence)
        if asked and not _blocked(lex, sentence, False):
            cliff = read_positions(lex, sentence)
            if cliff is not None:
                return [cliff]
        # A report of one's own run spliced to a question ('I observed that ..., the
        # performance is worse than the baseline ..., I am not sure if this is a bug?'): the
        # question is its last clause, what was observed before it is still said.
        if len(clauses) < 3 or _OBSERVED.match(sentence) is None:
            return []
        clauses, mark = clauses[:-1], "."
        sentence = ", ".join(clauses)
    named = lex.subject.search(sentence) is not None or lex.has("subject_zh", sentence)
    out: list[Claim] = []
    rates = _rates(lex, sentence)
    if rates is not None:
        where = next((c for c in clauses if lex.words["rate"].search(c)), sentence)
        if not _blocked(lex, where, False) and not lex.has("prefill", where):
            if rates.kind == "baseline":
                rates.stated = where
            return [rates]
    # (each clause looked at once: where the last condition and subject before it are)
    last_cond: int | None = None
    last_subject: int | None = None
    rated, mine = lex.has("rate", sentence), lex.has("first_person", sentence)
    depth = _depth(lex, sentence)
    crowd = lex.has("crowd", sentence)  # more than one request at once ('np=2', 'C=4')
    absent_here = names_absence(lex, sentence)
    among: bool | None = None  # speculation against speculation (looked at when needed)
    # (once: a sentence may hold many clauses; speculation against speculation, MTP4 相比
    # MTP3, names no run against decoding without it)
    zh_named = lex.has("subject_zh", sentence) and not lex.has("among_zh", sentence)
    for i, clause in enumerate(clauses):
        opens = lex.find("condition", clause)
        has_subject = lex.subject.search(clause) is not None
        at = (last_cond, None if has_subject else last_subject)
        if has_subject:
            last_subject = i
        if opens is not None and opens.start() == 0:
            last_cond = i
            continue
        cond = _condition(lex, clause, None if last_cond is None else clauses[last_cond])
        concrete = cond is not None and lex.has("concrete", cond)
        if (cond is not None and not concrete) or _blocked(
            lex, without_aside(lex, clause), concrete
        ):
            continue  # ('if acceptance is low, ...': a rule, not an observation)
        if lex.has("prefill", clause) and read_positions(lex, clause, concrete) is None:
            continue  # (but 'dies after the first token' is a later position's, no TTFT)
        first = min((j for j in at if j is not None), default=i)
        acc = read_acceptance(lex, clause, depth, concrete)
        if acc is not None:
            if acc.kind == "low" and crowd:
                acc.kind = "collapse"  # ('under concurrent slots, draft acceptance collapses')
            out.append(_with_condition(lex, acc, clauses[first : i + 1], cond, sentence))
            continue
        if lex.acceptance_subject.search(clause) is not None and not lex.has("speed", clause):
            continue  # acceptance lower or higher, no value: nothing to keep
        if lex.has("cause", clause):
            continue  # ('MTP speed decreased with merge of the latest version': not its own)
        said = speed_of(lex, clause)
        if said == "faster" and turned_off_first(lex, clause):
            said = "slower"  # ('Removing speculative decoding restores normal speed')
        if said is None and zh_named and _slower_zh(lex, clause):
            said = (
                "slower"  # ('使用投机采样的耗时..., 并没有加速效果': the subject a clause before)
            )
        slowdown = slowdown_of(lex, clause) if said in (None, "slower") else None
        if slowdown is not None:
            said = "slower"  # ('~2x slower', '-32% throughput', 'dropped by 30%')
        numbered = (rated or _RATIO.search(clause) is not None) and slowdown is None
        numbered = numbered and not (rated and _baseline_only(lex, sentence, clause))
        numbered = numbered and not _slower_zh(lex, clause)  # ('性能下降30%': bound to it)
        if said == "slower" and crowd and not against_off(lex, clause):
            said = "collapse"  # ('4 concurrent sessions gave lower throughput than one')
        elif said is None and crowd and falls_with_load(lex, clause):
            said = "collapse"  # ('it drops from np=1 to np=2', 'MTP only degrades under ...')
        if said is None or (said == "slower" and numbered):
            continue  # numbers no side is bound to, a ratio: the numbered shapes' (stated_speedup*)
        if said == "slower" and among is None:
            among = among_methods(lex, sentence)  # (once a sentence: a line may be long)
        if said == "slower" and among:
            continue  # ('Compared to EAGLE-3, MTP is slower': two methods, no baseline)
        # (a reference that names speculation's absence says whose run, in any clause:
        # 'compared ... with non-speculative version ..., but I did not see any improvement')
        absent = names_absence(lex, clause) or absent_here
        # A fall after a change of version that sets it against nothing: the old version
        # against the new, speculation on in both (oMLX #1745: 'After upgrading to v0.4.2,
        # single-request visible decode speed dropped sharply for this custom Qwopus MTP model').
        if said == "slower" and not (
            absent or lex.has("reference", clause) or lex.has("slower", clause)
        ):
            if any(lex.has("cause", c) for c in clauses[:i]):
                continue
        if said != "faster" and i + 1 < len(clauses) and dismissed(lex, clauses[i + 1]):
            continue  # ('drops with MTP, but the drop is within noise')
        sized = slowdown is not None and spoken_of  # (a size is measured: 'The arm is 3 % slower')
        if said != "faster" and not (
            mine or absent or named or sized or (spoken_of and mine_before)
        ):
            continue  # whose run? (a bare 'slower than baseline' in a document)
        claim = _with_condition(
            lex, Claim(said, clause, spec=slowdown), clauses[first : i + 1], cond, sentence
        )
        # (speculation named in a sentence before, on the line: the paragraph's subject)
        claim.needs_subject = not (named or spoken_of or absent)
        out.append(claim)
    return out


def _baseline_only(lex: Lexicon, sentence: str, clause: str) -> bool:
    """Every speed the sentence states is the baseline's, named so right after it, and the
    clause states no ratio ('decode is slower than with no speculation at all (61 tok/s
    baseline on this box)'): no pair for the numbered shapes to read, so the author's word
    that speculation is slower stands on its own."""
    if _RATIO.search(clause) is not None:
        return False
    found = list(lex.words["rate"].finditer(sentence))
    return bool(found) and all(_BASE_AFTER.match(sentence, m.end()) for m in found)


def _slower_zh(lex: Lexicon, clause: str) -> bool:
    return slower_zh(lex, clause)


def _with_condition(
    lex: Lexicon, claim: Claim, span: list[str], cond: str | None, sentence: str
) -> Claim:
    """The claim's words: its clause, with the clauses before it that hold its condition or
    its subject when the clause lacks them (``span``), as the sentence has them."""
    start = sentence.find(span[0])
    end = sentence.find(span[-1], max(start, 0))
    claim.stated = sentence[start : end + len(span[-1])] if 0 <= start <= end else span[-1]
    claim.condition = cond
    claim.concurrency = claim.kind == "collapse" or (
        cond is not None and lex.has("concurrent", cond)
    )
    return claim


def read_claims(lex: Lexicon, text: str) -> list[Claim]:
    """Every claim of a line of prose, positive ones included."""
    clean = " ".join(_MARKUP.sub("", text).split())
    out: list[Claim] = []
    spoken_of = mine = supposed = prefill = False
    for sentence, mark in sentences(clean):
        if supposed and lex.has("consequence", sentence):
            continue  # ('if the weights were quantized, ... . That leads to 0% acceptance')
        if prefill and lex.words["referent"].match(sentence):
            continue  # ('This PR improves PP performance ... . It is still 10% lower')
        prefill = lex.has("prefill", sentence)
        # (a hypothesis runs on into the sentences that draw its consequence)
        opens = lex.has("condition", sentence) or _INVERTED.match(sentence) is not None
        supposed = supposed or (opens and lex.has("unreal", sentence))
        for claim in read_sentence(lex, sentence, mark, spoken_of, mine):
            claim.colon = mark == ":"
            out.append(claim)
        spoken_of = spoken_of or lex.subject.search(sentence) is not None
        mine = mine or lex.has("first_person", sentence)
    if any(c.kind == "baseline" for c in out) and not spoken_of:
        out = [c for c in out if c.kind != "baseline"]  # a rate of what, then?
    return out


@dataclass
class _Pending:
    line: int
    claim: Claim
    after: int = 0  # lines seen since, while its subject is looked for
    last: int = 0  # the last line of its paragraph (a wrapped one is one line unwrapped)

    def lines(self) -> range:
        return range(self.line, max(self.line, self.last) + 1)


@dataclass
class ClaimWatch:
    """Watches the prose lines the parser is fed; at the end keeps the claims no other
    definition read on the same line."""

    definitions: Iterable[Definition]
    keep: Callable[[Definition, int, Reading], None]
    is_log: Callable[[str], bool]
    found: list[_Pending] = field(default_factory=list)
    waiting: list[_Pending] = field(default_factory=list)
    # What other definitions read, gathered before the rows leave the parser: the bulk
    # reader flushes them to the stage block by block, and reads lines of its own.
    taken: dict[str, set[int]] = field(default_factory=dict)
    numbers: bool = False  # an author's numbers already state a comparison
    # A paragraph's lines so far (first line, last line, text joined), read when it ends;
    # and whether a code fence is open (its lines are no prose).
    _held: tuple[int, list[str]] | None = None
    _fenced: bool = False
    before: tuple[int, str] | None = None  # the last line the parser skipped, as it was
    stated_spec: int = 0  # spec_decode rows that are an author's stated rates, not counts
    widest: int = 0  # the longest prose line held so far: the width a wrap keeps under
    max_line: int = field(init=False, default=0)  # the claims definitions' (a paragraph's too)

    def __post_init__(self) -> None:
        defs = list(self.definitions)
        self.lex = lexicon(defs)
        self.defs = {d.name: d for d in defs if d.parse == "claims"}
        caps = [d.max_line or max_line_bytes() for d in self.defs.values()]
        self.max_line = max(caps, default=max_line_bytes())  # longer is no prose (a dump)
        lex = self.lex
        self._trigger = (
            regex.compile(
                "|".join(lex.words[r].pattern for r in _TRIGGERS)
                + "|"
                + lex.words["reference"].pattern
                + "|"
                + lex.words["rate"].pattern
                + "|"
                + BREAK_WORDS,
                regex.I,
            )
            if lex is not None
            else None
        )

    @property
    def holding(self) -> bool:
        """A paragraph's line is held: the parser shows the next line, whatever it holds."""
        return self._held is not None

    def see(self, line: int, text: str) -> None:
        """A line the parser reads: it goes on the paragraph held, or the paragraph is read
        and this line held in its turn (its claims are read when it ends)."""
        if self.lex is None or self._trigger is None:
            return
        if self._joins(line, text):
            self._advance(text)
            return
        self._flush()
        self._advance(text)
        before, self.before = self.before, None
        if before is not None and before[0] == line - 1:
            self._hold(*before)  # (a sentence's start on a line the parser skipped)
            if self._joins(line, text):
                return
            self._held = None
        self._hold(line, text)

    def more(self, line: int, text: str) -> None:
        """A line the parser skips (no literal of any definition) while a paragraph is held:
        the rest of a sentence wrapped at a terminal's or markdown's width goes on it."""
        if not self._joins(line, text):
            self._flush()

    def not_prose(self, line: int) -> None:
        """The parser took ``line`` as the rest of a server's record: a paragraph of it
        alone is let go unread (joined to an author's sentence, it stays)."""
        held = self._held
        if held is not None and held[0] == line and len(held[1]) == 1:
            self._held = None

    def gap(self, raw: str) -> None:
        """A line the parser reads as empty (a fence's, a quote's): the paragraph ends, and
        a fence opens or closes code, whose lines are no prose."""
        self._flush()
        if _FENCE.match(raw):
            self._fenced = not self._fenced

    def _hold(self, line: int, raw: str) -> None:
        text = clean_line(raw).text
        if _FENCE.match(text):
            self._fenced = not self._fenced
        elif len(text) <= self.max_line and not self.is_log(text):
            self.widest = max(self.widest, len(text))
            self._held = (line, [text])
            if self._fenced:
                self._flush()  # (a line in code is read alone, as it always was)

    def _joins(self, line: int, text: str) -> bool:
        """Goes ``text`` on the held paragraph? Only the next line, and only prose wrapped
        mid-sentence: the held line ends in a word, a comma or a bracket (no full stop, colon
        or CJK character: a Chinese line ends its sentence), the next neither opens an item,
        a heading, a quote, a table row or a fence, nor is a log record."""
        held = self._held
        if held is None or line != held[0] + len(held[1]):
            return False
        # (a full line goes on into the next, whether its sentence ends there or not)
        mid = _WRAPPED.search(held[1][-1]) is not None and _GOES_ON.match(text) is not None
        if not (mid or self._full(held[1][-1], text)):
            return False
        if "|" in text or self.is_log(text):
            return False
        if sum(len(t) for t in held[1]) + len(text) >= self.max_line:
            return False
        held[1].append(text.strip())
        self.widest = max(self.widest, len(text))
        return True

    def _full(self, last: str, text: str) -> bool:
        """Was ``last`` cut where the next word did not fit? A wrap at a width leaves its
        lines at most that wide and each less than a word short of it: the line goes on
        into the next ('... if  the' / 'NUM_PARALLEL is larger than one', '... in
        performance.' / 'The output token throughput ...') where its next word would have
        made it longer than both the widest prose line seen and a width prose is wrapped
        at; where the word would have fit, the author ended the line."""
        word = len(text.split(maxsplit=1)[0]) if text.strip() else 0
        n = len(last.rstrip())
        return (
            n >= _WRAP_LEAST
            and n + 1 + word > self.widest
            and any(n <= w < n + 1 + word for w in _WIDTHS)
        )

    def _flush(self) -> None:
        """Read the paragraph held: each line as before, then, where no line holds a claim
        by itself, the lines joined, of which only a claim across a break is new (a hedge or
        a question on the next line takes nothing from a line's own claim)."""
        held, self._held = self._held, None
        lex, trigger = self.lex, self._trigger
        if held is None or lex is None or trigger is None:
            return
        first, texts = held
        last = first + len(texts) - 1
        read = False
        for i, text in enumerate(texts):
            if trigger.search(text):
                for claim in read_claims(lex, text):
                    if claim.blames:
                        read = self._place(_Pending(first + i, claim, last=last)) or read
        joined = " ".join(texts)
        if read or len(texts) < 2 or not trigger.search(joined):
            return  # (a claim a line holds by itself is not read again across the break)
        # A claim whose words a line holds but that the line alone did not give (its
        # subject or its author on the line before) is the paragraph's, as it is unwrapped.
        for claim in read_claims(lex, joined):
            if claim.blames:
                self._place(_Pending(first, claim, last=last))

    def _advance(self, text: str) -> None:
        """The claims waiting for their subject see one more line."""
        lex = self.lex
        if lex is None:
            return
        for p in list(self.waiting):
            p.after += 1
            if lex.subject.search(text):
                self.waiting.remove(p)
                self.found.append(p)
            elif p.after >= CONTEXT_LINES:
                self.waiting.remove(p)

    def _place(self, p: _Pending) -> bool:
        """Keep a claim found, or waiting for its subject; False where it is let go (its
        subject is on none of the lines read with it: a line of a paragraph read alone)."""
        if not p.claim.needs_subject:
            self.found.append(p)
        elif p.claim.colon:
            self.waiting.append(p)  # speculation named in what the colon introduces?
        else:
            return False
        return True

    def _lines(self) -> set[int]:
        # Only a line a claim was read on can clash: the others' lines are not kept (a
        # server log's bulk rows are millions).
        self._flush()
        return {n for p in (*self.found, *self.waiting) for n in p.lines()}

    def note_rows(self, tables: Mapping[str, list[dict[str, Any]]]) -> None:
        """The parser's rows about to leave it: the lines they hold that a claim was read
        on, whether an author's numbers state a comparison, how many rates are stated."""
        wanted = self._lines()
        for table, rows in tables.items():
            if wanted:
                self.taken.setdefault(table, set()).update(
                    r["line"] for r in rows if r.get("line") in wanted
                )
            if table == "bench" and not self.numbers:
                self.numbers = any(_STATED in (r.get("extra") or "") for r in rows)
            elif table == "spec_decode":
                self.stated_spec += sum(
                    1 for r in rows if str(r.get("format") or "").startswith("stated_")
                )

    def note_frame(self, table: str, frame: pl.DataFrame) -> None:
        """The same of a frame the bulk reader read."""
        wanted = self._lines()
        if wanted:
            hit = frame.filter(pl.col("line").is_in(sorted(wanted)))["line"]
            self.taken.setdefault(table, set()).update(hit.to_list())
        if table == "bench" and not self.numbers and "extra" in frame.columns:
            self.numbers = bool(frame["extra"].str.contains(_STATED, literal=True).any())
        elif table == "spec_decode" and "format" in frame.columns:
            self.stated_spec += int(frame["format"].str.starts_with("stated_").sum())

    def close(self, counted: bool) -> None:
        """Keep what was found, where no other definition read the line (``note_rows``,
        ``note_frame``). One claim, one record: acceptance in words is left out where the
        paste counts acceptance itself (``counted``: 'raises draft acceptance from 10% to
        49%' under the table of counts), and a slowdown in words where the author's numbers
        already state one."""
        self._flush()
        taken, numbers = self.taken, self.numbers
        for p in self.found:
            kind = p.claim.kind  # ('deeper' compares depths: kept beside a level, or counts)
            if (counted and kind in _ACCEPTANCE and kind != "deeper") or (
                numbers and kind == "slower"
            ):
                continue
            defn, reading = self._record(p.claim)
            # One record a line, a wrapped paragraph being one line: another definition's
            # record on any line of it is the paragraph's, as on the line it unwraps to.
            held = taken.get(defn.table or "", set()) if defn and kind != "deeper" else set()
            if defn is None or reading is None or any(n in held for n in p.lines()):
                continue
            taken.setdefault(defn.table or "", set()).add(p.line)
            self.keep(defn, p.line, reading)
        self.found, self.waiting, self.taken, self.numbers, self.stated_spec = [], [], {}, False, 0
        self.widest = 0
        self._fenced = False

    def _record(self, claim: Claim) -> tuple[Definition | None, Reading | None]:
        said: dict[str, Any] = {"stated": " ".join(claim.stated.split())}
        values: dict[str, Any] = {}
        if claim.kind in _ACCEPTANCE:
            defn = self.defs.get("stated_claims_acceptance")
            values["partial"] = True
            if claim.kind in ("low", "deeper"):
                pass  # the author's word alone: no share is made up for it
            elif claim.kind == "cliff":  # (the shares stated by position: no overall rate)
                if claim.spec is not None:
                    said["rate_at_position"] = claim.spec
                if claim.base is not None:
                    said["first_position_rate"] = claim.base
            elif claim.kind == "length":
                values["mean_acceptance_length"] = claim.spec
                if claim.k is not None:
                    values["k"] = claim.k
            else:
                values["reported_rate"] = claim.spec
            said["claim"] = "zero" if claim.kind == "zero" else claim.kind
        else:
            defn = self.defs.get("stated_claims")
            values["speculative"] = True
            if claim.kind in ("slower", "collapse"):
                said["claim"] = claim.kind
                if claim.kind == "slower" and claim.spec is not None:
                    said["speedup"] = claim.spec  # as the author's multiple or share gives it
            elif claim.kind == "comparison":
                values["output_throughput"] = claim.spec
                said |= {"baseline": claim.base, "unit": claim.unit}
                said["measure"] = "output_throughput"
            elif claim.kind == "baseline":
                said |= {"baseline": claim.base, "unit": claim.unit}
                said |= {"measure": "output_throughput", "side": "baseline"}
            else:
                return None, None
        if claim.condition:
            said["condition"] = " ".join(claim.condition.split())
        if claim.concurrency:
            said["concurrency"] = True
        return defn, Reading(values=values, extra=said)


__all__ = ["Claim", "ClaimWatch", "Lexicon", "lexicon", "read_claims", "sentences"]
