"""Engine summaries read from one line each (issue 16): oMLX's MTP request summaries, its
vlm_mtp line and llama.cpp's timings quoted as name=value pairs, from real lines. A line
wrapped at any width by a terminal or a paste gives its own counts or nothing: never
another count, and never the cycles taken for drafts when the depth list may follow."""

from __future__ import annotations

import pytest

from specscope.logs.parser import parse_text

OMLX_CHAIN = (  # jundot/omlx#3704 (comment by Metal-Gear-Solid, 2026-09-20)
    "2026-09-20 21:40:17,329 - omlx.patches.mlx_lm_mtp.batch_generator - INFO - [-] - "
    "MTP[102] finish=stop tokens=561 cycles=207 tok/cycle=2.71 accept=352/454 (77.5%) "
    "depth[d1=155/200,d2=115/150,d3=82/104] d0=7 emits[init=2,draft=352,bonus=105,verify=102] "
    "timing[backbone=15232.2ms mtp=1043.5ms sample=8.5ms cache=76.8ms]"
)
OMLX_DEPTH1 = (  # jundot/omlx#1496 (comment by xy6859, 2026-05-28)
    "2026-05-28 21:48:23,721 - omlx.patches.mlx_lm_mtp.batch_generator - INFO - [-] - "
    "MTP[3] finish=stop tokens=287 cycles=175 accept=111/175 (63.4%) "
    "emits[init=2,draft=111,bonus=110,verify=64] "
    "timing[backbone=51921.7ms mtp=4773.4ms sample=4953.2ms cache=862.9ms]"
)
OMLX_VLM = (  # jundot/omlx#1839 (comment by varmint708, 2026-06-12)
    "omlx.scheduler - INFO - [-] - vlm_mtp stats: request=e2af9130-1831-4047-a3ad-7d71d5c0c151 "
    "finish=stop rounds=1079 accepted=1414/2158 (65.5%) tokens_per_round=2.31 emitted=2493 "
    "block_size=3"
)
TIMINGS = (  # PrismML-Eng/llama.cpp#203 (description by lyb618888-bojian, 2026-09-19)
    "On the same build and same target model, `--spec-type draft-simple -md "
    "Qwen3.5-4B-Q4_K_M.gguf` **does** activate (e.g. `draft_n=274, draft_n_accepted=25` on a "
    "Chinese prompt), so the speculative pipeline itself works for the hybrid target."
)

LINES = [
    pytest.param(OMLX_CHAIN, (352, 454), 200, id="omlx-depth-k"),
    pytest.param(OMLX_DEPTH1, (111, 175), 175, id="omlx-depth-1"),
    pytest.param(OMLX_VLM, (1414, 2158), 1079, id="omlx-vlm"),
    pytest.param(TIMINGS, (25, 274), None, id="timings-pairs"),
]


def _records(text: str) -> list[tuple[int, int, int | None]]:
    rows = parse_text(text).tables.get("spec_decode", [])
    return [(r["accepted_tokens"], r["draft_tokens"], r.get("drafts")) for r in rows]


@pytest.mark.parametrize(("line", "counts", "drafts"), LINES)
def test_the_whole_line_gives_its_counts(line: str, counts: tuple, drafts: int | None) -> None:
    assert _records(line) == [(*counts, drafts)]


@pytest.mark.parametrize(("line", "counts", "drafts"), LINES)
def test_a_wrapped_line_gives_its_counts_or_nothing(
    line: str, counts: tuple, drafts: int | None
) -> None:
    read = 0
    for width in range(40, len(line) + 8, 7):
        text = "\n".join(line[i : i + width] for i in range(0, len(line), width))
        got = _records(text)
        assert len(got) <= 1, (width, got)
        if got:
            read += 1
            assert got[0][:2] == counts, (width, got)
            assert got[0][2] in (drafts, None), (width, got)
    assert read, "no width read the line"


def test_the_depth_k_line_wrapped_before_its_depths_has_no_drafts() -> None:
    # Cut after the rate, the line says nothing of whether depth[] follows: its 207 cycles
    # (7 of them parked) are not the 200 cycles that drafted.
    head, tail = OMLX_CHAIN.split(" depth[", 1)
    assert _records(head + "\n depth[" + tail) in ([(352, 454, None)], [(352, 454, 200)])
    assert _records(head) == [(352, 454, None)]
