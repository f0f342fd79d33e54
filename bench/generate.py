"""Large vLLM server logs for the benchmarks, built from the synthetic generator.

    python bench/generate.py --size 1G --out /tmp/server.log [--gz] [--seed 0]

The log is a sequence of server runs from ``fixtures/synth.py`` (every V1 release variant
it knows, each with its own pid and startup lines), a quarter of them wrapped the way logs
reach people (glued, terminal-wrapped, docker compose prefixes, ANSI colour, noise between
records), with one uvicorn access line per record so that roughly a third of the lines
are SpecDecoding records, a third engine stats lines and the rest HTTP access lines, as
in the issue's 1 GB target. A pool of distinct runs is generated once and then cycled
with fresh pids, so writing gigabytes costs about as much as copying them.
"""

from __future__ import annotations

import argparse
import gzip
import random
import re
import sys
from pathlib import Path
from typing import IO

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "fixtures"))

import synth

WRAPPED = (("glue",), ("hardwrap",), ("compose",), ("ansi",), ("noise",), ("glue", "compose"))
_PID = re.compile(r"pid=(\d+)")
_SPEC = "SpecDecoding metrics"


def parse_size(text: str) -> int:
    """``1G``, ``300M``, ``64k`` or a number of bytes."""
    units = {"k": 1 << 10, "m": 1 << 20, "g": 1 << 30}
    text = text.strip().lower().rstrip("b")
    if text and text[-1] in units:
        return int(float(text[:-1]) * units[text[-1]])
    return int(text)


def _access(rng: random.Random, pid: str) -> str:
    path = rng.choice(["/v1/chat/completions", "/v1/completions", "/metrics", "/health"])
    code = rng.choice([200, 200, 200, 200, 400, 500])
    return (
        f"(APIServer pid={pid}) INFO:     10.0.{rng.randrange(256)}.{rng.randrange(256)}:"
        f'{rng.randrange(1024, 65536)} - "POST {path} HTTP/1.1" {code} OK'
    )


def pool(seed: int, runs: int = 200) -> list[str]:
    """Distinct blocks of whole server runs, each ending in a newline."""
    rng = random.Random(seed)
    blocks = []
    for i in range(runs):
        wrappings = rng.choice(WRAPPED) if i % 4 == 0 else ()
        text = synth.generate_seed(seed * 100_000 + i, wrappings).text
        if isinstance(text, bytes):
            text = text.decode("utf-8", errors="replace")
        lines = text.rstrip("\n").split("\n")
        if not wrappings:  # access lines between records; wrapped blocks keep their shape
            out = []
            for line in lines:
                out.append(line)
                if _SPEC in line:
                    pid = _PID.search(line)
                    out.append(_access(rng, pid.group(1) if pid else "1"))
            lines = out
        blocks.append("\n".join(lines) + "\n")
    return blocks


def write(out: IO[str], size: int, seed: int = 0) -> int:
    """Cycle the pool with fresh pids until ``size`` characters are written."""
    blocks = pool(seed)
    written = 0
    cycle = 0
    while written < size:
        for block in blocks:
            shift = 100_000 * cycle
            shifted = _PID.sub(lambda m, s=shift: f"pid={int(m.group(1)) + s}", block)
            out.write(shifted)
            written += len(shifted)
            if written >= size:
                break
        cycle += 1
    return written


def write_steady(out: IO[str], size: int, seed: int = 0) -> int:
    """One long run: engine stats, SpecDecoding and an access line per 10 s interval, the
    acceptance wandering slowly (the shape of a server that stays up for days)."""
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    from tests.loglines import spec, stats

    rng = random.Random(seed)
    written, i, level = 0, 1, 0.7
    while written < size:
        level = min(0.95, max(0.05, level + rng.uniform(-0.02, 0.02)))
        drafts = rng.randrange(50, 400)
        per_pos = [round(drafts * level ** (p + 1)) for p in range(4)]
        text = (
            f"{stats(i, running=rng.randrange(1, 9))}\n{spec(i, drafts, per_pos)}\n"
            f"{_access(rng, '1')}\n"
        )
        out.write(text)
        written += len(text)
        i += 1
    return written


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size", default="100M", help="1G, 300M, ... (uncompressed)")
    parser.add_argument("--out", required=True, type=Path)
    parser.add_argument("--gz", action="store_true", help="gzip the output")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--steady", action="store_true", help="one long run of plain records instead"
    )
    args = parser.parse_args(argv)
    size = parse_size(args.size)
    writer = write_steady if args.steady else write
    if args.gz:
        with gzip.open(args.out, "wt", compresslevel=1) as f:
            written = writer(f, size, args.seed)
    else:
        with open(args.out, "w") as f:
            written = writer(f, size, args.seed)
    print(f"{args.out}: {written:,} characters", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
