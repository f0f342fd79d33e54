"""A benchmark's summary whose requests queue (issue 16: healthy-but-slow servers are not
speculation's fault): mean TTFT longer than the time a request then takes to generate, over
more requests than the concurrency kept in flight, is kv_cache_saturation, suggestive."""

from __future__ import annotations

from pathlib import Path

import specscope

from .helpers import FIXTURES

WORLD = FIXTURES / "world"

# World 80: SGLang bench_serving, Kimi-K2.6, 8K in / 64K out at concurrency 80, 320 requests.
QUEUED = (WORLD / "80_sglang_bench_kimi_queued.log").read_text(encoding="utf-8")


def _kinds(tmp_path: Path, text: str) -> dict[str, specscope.Finding]:
    tmp_path.mkdir(exist_ok=True)
    path = tmp_path / "bench.log"
    path.write_text(text, encoding="utf-8")
    specscope.ingest([path], store=tmp_path / "store", year=2026)
    return {f.kind: f for f in specscope.detect(specscope.open_store(tmp_path / "store"))}


def test_requests_that_wait_longer_than_they_generate_are_queueing(tmp_path: Path) -> None:
    found = _kinds(tmp_path, QUEUED)
    assert "insufficient_data" not in found
    kv = found["kv_cache_saturation"]
    assert kv.confidence is not None and kv.confidence.level == "suggestive"
    assert kv.sample == {"requests": 320, "max_concurrency": 80.0}
    # 5,288.6 s of mean TTFT against 42.76 ms x (10,046,674 / 320 - 1) tokens
    assert round(kv.measured["mean_decode_ms"]) == round(42.76 * (10046674 / 320 - 1))
    assert "queueing, not speculation" in kv.explanation


def test_a_first_token_quicker_than_the_rest_or_one_wave_is_no_queue(tmp_path: Path) -> None:
    quick = QUEUED.replace(
        "Mean TTFT (ms):                          5288588.39",
        "Mean TTFT (ms):                          1288588.39",
    )
    assert "kv_cache_saturation" not in _kinds(tmp_path / "a", quick)
    # 80 requests at 80 at a time: one wave, whose mean may be its warm-up
    wave = QUEUED.replace(
        "Successful requests:                     320",
        "Successful requests:                     80",
    )
    assert "kv_cache_saturation" not in _kinds(tmp_path / "b", wave)
    # no concurrency set: every request sent at once (world 81's shape), the wait the client's
    unset = QUEUED.replace(
        "Max request concurrency:                 80",
        "Max request concurrency:                 not set",
    )
    assert "kv_cache_saturation" not in _kinds(tmp_path / "c", unset)
