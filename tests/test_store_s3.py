"""A store on object storage (``--store s3://bucket/prefix``), against a real S3 server on
127.0.0.1 (s3s-fs, serving a folder): what is ingested and pulled reads back whole with
specscope, polars and DuckDB; two writers at once both land; a reader during a commit
sees an ingest whole or not at all; a writer killed at each step of its commit leaves a
store the next writer recovers; bad buckets, credentials and endpoints are one line.

DuckDB's httpfs is an extension it downloads, so offline DuckDB reads the folder s3s-fs
serves (the same objects, byte for byte) rather than s3://.
"""

from __future__ import annotations

import json
import os
import random
import socket
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import duckdb
import polars as pl
import pytest

import specscope
from specscope.errors import StoreError, UsageError
from tests.helpers import FIXTURES, ROOT
from tests.s3_server import ACCESS_KEY, SECRET_KEY, S3Server, binary
from tests.test_sql_engines import answer, same

pytest.importorskip("obstore")
pytestmark = pytest.mark.skipif(binary() is None, reason="s3s-fs is not installed")

sys.path.insert(0, str(FIXTURES))
import synth  # type: ignore[import-not-found]  # noqa: E402


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[S3Server]:
    with S3Server(tmp_path_factory.mktemp("s3")) as s3:
        yield s3


