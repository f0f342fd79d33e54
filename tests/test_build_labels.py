"""A sentence introducing a block of results that names the build it ran on labels the
block's run with those names alone (logs.run_labels, the `version` key of
parsers/labelled_result_blocks.toml): world 137's two blocks of vLLM bench keys, under
'With the vllm-ascend **v0.18.0rc2** and **v0.19.1rc1** images, ...:' and '... with the
vllm-ascend **v0.17.0rc1** image, ...:', become arms of a change of version, and the drop
between them a regression; a version of something else, prose between the sentence and
its block, or the same build over both blocks label nothing or change nothing."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import specscope
from specscope.logs.definitions import load_definitions
from specscope.logs.grammar import Grammar
from specscope.logs.parser import parse_text
from tests.helpers import FIXTURES, findings_of_paste
from tests.test_bulk import _same, write_server

GRAMMAR = Grammar(load_definitions())
CASE_137 = FIXTURES / "world" / "137_ascend_qwen35_mtp_version_regression_json_keys.log"
NEW_INTRO = (
    "Deploy vllm serve using the commands above and run benchmarks for testing. With the "
    "vllm-ascend **v0.18.0rc2** and **v0.19.1rc1** images, MTP acceptance rates are "
    "relatively low:"
)
OLD_INTRO = (
    "In contrast, with the vllm-ascend **v0.17.0rc1** image, MTP acceptance rates are "
    "significantly higher:"
)


def _keys(drafts: int, draft_tokens: int, accepted: int) -> str:
    return (
        f'- "spec_decode_num_drafts": {drafts}\n'
        f'- "spec_decode_draft_tokens": {draft_tokens}\n'
        f'- "spec_decode_accepted_tokens": {accepted}\n'
    )


NEW_BLOCK = _keys(23975, 71925, 41570)
OLD_BLOCK = _keys(20327, 60981, 45217)


def _labels(text: str) -> list[str | None]:
    result = parse_text(text, GRAMMAR)
    rows = result.tables.get("spec_decode", [])
    assert len(rows) == 2, rows
    return [json.loads(r.get("extra") or "{}").get("label") for r in rows]


def _sibling_lows(tmp_path: Path, text: str) -> list[specscope.Finding]:
    return [
        f
        for f in findings_of_paste(tmp_path, text)
        if f.kind == "low_acceptance" and "sibling" in f.measured
    ]


def test_world_137_s_blocks_are_labelled_by_their_images_versions() -> None:
    assert _labels(CASE_137.read_text(encoding="utf-8")) == ["v0.18.0rc2 v0.19.1rc1", "v0.17.0rc1"]


def test_world_137_s_version_regression_is_low_acceptance(tmp_path: Path) -> None:
    [found] = _sibling_lows(tmp_path, CASE_137.read_text(encoding="utf-8"))
    assert "'v0.18.0rc2 v0.19.1rc1'" in found.explanation
    assert "'v0.17.0rc1'" in found.explanation
    assert found.confidence is not None and found.confidence.level in ("likely", "certain")


@pytest.mark.parametrize(
    ("new", "old", "labels"),
    [
        ("### vLLM 0.11.2", "### vLLM 0.10.1", ["vLLM 0.11.2", "vLLM 0.10.1"]),
        (
            "> Results on commit 3f2a9c1d (today's main branch):",
            "> And on commit 0be7e11a:",
            ["commit 3f2a9c1d main branch", "commit 0be7e11a"],
        ),
        ("**Before the fix**", "**After the fix**", ["Before the fix", "After the fix"]),
        ("With sglang==0.5.4:", "With sglang==0.5.2:", ["sglang==0.5.4", "sglang==0.5.2"]),
    ],
)
def test_headings_bold_lines_and_sentences_name_builds(
    new: str, old: str, labels: list[str]
) -> None:
    assert _labels(f"{new}\n\n{NEW_BLOCK}\n{old}\n{OLD_BLOCK}") == labels


@pytest.mark.parametrize(
    ("new", "old"),
    [
        # versions of something else: the interpreter, the toolkit, the model
        ("With Python 3.11 and CUDA 12.4 the rates are low:", "With Python 3.10 they are not:"),
        ("Qwen3.5-122B on DeepSeek-V3.2's recipe:", "Qwen3-235B on the same recipe:"),
        # a sentence that does not introduce what follows (no colon, or prose between)
        ("With v0.18.0rc2 the rates are low.", "With v0.17.0rc1 they are higher."),
        (
            "With the v0.18.0rc2 image:\nWe ran the benchmark twice and kept the second run.",
            "With the v0.17.0rc1 image:\nSame flags, same dataset, same prompts as before.",
        ),
        ("The main results:", "Other results:"),
    ],
)
def test_what_names_no_build_of_the_block_labels_nothing(new: str, old: str) -> None:
    assert _labels(f"{new}\n{NEW_BLOCK}\n{old}\n{OLD_BLOCK}") == [None, None]


def test_two_blocks_under_the_same_build_are_no_regression(tmp_path: Path) -> None:
    same = OLD_INTRO.replace("In contrast, with", "Again with")
    text = f"{NEW_INTRO.replace('v0.18.0rc2** and **v0.19.1rc1', 'v0.17.0rc1')}\n"
    assert _sibling_lows(tmp_path, f"{text}{NEW_BLOCK}\n{same}\n\n{OLD_BLOCK}") == []


def test_without_the_sentences_the_blocks_are_no_regression(tmp_path: Path) -> None:
    assert _sibling_lows(tmp_path, f"{NEW_BLOCK}\n\n{OLD_BLOCK}") == []


def test_the_bulk_reader_labels_world_137_in_a_server_log_as_the_line_parser(
    tmp_path: Path,
) -> None:
    """World 137's paste in the middle of a server log read in bulk: the sentence's version
    reaches the line parser, and both readers give the same tables."""
    server = tmp_path / "server.txt"
    with open(server, "w") as out:
        write_server(out, 60_000, 3, runs=2)
    lines = server.read_text(encoding="utf-8").splitlines()
    half = len(lines) // 2
    paste = CASE_137.read_text(encoding="utf-8").splitlines()
    path = tmp_path / "mixed.log"
    path.write_text("\n".join([*lines[:half], *paste, *lines[half:]]) + "\n", encoding="utf-8")
    fast = _same(path, block_bytes=4096)
    spec = fast["tables"]["spec_decode"]
    keys = spec.filter(spec["format"] == "bench_result_json_keys")
    assert [json.loads(e)["label"] for e in keys["extra"].to_list()] == [
        "v0.18.0rc2 v0.19.1rc1",
        "v0.17.0rc1",
    ]
