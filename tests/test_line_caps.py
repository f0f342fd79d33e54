"""The longest line a definition reads (``max_line`` in parsers/*.toml): a definition of an
author's words weighs every place of a line against hundreds of characters around it, and a
1 MiB line of one shape took minutes (session 15). No author writes a sentence or a table
row of 16 KiB: a longer line is not read by such a definition, and still by the others.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from specscope.logs.definitions import load_definition, load_definitions
from specscope.logs.grammar import Grammar
from specscope.logs.limits import max_line_bytes
from specscope.logs.parser import parse_text

from .loglines import spec

DEFINITIONS = {d.name: d for d in load_definitions()}
CAP = DEFINITIONS["stated_speedup"].max_line or 0

# Real samples of the definitions (their tomls'): sglang#4759, world 230, world 140.
SPEEDUP = (
    "For DeepSeek-R1 on 8xH200 the throughput drops from 1039 to 321 tok/s with "
    "speculative decoding on."
)
CLAIM = "I found that eagle slows down extremely compared to the baseline"
TABLE = (
    "| Backend | Draft acceptance | Mean len | Decode |\n|---|---|---|---|\n"
    "| ROCm0 | **60.1%** (83/138) | 3.31 | ~25 tok/s |\n"
    "| Vulkan0 | **0.1%** (1/894) | 1.00 | ~7 tok/s |\n"
)


def _formats(text: str, table: str) -> list[str]:
    return [row["format"] for row in parse_text(text).tables.get(table, [])]


def _padded(sentence: str, length: int) -> str:
    """``sentence`` at the end of a line ``length`` characters long."""
    return "x" * (length - len(sentence) - 1) + " " + sentence


def test_every_definition_of_an_authors_words_declares_its_longest_line():
    # No engine printed them: prose, tables, headings, a developer's debug print.
    authors = [d for d in DEFINITIONS.values() if not d.engine]
    assert len(authors) >= 19
    assert [d.name for d in authors if d.max_line is None] == []
    assert all(d.max_line is not None and d.max_line < max_line_bytes() for d in authors)


def test_the_cap_is_read_from_the_toml(tmp_path: Path):
    path = tmp_path / "capped.toml"
    path.write_text(
        'kind = "fields"\ntable = "engine_stats"\nanchor = \'Engine\\s*\\d+:\'\n'
        "max_line = 40\n"
        '[fields]\n"Running" = { column = "running_reqs", type = "int" }\n'
        '[[samples]]\ntext = "Engine 000: Running: 1 reqs"\n',
        encoding="utf-8",
    )
    defn = load_definition(path)
    assert defn.max_line == 40
    grammar = Grammar([defn])
    line = "Engine 000: Running: 1 reqs"
    assert len(grammar.anchors_in(line.ljust(40, "."))) == 1
    assert grammar.anchors_in(line.ljust(41, ".")) == []


def test_a_sentence_is_read_up_to_the_cap_and_not_past_it():
    assert CAP == 16384
    assert _formats(SPEEDUP, "bench") == ["stated_speedup"]
    assert _formats(_padded(SPEEDUP, CAP), "bench") == ["stated_speedup"]
    result = parse_text(_padded(SPEEDUP, CAP + 1))
    assert result.tables.get("bench", []) == [] and result.skipped == []


def test_a_claim_is_read_up_to_its_definitions_cap_and_not_past_it():
    cap = DEFINITIONS["stated_claims"].max_line or 0
    assert _formats(_padded(CLAIM, cap), "bench") == ["stated_claims"]
    assert _formats(_padded(CLAIM, cap + 1), "bench") == []


def test_a_table_whose_header_is_over_the_cap_is_not_read():
    cap = DEFINITIONS["spec_decode_table"].max_line or 0
    header, rows = TABLE.split("\n", 1)
    indented = " " * (cap - len(header)) + header  # an indented table, its header at the cap
    assert _formats(indented + "\n" + rows, "spec_decode") == ["spec_decode_table"] * 2
    assert _formats(" " + indented + "\n" + rows, "spec_decode") == []


@pytest.mark.parametrize("where", ["before", "after"])
def test_telemetry_on_a_line_over_the_cap_is_still_read(where: str):
    record = spec(1, 100, [50, 25])
    prose = _padded(SPEEDUP, CAP)
    line = prose + " " + record if where == "before" else record + " " + prose
    result = parse_text(line)
    assert len(result.tables["spec_decode"]) == 1
    assert result.tables["spec_decode"][0]["accepted_tokens"] == 75
    assert result.tables.get("bench", []) == []  # the sentence on it: not read