@pytest.fixture
def bucket(
    server: S3Server,
    request: pytest.FixtureRequest,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> str:
    """A fresh bucket for the test (s3s-fs: a folder of its root), and the env to reach it."""
    name = "b" + str(abs(hash(request.node.name)) % 10**10)
    (server.root / name).mkdir()
    for key, value in _env(server, tmp_path).items():
        monkeypatch.setenv(key, value)
    monkeypatch.setenv("SPECSCOPE_LOCK_LEASE_S", "600")
    return name


def _env(server: S3Server, tmp_path: Path) -> dict[str, str]:
    return {
        "AWS_ACCESS_KEY_ID": ACCESS_KEY,
        "AWS_SECRET_ACCESS_KEY": SECRET_KEY,
        "AWS_ENDPOINT_URL": server.url,
        "AWS_REGION": "us-east-1",
        "SPECSCOPE_CACHE": str(tmp_path / "cache"),
    }


def _log(tmp_path: Path, seed: int) -> tuple[Path, int]:
    """A generated vLLM log and how many spec-decode rows it holds."""
    made = synth.generate(random.Random(seed))
    path = tmp_path / f"server-{seed}.log"
    path.write_bytes(made.data)
    return path, len(made.spec_decode)


def _served(server: S3Server, bucket: str, prefix: str) -> Path:
    return server.root / bucket / prefix


def _rows(store: str) -> int:
    return int(specscope.open_store(store).spec_decode.select(pl.len()).collect().item())


def _stage_left(server: S3Server, bucket: str, prefix: str) -> list[Path]:
    stage = _served(server, bucket, prefix) / "stage"
    return sorted(p for p in stage.rglob("*") if p.is_file()) if stage.is_dir() else []


def test_ingest_reads_back_with_specscope_polars_and_duckdb(
    server: S3Server, bucket: str, tmp_path: Path
) -> None:
    logs = [_log(tmp_path, seed) for seed in (1, 2)]
    url = f"s3://{bucket}/fleet/a"
    report = specscope.ingest([str(p) for p, _ in logs], store=url)
    report.raise_for_errors()
    assert report.store == url
    want = sum(n for _, n in logs)
    assert want > 0
    store = specscope.open_store(url)
    assert repr(store) == f"Store({url!r})"
    assert store.spec_decode.select(pl.len()).collect().item() == want
    local = tmp_path / "local"
    specscope.ingest([str(p) for p, _ in logs], store=local).raise_for_errors()
    mine = store.run_sums.collect().sort("run_id").drop("run_id")
    theirs = specscope.open_store(local).run_sums.collect().sort("run_id").drop("run_id")
    assert mine.equals(theirs)  # the same sums, run ids aside (they name the ingest)
    served = _served(server, bucket, "fleet/a")
    glob = str(served / "spec_decode" / "**" / "*.parquet")
    assert pl.scan_parquet(glob, hive_partitioning=True).select(pl.len()).collect().item() == want
    got = duckdb.sql(f"SELECT count(*) FROM read_parquet('{glob}', hive_partitioning=1)")
    assert got is not None and got.fetchall() == [(want,)]
    assert _stage_left(server, bucket, "fleet/a") == []
    # Read again from an empty cache: fetched and checked again.
    import shutil

    shutil.rmtree(Path(os.environ["SPECSCOPE_CACHE"]))
    assert _rows(url) == want


def test_a_cached_file_not_as_committed_is_fetched_again(bucket: str, tmp_path: Path) -> None:
    log, n = _log(tmp_path, 3)
    url = f"s3://{bucket}/p"
    specscope.ingest(str(log), store=url).raise_for_errors()
    store = specscope.open_store(url)
    [cached] = store.files("spec_decode")
    cached.write_bytes(b"x" * 10)  # another size: fetched again
    assert _rows(url) == n


def _clock(at: datetime) -> Callable[[], datetime]:
    return lambda: at


def test_pull_to_object_storage_resumes_like_a_folder(bucket: str, tmp_path: Path) -> None:
    from tests.prom_servers import Misbehaving

    prometheus = Misbehaving("matrix")
    start = datetime(2026, 11, 24, 12, 0, tzinfo=UTC)
    try:
        added = {}
        for where in (f"s3://{bucket}/pulls", str(tmp_path / "local")):
            added[where] = [
                specscope.pull(
                    prometheus.url,
                    store=where,
                    since="1m",
                    retries=0,
                    now=_clock(start + timedelta(minutes=i)),
                ).added.get("spec_decode", 0)
                for i in range(3)
            ]
    finally:
        prometheus.stop()
    remote, local = added.values()
    assert remote == local and sum(remote) > 0
    assert _rows(f"s3://{bucket}/pulls") == sum(local) == _rows(str(tmp_path / "local"))


_WRITER = textwrap.dedent(
    """
    import os, signal, sys
    import specscope
    import specscope.errors
    from specscope.store import objects

    kill_at = os.environ.get("KILL_AT")  # "put:N" or "copy:N": SIGKILL at that call
    if kill_at:
        what, n = kill_at.split(":")
        count = [0]
        original = getattr(objects.Objects, what)

        how = signal.SIGSTOP if os.environ.get("STOP") else signal.SIGKILL

        def dying(self, *args, **kwargs):
            count[0] += 1
            if count[0] == int(n):
                os.kill(os.getpid(), how)
            return original(self, *args, **kwargs)

        setattr(objects.Objects, what, dying)
    try:
        specscope.ingest(sys.argv[2:], store=sys.argv[1]).raise_for_errors()
    except specscope.errors.SpecscopeError as exc:
        print(exc, file=sys.stderr)
        sys.exit(int(exc.exit_status))
    """
)


def _writer(
    url: str, logs: list[Path], env: dict[str, str], **extra: str
) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-c", _WRITER, url, *map(str, logs)],
        env={**os.environ, **env, **extra, "PYTHONPATH": str(ROOT)},
        cwd=ROOT,
        stderr=subprocess.PIPE,
    )


def test_two_writers_at_once_both_land(server: S3Server, bucket: str, tmp_path: Path) -> None:
    url = f"s3://{bucket}/two"
    logs = [_log(tmp_path, seed) for seed in (11, 12, 13, 14)]
    env = _env(server, tmp_path)
    writers = [
        _writer(url, [p for p, _ in logs[:2]], env),
        _writer(url, [p for p, _ in logs[2:]], env),
    ]
    for w in writers:
        _, err = w.communicate(timeout=120)
        assert w.returncode == 0, err.decode()[-2000:]
    store = specscope.open_store(url)
    assert len(store.manifest()["ingests"]) == 2
    assert _rows(url) == sum(n for _, n in logs)
    assert store.sources.collect().height == 4  # neither writer's sources undid the other's
    assert _stage_left(server, bucket, "two") == []
    # Nothing doubled: each run's rows once.
    runs = store.spec_decode.group_by("run_id").len().collect()
    assert runs["len"].sum() == sum(n for _, n in logs)


