"""LMDeploy's stats line since v0.12.1 (issue 21: parsers/lmdeploy_stats_server.toml), as
its own PRs print it: the load is read and the SpecDecoding fields appended to it are
LMDeploy's run, not vLLM's."""

from __future__ import annotations

import time
from pathlib import Path

import specscope
from specscope.logs.limits import max_line_bytes
from specscope.logs.parser import parse_text

# InternLM/lmdeploy#4410's line (real), then two of the released format with speculation.
_SERVER = "Server (succeeded/failed/routed/waiting)"
_SPEC = "SpecDecoding metrics: Draft acceptance rate: {rate}%, Mean acceptance length: {length}, "
PASTE = (
    "\n".join(
        [
            f"[2026-03-13 14:54:59 DP0] Avg thr (in/out): 1445.8 / 68.8 tokens/s, {_SERVER}: "
            "102 / 100 / 0 / 0, Engine (running/waiting): 0 / 0, KV cache: 17.5%,",
            f"[2026-06-02 09:41:07 DP0] Avg thr (in/out): 210.4 / 512.9 tokens/s, {_SERVER}: "
            "40 / 0 / 8 / 0, Engine (running/waiting): 8 / 0, KV cache: 31.2%, "
            + _SPEC.format(rate="52.10", length="2.56")
            + "Accepted: 1563 tokens, Drafted: 3000 tokens, "
            "Per-position acceptance rate: 0.701, 0.521, 0.341",
            f"[2026-06-02 09:41:17 DP0] Avg thr (in/out): 0.0 / 498.0 tokens/s, {_SERVER}: "
            "44 / 0 / 8 / 0, Engine (running/waiting): 8 / 0, KV cache: 33.0%, "
            "Prefix cache hit rate: 12.5%, "
            + _SPEC.format(rate="50.00", length="2.50")
            + "Accepted: 1500 tokens, Drafted: 3000 tokens, "
            "Per-position acceptance rate: 0.700, 0.500, 0.300",
        ]
    )
    + "\n"
)


def test_the_released_line_makes_an_lmdeploy_run_with_its_counts(tmp_path: Path) -> None:
    path = tmp_path / "lmdeploy.log"
    path.write_text(PASTE, encoding="utf-8")
    specscope.ingest([path], store=tmp_path / "s", year=2026)
    store = specscope.open_store(tmp_path / "s")
    stats = store.engine_stats.collect().sort("line")
    assert stats["format"].to_list() == ["lmdeploy_stats_server"] * 3
    assert stats["running_reqs"].to_list() == [0, 8, 8]
    assert stats["kv_cache_usage"].to_list() == [0.175, 0.312, 0.33]
    assert stats["prefix_cache_hit_rate"].to_list() == [None, None, 0.125]
    assert all(p is None for p in stats["problems"].to_list())  # the trailing ', ' is no cut
    spec = store.spec_decode.collect().sort("line")
    assert spec["accepted_tokens"].to_list() == [1563, 1500]
    assert spec["draft_tokens"].to_list() == [3000, 3000]
    assert store.runs.collect()["server"].to_list() == ["lmdeploy"]


def test_a_long_line_of_its_shape_reads_in_linear_time() -> None:
    unit = "Avg thr (in/out): 1.0 / 2.0 tokens/s, Server (a/b): 1 / 2, "
    text = unit * ((max_line_bytes() - 1024) // len(unit))
    start = time.monotonic()
    parse_text(text)
    assert time.monotonic() - start < 15
