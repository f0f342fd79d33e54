"""pyrepr's scanner (a search for the next character that matters) and its plain-literal
shortcuts, against a scan a character at a time and ``ast.literal_eval``."""

from __future__ import annotations

import ast
import itertools
import random
import sys
import warnings
from pathlib import Path

import pytest

from specscope.logs import pyrepr

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
PIECES = [
    *"abc'\"\\()[]{},:= 0123-.\n",
    "True",
    "None",
    "'x'",
    '"y"',
    "1_0",
    "007",
    "-5",
    "1.5",
    "1e-05",
    "{'a': 1}",
    "<function f>",
    "Namespace(",
    "'a\\'b'",
    "-0",
    "0x1",
]


def reference_scan(text: str, sep: str) -> tuple[list[int], int, str | None, int | None]:
    """Where ``sep`` stands at depth 0, the final depth and open quote, and the end of the
    first bracket closed at depth 0: a step per character."""
    depth, quote, at, i, closed = 0, None, [], 0, None
    while i < len(text):
        c = text[i]
        if quote:
            if c == "\\":
                i += 2
                continue
            if c == quote:
                quote = None
        elif c in "'\"":
            quote = c
        else:
            if c in "([{":
                depth += 1
            elif c in ")]}":
                depth = max(0, depth - 1)
                if depth == 0 and closed is None:
                    closed = i
            if c == sep and depth == 0:
                at.append(i)
        i += 1
    return at, depth, quote, closed


def reference_literal(text: str) -> object:
    text = text.strip()
    if not text:
        return text
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return ast.literal_eval(text)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return text


def corpus() -> list[str]:
    rng = random.Random(7)
    texts = ["".join(rng.choice(PIECES) for _ in range(rng.randint(0, 40))) for _ in range(3000)]
    sys.path.insert(0, str(FIXTURES))
    import synth

    logs = [p.read_text(errors="replace") for p in sorted(FIXTURES.rglob("*.log"))]
    for seed in range(40):
        text = synth.generate_seed(seed, ()).text
        logs.append(text.decode(errors="replace") if isinstance(text, bytes) else text)
    for log in logs:
        for line in log.splitlines():
            for key in ("non-default args: ", "Namespace(", "SpeculativeConfig("):
                if key in line:
                    texts.append(line.split(key, 1)[1])
    return texts


TEXTS = corpus()


@pytest.mark.parametrize("sep", [",", ":", "="])
def test_split_top_level_splits_where_a_scan_a_character_at_a_time_does(sep):
    for text in TEXTS:
        at, _, _, _ = reference_scan(text, sep)
        edges = [-1, *at, len(text)]
        expected = [
            p.strip() for a, b in itertools.pairwise(edges) if (p := text[a + 1 : b]).strip()
        ]
        assert pyrepr.split_top_level(text, sep) == expected, text


def test_is_open_and_balanced_prefix_agree_with_the_reference():
    for text in TEXTS:
        _, depth, quote, closed = reference_scan(text, ",")
        assert pyrepr.is_open(text) == (
            depth > 0 or quote is not None or text.rstrip().endswith(",")
        ), text
        assert pyrepr.balanced_prefix(text) == (
            (text[: closed + 1], True) if closed is not None else (text, False)
        ), text


def test_plain_literals_read_as_literal_eval_reads_them():
    values = [
        "'abc'",
        '"a\'b"',
        "'a\\'b'",
        "-0",
        "007",
        "1_000",
        "12",
        "-12",
        "1.",
        ".5",
        "-.5",
        "01.5",
        "1e5",
        "1E-05",
        "1e400",
        "True",
        "None",
        "false",
        "0x10",
        "[1, 2]",
    ]
    for text in values + TEXTS:
        got, expected = pyrepr.literal(text), reference_literal(text)
        assert type(got) is type(expected) and repr(got) == repr(expected), text


def test_a_logged_string_with_an_invalid_escape_reads_without_a_warning():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert pyrepr.literal("'a\\)'") == "a\\)"
