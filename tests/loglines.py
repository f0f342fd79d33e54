"""vLLM V1 log lines for tests that need a scenario: counts in, exact lines out."""

from __future__ import annotations

from datetime import datetime, timedelta

START = datetime(2026, 4, 7, 17, 0, 0)


def stamp(i: int, pid: int = 1) -> str:
    t = START + timedelta(seconds=10 * i)
    return f"(APIServer pid={pid}) INFO {t:%m-%d %H:%M:%S}"


def stats(
    i: int,
    running: int = 1,
    waiting: int = 0,
    kv: float = 10.0,
    prefix: float = 0.0,
    pid: int = 1,
    engine: int = 0,
) -> str:
    return (
        f"{stamp(i, pid)} [loggers.py:271] Engine {engine:03d}: Avg prompt throughput: 0.0 "
        f"tokens/s, Avg generation throughput: 100.0 tokens/s, Running: {running} reqs, "
        f"Waiting: {waiting} reqs, GPU KV cache usage: {kv:.1f}%, Prefix cache hit rate: "
        f"{prefix:.1f}%"
    )


def spec(i: int, drafts: int, per_pos: list[int], pid: int = 1) -> str:
    """A 0.10.2+ SpecDecoding line for ``drafts`` drafts whose position i was accepted
    ``per_pos[i]`` times (non-increasing)."""
    k = len(per_pos)
    accepted = sum(per_pos)
    rates = ", ".join(f"{c / drafts:.3f}" for c in per_pos)
    return (
        f"{stamp(i, pid)} [metrics.py:101] SpecDecoding metrics: Mean acceptance length: "
        f"{1 + accepted / drafts:.2f}, Accepted throughput: {accepted / 10:.2f} tokens/s, "
        f"Drafted throughput: {drafts * k / 10:.2f} tokens/s, Accepted: {accepted} tokens, "
        f"Drafted: {drafts * k} tokens, Per-position acceptance rate: {rates}, Avg Draft "
        f"acceptance rate: {100 * accepted / (drafts * k):.1f}%"
    )


def start(pid: int, model: str, method: str, k: int, **args: object) -> str:
    extra = "".join(f", '{key}': {value!r}" for key, value in args.items())
    return (
        f"{stamp(0, pid)} [utils.py:233] non-default args: {{'model': '{model}', "
        f"'speculative_config': {{'method': '{method}', 'num_speculative_tokens': {k}}}{extra}}}"
    )
