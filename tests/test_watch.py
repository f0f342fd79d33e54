"""`specscope watch` in a real pseudo-terminal: a log being written shows its new records
within one interval, findings appear, Ctrl-C ends it with a one-line summary."""

from __future__ import annotations

import contextlib
import os
import pty
import re
import select
import signal
import subprocess
import sys
import time
from collections.abc import Iterator

import specscope
from specscope.logs.follow import FollowedLog

from .loglines import spec, stats


class _Screen:
    """Everything the pseudo-terminal has shown so far: a later wait must see what an
    earlier read already consumed (drift and the new rate can arrive in one chunk)."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.seen = ""

    def wait_for(self, needle: str, timeout: float) -> str:
        self.seen = _read_until(self.fd, needle, timeout, self.seen)
        return self.seen


def _read_until(fd: int, needle: str, timeout: float, seen: str = "") -> str:
    if needle in seen:
        return seen
    deadline = time.time() + timeout
    while time.time() < deadline:
        ready, _, _ = select.select([fd], [], [], 0.2)
        if ready:
            try:
                seen += os.read(fd, 65536).decode("utf-8", errors="replace")
            except OSError:
                break
            if needle in seen:
                return seen
    raise AssertionError(f"{needle!r} did not show within {timeout} s; saw: {seen[-2000:]!r}")


@contextlib.contextmanager
def _watching(*args: str, pipe: bool = False) -> Iterator[tuple[subprocess.Popen, _Screen]]:
    """``specscope watch ARGS`` on a pseudo-terminal (and, with ``pipe``, its standard
    input a pipe the test writes to); killed if a test leaves it running."""
    main, child = pty.openpty()
    env = {**os.environ, "COLUMNS": "120", "LINES": "40", "TERM": "xterm"}
    env["PYTHONPATH"] = os.pathsep.join(sys.path)
    proc = subprocess.Popen(
        [sys.executable, "-m", "specscope", "watch", *args, "--interval", "0.3s"],
        stdin=subprocess.PIPE if pipe else child,
        stdout=child,
        stderr=child,
        env=env,
        close_fds=True,
    )
    os.close(child)
    try:
        yield proc, _Screen(main)
    finally:
        if proc.poll() is None:
            proc.kill()
        os.close(main)


def test_watch_follows_a_log_as_it_is_written(tmp_path):
    log = tmp_path / "server.log"
    log.write_text("\n".join([stats(1), spec(1, 100, [50, 25])]) + "\n")
    with _watching(str(log), "--store", str(tmp_path / "store")) as (proc, screen):
        screen.wait_for("37.5%", 30)  # 75 of 200 draft tokens
        with open(log, "a") as f:  # the server writes on: acceptance drops to nothing
            for i in range(2, 12):
                f.write(stats(i) + "\n" + spec(i, 100, [0, 0]) + "\n")
        screen.wait_for("0.0%", 5)  # within an interval or so
        screen.wait_for("acceptance_drift", 10)  # the detector notices
        proc.send_signal(signal.SIGINT)
        out = screen.wait_for("specscope advise --run", 20)
        assert proc.wait(timeout=10) == 0
        assert "intervals, acceptance" in out
    assert (tmp_path / "store" / "specscope.json").is_file()  # --store kept what it saw
    # The run the findings named, by the name the store gives it (advise --run takes it).
    named = re.search(r"specscope advise --run (\S+)\)", out)
    assert named is not None, out
    runs = specscope.open_store(tmp_path / "store").runs.collect()["run_id"].to_list()
    assert named.group(1) in runs


def test_followed_log_rotation(tmp_path):
    path = tmp_path / "server.log"
    path.write_text("a\nb\npart")
    follow = FollowedLog(path)
    assert [t for _, t in follow.read()] == ["a", "b"]
    with open(path, "a") as f:
        f.write("ial\nc\n")
    assert [t for _, t in follow.read()] == ["partial", "c"]
    path.unlink()
    path.write_text("new\n")  # rotated: a new file under the old name
    assert [t for _, t in follow.read()] == ["new"]


def test_watch_reads_a_pipe(tmp_path):
    """``docker logs -f vllm | specscope watch -``: records show as they come down the pipe,
    a quiet pipe does not hold the view, the watch ends when the writer closes it, and
    --store keeps what came, as standard input."""
    with _watching("-", "--store", str(tmp_path / "store"), pipe=True) as (proc, screen):
        assert proc.stdin is not None
        proc.stdin.write(("\n".join([stats(1), spec(1, 100, [50, 25])]) + "\n").encode())
        proc.stdin.flush()
        screen.wait_for("37.5%", 30)  # 75 of 200 draft tokens, the pipe still open
        for i in range(2, 5):
            proc.stdin.write((stats(i) + "\n" + spec(i, 100, [0, 0]) + "\n").encode())
        proc.stdin.close()  # the writer is done: the watch ends by itself
        out = screen.wait_for("watched -", 20)
        assert proc.wait(timeout=20) == 0
        assert "4 intervals" in out
    store = specscope.open_store(tmp_path / "store")
    assert store.sources.collect()["path"].to_list() == ["-"]
    assert store.spec_decode.collect().height == 4


def test_followed_stream_reads_what_is_there_without_waiting(tmp_path):
    from specscope.logs.follow import FollowedStream

    read_end, write_end = os.pipe()
    with os.fdopen(read_end, "rb", buffering=0) as stream, open(tmp_path / "spool", "wb") as sp:
        follow = FollowedStream(stream, sp)
        assert list(follow.read()) == [] and not follow.ended  # nothing yet: no wait
        os.write(write_end, b"a\nb\npart")
        assert [t for _, t in follow.read()] == ["a", "b"]
        os.write(write_end, b"ial\n")
        os.close(write_end)
        assert [t for _, t in follow.read()] == ["partial"] and follow.ended
    assert (tmp_path / "spool").read_bytes() == b"a\nb\npartial\n"


def test_watch_judges_requests_and_costs_the_drafter_as_detect_and_advise_do(tmp_path):
    """A followed log's requests get request_acceptance and request_outlier (sglang#13754's
    request at 11 of 940 among five at 63 of 215), and a llama.cpp log's statistics and eval
    time lines the drafter's measured cost in the view's advice (world case 97: c = 0.057)."""
    import io
    import tomllib
    from pathlib import Path

    from rich.console import Console

    from specscope.cli.watch import Watcher, render

    root = Path(__file__).resolve().parent.parent
    finish = tomllib.loads((root / "parsers" / "sglang_request_finish.toml").read_text())
    real, other = (str(s["text"]) for s in finish["samples"][:2])
    log = tmp_path / "server.log"
    log.write_text("\n".join([other] * 5 + [real]) + "\n", encoding="utf-8")
    kinds = {f.kind for f in Watcher(str(log)).step().findings}
    assert {"request_acceptance", "request_outlier"} <= kinds and "acceptance_drift" not in kinds

    world = root / "fixtures" / "world" / "97_llamacpp_eagle3_request_and_statistics.log"
    snap = Watcher(str(world)).step()
    (a,) = [a for a in snap.advice if a.method == "eagle3"]
    assert a.cost_ratio == 0.057 and a.cost_source.startswith("measured: llama.cpp drafter")
    out = io.StringIO()
    Console(file=out, width=400).print(render(snap, str(world)))
    assert f"advice, run {a.run_id} (c=0.057, measured: llama.cpp drafter 3.74 ms" in out.getvalue()