def test_a_reader_during_commits_sees_each_ingest_whole(
    server: S3Server, bucket: str, tmp_path: Path
) -> None:
    url = f"s3://{bucket}/read"
    logs = [_log(tmp_path, seed) for seed in range(21, 25)]
    env = _env(server, tmp_path)
    specscope.ingest(str(logs[0][0]), store=url).raise_for_errors()
    # Each later writer commits one log: a reader may see any prefix-free mix of them,
    # but only whole ingests: its count is a sum of whole logs' counts.
    wholes = {0}
    for _, n in logs[1:]:
        wholes |= {w + n for w in wholes}
    wholes = {w + logs[0][1] for w in wholes}
    served = _served(server, bucket, "read")
    seen: list[int] = []
    foreign: list[str] = []
    stop = threading.Event()

    def read() -> None:
        while not stop.is_set():
            seen.append(_rows(url))
            # A glob of the table folders sees no file of an uncommitted ingest.
            files = {
                p.relative_to(served).as_posix() for p in served.glob("spec_decode/**/*.parquet")
            }
            listed = {
                f["path"]
                for i in json.loads((served / "specscope.json").read_bytes())["ingests"]
                for f in i["files"]
            }
            foreign.extend(sorted(files - listed))

    reader = threading.Thread(target=read)
    reader.start()
    try:
        writers = [_writer(url, [p], env) for p, _ in logs[1:]]
        for w in writers:
            _, err = w.communicate(timeout=120)
            assert w.returncode == 0, err.decode()[-2000:]
    finally:
        stop.set()
        reader.join()
    assert len(seen) >= 3
    assert set(seen) <= wholes, sorted(set(seen) - wholes)
    assert foreign == []
    assert _rows(url) == sum(n for _, n in logs)


@pytest.mark.parametrize(
    ("kill_at", "committed"),
    [
        ("put:2", False),  # its claim put, killed uploading its first file
        ("put:5", False),  # files uploaded, killed putting the manifest
        ("copy:1", True),  # the manifest committed, killed before the first copy
        ("copy:3", True),  # killed among its copies
    ],
)
def test_a_writer_killed_mid_commit_is_recovered(
    server: S3Server, bucket: str, tmp_path: Path, kill_at: str, committed: bool
) -> None:
    url = f"s3://{bucket}/killed"
    (first, n1), (second, n2), (third, n3) = (_log(tmp_path, s) for s in (31, 32, 33))
    env = _env(server, tmp_path)
    specscope.ingest(str(first), store=url).raise_for_errors()
    w = _writer(url, [second], env, KILL_AT=kill_at)
    w.communicate(timeout=120)
    assert w.returncode == -9
    assert _stage_left(server, bucket, "killed") != []
    # A reader now: the killed ingest whole, or not at all (its copies not all made).
    assert _rows(url) == n1
    specscope.ingest(str(third), store=url).raise_for_errors()  # recovers first
    assert _stage_left(server, bucket, "killed") == []
    assert _rows(url) == n1 + n3 + (n2 if committed else 0)
    served = _served(server, bucket, "killed")
    on_disk = sorted(  # a table's files at either depth (a day's folder, or the source's)
        p.relative_to(served).as_posix()
        for p in served.glob("*/**/*.parquet")
        if p.relative_to(served).parts[0] != "stage"
    )
    listed = sorted(
        {f["path"] for i in specscope.open_store(url).manifest()["ingests"] for f in i["files"]}
    )
    # Every listed file is there; nothing else is (superseded runs files are deleted).
    assert set(listed) >= set(on_disk)
    assert all((served / p).is_file() for p in listed if not p.startswith(("runs/", "sources/")))


