"""Paths the tests share, and how a synthetic log's rows are shown when they differ."""

from __future__ import annotations

from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "fixtures"
SEEDS = FIXTURES / "seeds"


def _show(text: str, line: int | None) -> str:
    if line is None:
        return ""
    lines = text.split("\n")
    return "\n".join(
        f"  {n}: {lines[n - 1][:300]!r}" for n in range(max(1, line - 1), min(line + 2, len(lines)))
    )


def explain(log: Any, got: list[dict[str, Any]], want: list[dict[str, Any]], what: str) -> str:
    """The first difference between rows read from a synthetic log (``fixtures/synth.py``)
    and its truth, compactly, with the text around it."""
    head = (
        f"{what}: {len(got)} rows read, {len(want)} expected "
        f"(format {log.format}, seed {log.seed}, wrappings {log.wrappings}, width {log.width}, "
        f"versions {log.versions})"
    )
    for i, (g, w) in enumerate(zip(got, want, strict=False)):
        if g != w:
            diff = {k: (g.get(k), w.get(k)) for k in w if g.get(k) != w.get(k)}
            return f"{head}\nrow {i}: (read, expected) {diff}\n{_show(log.text, w.get('line'))}"
    rest = got[len(want) :] or want[len(got) :]
    extra = "read but not expected" if len(got) > len(want) else "expected but not read"
    return f"{head}\n{extra}: {rest[0]}\n{_show(log.text, rest[0].get('line'))}"


# A small Python that starts the measured command and reports its peak RSS. Measured from
# the test process itself, a child's ru_maxrss starts at the size of what forked it (Linux
# keeps the high-water mark across exec): after hundreds of tests, ~400 MB of pytest.
_LAUNCHER = """
import json, os, subprocess, sys, threading, time
cmd, limit, report = json.loads(sys.argv[1]), float(sys.argv[2]), sys.argv[3]
started = time.monotonic()
proc = subprocess.Popen(cmd)
killer = threading.Timer(limit, proc.kill)
killer.start()
_, status, usage = os.wait4(proc.pid, 0)
killer.cancel()
with open(report, "w") as f:
    json.dump([os.waitstatus_to_exitcode(status), time.monotonic() - started,
               usage.ru_maxrss / 1024], f)
"""


def run_measured(
    cmd: list[str], *, env: dict[str, str], limit: float, stdout: object, stderr: object
) -> tuple[int, float, float]:
    """Run ``cmd`` (its output to the given files); return its exit status, seconds and
    peak RSS in MB, measured in a process of its own."""
    import json
    import subprocess
    import sys
    import tempfile

    with tempfile.NamedTemporaryFile("r", suffix=".json") as report:
        subprocess.run(
            [sys.executable, "-c", _LAUNCHER, json.dumps(cmd), str(limit), report.name],
            stdout=stdout,
            stderr=stderr,
            env=env,
            check=True,
            timeout=limit + 60,
        )
        status, seconds, rss = json.loads(open(report.name).read())
    return int(status), float(seconds), float(rss)


def findings_of_paste(tmp_path: Path, text: str) -> list[Any]:
    """What `detect` finds in ``text`` pasted into a file and ingested as a user would."""
    import specscope

    tmp_path.mkdir(parents=True, exist_ok=True)
    log = tmp_path / "paste.log"
    log.write_text(text, encoding="utf-8")
    store = tmp_path / "store"
    specscope.ingest([log], store=store, year=2026)
    return specscope.detect(specscope.open_store(store))


# The head of a child process that kills itself (SIGKILL) at its Nth durable step of the
# store (a file or folder synced, a rename; N is argv[1]); what follows it runs the
# writer, then prints the steps taken (``seen``) when it was not killed.
KILLED_AT_STEP = """
import json, os, signal, sys
from specscope.store import durable
target, seen = int(sys.argv[1]), []
def counted(name, step):
    def run(*args, **kwargs):
        seen.append(name)
        if len(seen) == target:
            os.kill(os.getpid(), signal.SIGKILL)
        return step(*args, **kwargs)
    return run
for name in ("sync_file", "sync_dir", "move"):
    setattr(durable, name, counted(name, getattr(durable, name)))
"""


def spark_session(**conf: str) -> Any:
    """A local Spark on one core and 127.0.0.1 for the fleet engines' tests (skips where
    pyspark or a Java runtime is missing); ``conf``: more settings. Stop it when done."""
    import shutil

    import pytest

    pytest.importorskip("pyspark", reason="Spark not installed: pip install '.[fleet]'")
    if shutil.which("java") is None:
        pytest.skip("Spark needs a Java runtime (java on PATH)")
    from pyspark.sql import SparkSession

    builder = (
        SparkSession.builder.master("local[1]")
        .appName("specscope-tests")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.sql.shuffle.partitions", "2")
    )
    for key, value in conf.items():
        builder = builder.config(key, value)
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel("ERROR")
    return session
