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
from datetime import datetime, timedelta
from pathlib import Path
from typing import IO

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "fixtures"))

import synth

WRAPPED = (("glue",), ("hardwrap",), ("compose",), ("ansi",), ("noise",), ("glue", "compose"))
_PID = re.compile(r"pid=(\d+)")
_STAMP = re.compile(r"\b(\d\d)-(\d\d) (\d\d):(\d\d):(\d\d)\b")
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


_RECORD = re.compile(r"SpecDecoding metrics|Engine \d{3}:")


def _disturb(rng: random.Random, lines: list[str]) -> list[str]:
    """One interval the way some records reach a log file: glued onto the line before,
    wrapped at 120 columns, coloured, or behind a container timestamp."""
    how = rng.choice(("glue", "wrap", "ansi", "docker"))
    if how == "glue" and len(lines) >= 2:
        return [lines[0] + " " + lines[1], *lines[2:]]
    if how == "wrap":
        return [part for line in lines for part in (line[:120], line[120:]) if part]
    if how == "ansi":
        return [_PID.sub(lambda m: m.group(0), "\x1b[1;36m" + line, count=1) for line in lines]
    return [f"2026-05-24T11:55:21.{rng.randrange(10**9):09d}Z {line}" for line in lines]


def write_server(
    out: IO[str], size: int, seed: int = 0, runs: int = 8, disturbed: float = 0.01
) -> int:
    """A server log the way a long-lived deployment writes one: ``runs`` restarts, each
    with the startup lines of a synthetic run (every V1 variant over the runs), then its
    interval records (engine stats, SpecDecoding, an access line) repeated to fill the
    run's share; ``disturbed`` of the intervals glued, wrapped, coloured or prefixed."""
    rng = random.Random(seed)
    written = 0
    for r in range(runs):
        text = synth.generate_seed(seed * 100_000 + r, ()).text
        if isinstance(text, bytes):
            text = text.decode("utf-8", errors="replace")
        lines = text.rstrip("\n").split("\n")
        first = next((i for i, line in enumerate(lines) if _RECORD.search(line)), len(lines))
        pid_of = _PID.search(lines[first] if first < len(lines) else lines[0])
        pid = int(pid_of.group(1)) if pid_of else 1
        startup = [ln for ln in lines[:first] if f"pid={pid}" in ln or "pid=" not in ln]
        intervals: list[list[str]] = []
        for line in lines[first:]:
            if not _RECORD.search(line) or f"pid={pid})" not in line:
                break  # the next server run of the synthetic log
            if "Engine" in line.split("]", 1)[-1][:12] or not intervals:
                intervals.append([])
            intervals[-1].append(line)
        if not intervals:
            continue
        new_pid = 1000 + r
        block = "\n".join(startup).replace(f"pid={pid})", f"pid={new_pid})") + "\n"
        out.write(block)
        written += len(block)
        share = size * (r + 1) // runs
        span = _span(intervals)
        i = 0
        while written < share:
            # Each pass over the run's intervals comes later, as a server's log does.
            later = span * (i // len(intervals))
            group = [
                _later(ln, later).replace(f"pid={pid})", f"pid={new_pid})")
                for ln in intervals[i % len(intervals)]
            ]
            group.append(_access(rng, str(new_pid)))
            if rng.random() < disturbed:
                group = _disturb(rng, group)
            chunk = "\n".join(group) + "\n"
            out.write(chunk)
            written += len(chunk)
            i += 1
    return written


def _when(stamp: re.Match[str]) -> datetime | None:
    """The time a ``MM-DD HH:MM:SS`` stamp says (in 2026), or None for no such time."""
    try:
        return datetime(2026, *map(int, stamp.groups()))
    except ValueError:
        return None


def _span(intervals: list[list[str]]) -> timedelta:
    """From the first interval's time to 10 s after the last one's."""
    seen = [
        t
        for group in intervals
        for line in group
        for m in _STAMP.finditer(line)
        if (t := _when(m)) is not None
    ]
    return (max(seen) - min(seen) + timedelta(seconds=10)) if seen else timedelta(0)


def _later(line: str, by: timedelta) -> str:
    if not by:
        return line

    def shift(m: re.Match[str]) -> str:
        t = _when(m)
        return m.group(0) if t is None else f"{t + by:%m-%d %H:%M:%S}"

    return _STAMP.sub(shift, line)


class Prefixed:
    """A text stream that puts a container runtime's timestamp before every line (the
    size counted is the log's own, as a container would get it)."""

    def __init__(self, out: IO[str], kind: str) -> None:
        self.out, self.kind, self.second, self.open = out, kind, 0, False
        self.start = datetime(2026, 11, 24, 10, 0, 0)

    def _stamp(self) -> str:
        self.second += 1
        t = self.start + timedelta(milliseconds=self.second)
        text = t.strftime("%Y-%m-%dT%H:%M:%S.") + f"{self.second % 10**9:09d}Z "
        return text + "stdout F " if self.kind == "cri" else text

    def write(self, text: str) -> int:
        lines = text.split("\n")
        out = []
        for i, line in enumerate(lines):
            last = i == len(lines) - 1
            if line and not self.open:
                out.append(self._stamp())
            out.append(line)
            self.open = bool(line) or (self.open and last)
            if not last:
                out.append("\n")
                self.open = False
        self.out.write("".join(out))
        return len(text)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size", default="100M", help="1G, 300M, ... (uncompressed)")
    parser.add_argument("--out", required=True, type=Path)
    parser.add_argument("--gz", action="store_true", help="gzip the output")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--shape",
        choices=("server", "pastes", "steady"),
        default="server",
        help="server: a few long runs, 1%% of records disturbed (default); pastes: many "
        "short runs, a quarter of them wrapped the way issues quote logs; steady: one run "
        "of plain variant-D records",
    )
    parser.add_argument("--runs", type=int, default=8, help="server restarts (--shape server)")
    parser.add_argument(
        "--prefix",
        choices=("none", "docker", "cri"),
        default="none",
        help="every line behind a container timestamp: docker: `docker logs -t` and "
        "`kubectl logs --timestamps` (RFC 3339, nanoseconds); cri: the CRI log format "
        "(timestamp, stream, F)",
    )
    args = parser.parse_args(argv)
    size = parse_size(args.size)
    if args.shape == "server":

        def writer(out: IO[str], size: int, seed: int) -> int:
            return write_server(out, size, seed, runs=args.runs)

    else:
        writer = write_steady if args.shape == "steady" else write
    if args.prefix != "none":
        inner = writer

        def writer(out: IO[str], size: int, seed: int) -> int:
            return inner(Prefixed(out, args.prefix), size, seed)

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