def test_a_writer_that_lost_its_claim_commits_nothing(
    server: S3Server, bucket: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Stopped past its lease after uploading, a writer's stage is removed by the next
    writer; woken, it finds its claim gone and commits nothing (exit 9)."""
    url = f"s3://{bucket}/stopped"
    (first, n1), (second, _), (third, n3) = (_log(tmp_path, s) for s in (61, 62, 63))
    env = {**_env(server, tmp_path), "SPECSCOPE_LOCK_LEASE_S": "1"}
    specscope.ingest(str(first), store=url).raise_for_errors()
    w = _writer(url, [second], env, KILL_AT="put:5", STOP="1")  # stopped before its commit
    deadline = time.monotonic() + 60
    while not _stage_left(server, bucket, "stopped") or _state(w.pid) != "T":
        assert time.monotonic() < deadline and w.poll() is None
        time.sleep(0.05)
    time.sleep(1.5)  # past its lease
    monkeypatch.setenv("SPECSCOPE_LOCK_LEASE_S", "1")
    specscope.ingest(str(third), store=url).raise_for_errors()
    assert _stage_left(server, bucket, "stopped") == []
    os.kill(w.pid, 18)  # SIGCONT
    _, err = w.communicate(timeout=60)
    assert w.returncode == 9 and b"lost its stage" in err, err.decode()[-1000:]
    assert b"Traceback" not in err
    assert _rows(url) == n1 + n3
    assert len(specscope.open_store(url).manifest()["ingests"]) == 2


def _state(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return "?"


def _one_line(exc: StoreError) -> str:
    text = str(exc)
    assert "\n" not in text and "Traceback" not in text
    return text


def test_errors_are_one_line_naming_the_url(
    server: S3Server, bucket: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    log, _ = _log(tmp_path, 41)
    with pytest.raises(StoreError) as missing:
        specscope.open_store(f"s3://{bucket}/nothing-here")
    assert f"s3://{bucket}/nothing-here" in _one_line(missing.value)
    with pytest.raises(StoreError) as nobucket:
        specscope.ingest(str(log), store="s3://no-such-bucket/p")
    assert "no-such-bucket" in _one_line(nobucket.value)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "wrong")
    with pytest.raises(StoreError) as refused:
        specscope.open_store(f"s3://{bucket}/p")
    assert "credentials were refused" in _one_line(refused.value)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", SECRET_KEY)
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
    monkeypatch.setenv("AWS_ENDPOINT_URL", f"http://127.0.0.1:{port}")
    with pytest.raises(StoreError) as unreachable:
        specscope.open_store(f"s3://{bucket}/p")
    assert "cannot be reached" in _one_line(unreachable.value)
    monkeypatch.setenv("AWS_ENDPOINT_URL", "http://example.invalid:9000")
    with pytest.raises(UsageError, match="plain http"):
        specscope.open_store(f"s3://{bucket}/p")


def test_a_silent_endpoint_times_out(
    bucket: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A server that accepts and never answers: the call fails within its bound."""
    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen(16)
    monkeypatch.setenv("AWS_ENDPOINT_URL", f"http://127.0.0.1:{silent.getsockname()[1]}")
    monkeypatch.setenv("SPECSCOPE_S3_TIMEOUT_S", "1")
    began = time.monotonic()
    try:
        with pytest.raises(StoreError) as slow:
            specscope.open_store(f"s3://{bucket}/p")
    finally:
        silent.close()
    assert time.monotonic() - began < 15
    assert "cannot be reached" in _one_line(slow.value)


def test_the_commands_take_an_s3_store(
    server: S3Server, bucket: str, cli: Any, tmp_path: Path
) -> None:
    log, _ = _log(tmp_path, 51)
    url = f"s3://{bucket}/cli"
    got = cli("ingest", str(log), "--store", url, "--json")
    assert got.status == 0, got.err
    assert json.loads(got.out)["store"] == url
    runs = cli("runs", "--store", url, "--json")
    assert runs.status == 0, runs.err
    assert len(json.loads(runs.out)) == specscope.open_store(url).runs.collect().height > 0
    for command in (("detect",), ("report", "--out", str(tmp_path / "report.md"))):
        done = cli(*command, "--store", url)
        assert done.status in (0, 11), done.err
    checked = cli("check", "--store", url, "--json")
    assert checked.status == 0, checked.err
    assert json.loads(checked.out)["store"] == url and json.loads(checked.out)["ok"]
    # A file no ingest lists, in a table folder: foreign, as in a folder.
    stray = _served(server, bucket, "cli") / "spec_decode" / "source_id=x" / "part-x.parquet"
    stray.parent.mkdir(parents=True)
    stray.write_bytes(b"PAR1")
    bad = cli("check", "--store", url)
    assert bad.status != 0 and "foreign: spec_decode/source_id=x/part-x.parquet" in bad.out
    stray.unlink()
    printed = cli("sql", "--store", url, "acceptance_by_run")
    assert printed.status == 0, printed.err
    assert f"'{url}/spec_decode/date=" in printed.out  # a day's folder, then the source's
    # DuckDB runs the views over the served folder (httpfs is a download): specscope's sums.
    served = str(_served(server, bucket, "cli"))
    views = cli("sql", "--store", url, "--location", served, "acceptance_by_run")
    assert views.status == 0, views.err
    con = duckdb.connect()
    *setup, last = [s for s in views.out.split(";\n") if s.strip()]
    for statement in setup:
        con.execute(statement)
    # To the last digit what specscope says, read from the object store.
    same(
        "acceptance_by_run",
        con.sql(last).pl(),
        answer(specscope.open_store(url), "acceptance_by_run"),
    )
    # $SPECSCOPE_STORE names it as well (kept a URL: a Path would fold its //).
    by_env = cli("runs", "--json", env={"SPECSCOPE_STORE": url})
    assert by_env.status == 0 and json.loads(by_env.out) == json.loads(runs.out)
    other = cli("runs", "--store", "gs://bucket/p")
    assert other.status == 2 and "s3://bucket/prefix" in other.err
    missing = cli("runs", "--store", f"s3://{bucket}/nothing")
    assert missing.status == 9
    assert missing.err.strip().count("\n") == 0 and f"s3://{bucket}/nothing" in missing.err


_COMPACTOR = textwrap.dedent(
    """
    import os, signal, sys
    from specscope.store import objects
    from specscope.store.compaction import compact

    kill_at = os.environ.get("KILL_AT")  # "put:N" or "copy:N": SIGKILL at that call
    if kill_at:
        what, n = kill_at.split(":")
        count = [0]
        original = getattr(objects.Objects, what)

        def dying(self, *args, **kwargs):
            count[0] += 1
            if count[0] == int(n):
                os.kill(os.getpid(), signal.SIGKILL)
            return original(self, *args, **kwargs)

        setattr(objects.Objects, what, dying)
    print(compact(sys.argv[1]).to_dict())
    """
)


def _tables(url: str) -> dict[str, pl.DataFrame]:
    store = specscope.open_store(url)
    return {t: store.table(t).collect() for t in ("spec_decode", "run_sums", "runs")}


def _equal(got: dict[str, pl.DataFrame], want: dict[str, pl.DataFrame]) -> None:
    from polars.testing import assert_frame_equal

    for table, frame in want.items():
        assert_frame_equal(got[table], frame, check_exact=True)


def test_compaction_on_object_storage(server: S3Server, bucket: str, tmp_path: Path) -> None:
    """Pulls leave a file each on object storage; a compaction merges them while a reader
    polls, a compactor killed before or after its manifest put leaves the rows as they
    were, and the next one finishes; a lease later the replaced objects go."""
    from tests.prom_servers import Misbehaving

    url = f"s3://{bucket}/compact"
    prometheus = Misbehaving("matrix")
    start = datetime(2026, 11, 24, 12, 0, tzinfo=UTC)
    try:
        for i in range(6):
            specscope.pull(
                prometheus.url,
                store=url,
                since="1m",
                retries=0,
                now=_clock(start + timedelta(minutes=i)),
            )
    finally:
        prometheus.stop()
    served = _served(server, bucket, "compact")
    assert len(list(served.glob("spec_decode/**/*.parquet"))) >= 5
    want = _tables(url)
    env = _env(server, tmp_path)

    def compactor(**extra: str) -> subprocess.CompletedProcess[bytes]:
        return subprocess.run(
            [sys.executable, "-c", _COMPACTOR, url],
            env={**os.environ, **env, **extra, "PYTHONPATH": str(ROOT)},
            cwd=ROOT,
            capture_output=True,
            timeout=120,
        )

    for kill_at in ("put:2", "copy:1"):  # uploading its first file; committed, not copied
        killed = compactor(KILL_AT=kill_at)
        assert killed.returncode == -9, killed.stderr.decode()[-2000:]
        _equal(_tables(url), want)
    errors: list[str] = []
    stop = threading.Event()

    def read() -> None:
        while not stop.is_set():
            try:
                _equal(_tables(url), want)
            except Exception as exc:  # any error is a finding
                errors.append(f"{type(exc).__name__}: {exc}")

    reader = threading.Thread(target=read)
    reader.start()
    try:
        done = compactor()
        assert done.returncode == 0, done.stderr.decode()[-2000:]
    finally:
        stop.set()
        reader.join()
    assert not errors, errors[:3]
    # The lease over, the replaced objects go. Not under a reader: one that read the
    # manifest a lease ago is promised nothing, and a lease of a millisecond is always over
    # (a reader polling through it failed one CI run in two).
    gone = compactor(SPECSCOPE_LOCK_LEASE_S="0.001")
    assert gone.returncode == 0, gone.stderr.decode()[-2000:]
    _equal(_tables(url), want)
    assert len(list(served.glob("spec_decode/**/*.parquet"))) == 1
    assert _stage_left(server, bucket, "compact") == []
    listed = {
        f["path"] for i in specscope.open_store(url).manifest()["ingests"] for f in i["files"]
    }
    assert all((served / p).is_file() for p in listed)
    assert specscope.open_store(url).sums_cover_rows()


_PULLER = textwrap.dedent(
    """
    import sys
    from datetime import datetime, timedelta
    import specscope

    at = datetime.fromisoformat(sys.argv[3])
    for minute in range(3):  # three scheduled pulls, a minute apart
        now = at + timedelta(minutes=minute)
        specscope.pull(sys.argv[1], store=sys.argv[2], since="1m", retries=0, now=lambda: now)
    """
)


def test_two_writers_pulling_at_once_both_land(
    server: S3Server, bucket: str, tmp_path: Path
) -> None:
    """Two servers pulled into one store on object storage by two processes at once, three
    pulls each: every row of each lands once, as pulling each alone into a folder gives."""
    from tests.prom_servers import Misbehaving

    url = f"s3://{bucket}/pulls"
    servers = [Misbehaving("matrix"), Misbehaving("matrix")]
    at = "2026-11-24T12:00:00+00:00"
    env = {**os.environ, **_env(server, tmp_path), "PYTHONPATH": str(ROOT)}
    try:
        pulling = [
            subprocess.Popen(
                [sys.executable, "-c", _PULLER, s.url, url, at],
                env=env,
                cwd=ROOT,
                stderr=subprocess.PIPE,
            )
            for s in servers
        ]
        for p in pulling:
            _, err = p.communicate(timeout=180)
            assert p.returncode == 0, err.decode()[-2000:]
        alone = []
        for n, s in enumerate(servers):  # each alone into a folder, in this process
            local = tmp_path / f"alone-{n}"
            for minute in range(3):
                now = datetime.fromisoformat(at) + timedelta(minutes=minute)
                specscope.pull(s.url, store=local, since="1m", retries=0, now=_clock(now))
            alone.append(_rows(str(local)))
    finally:
        for s in servers:
            s.stop()
    store = specscope.open_store(url)
    assert len(store.manifest()["ingests"]) == 6
    assert _rows(url) == sum(alone) > 0
    assert store.sources.collect().height == 2
    rows = store.spec_decode.collect()
    assert rows.select("source_id", "run_id", "engine", "ts").is_unique().all()
    assert _stage_left(server, bucket, "pulls") == []
