"""The store read from outside and trusted (issue 20): a glob reader never sees a row of an
ingest that did not commit; a copied, damaged, swapped or missing data file is named, never
read as if it belonged; a full disk at any step is exit 9 with the store as it was; a hung
writer cannot hold the lock for ever. Real files, real processes, real kills."""

from __future__ import annotations

import errno
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import duckdb
import polars as pl
import pytest

import specscope
from specscope.cli.app import app
from specscope.cli.check import EXAMPLES, check
from specscope.errors import ExitStatus, StoreError
from specscope.logs import staging
from specscope.schema import store_columns
from specscope.store import durable, locking, writing
from specscope.store.check import check_store
from specscope.store.reading import Store

from .helpers import FIXTURES, KILLED_AT_STEP, SEEDS

sys.path.insert(0, str(FIXTURES))
import synth

INT4 = SEEDS / "003_83783f5568908b19.txt"
OTHER = SEEDS / "002_2dcac71f91935498.txt"
ENV = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}

# ``specscope check`` is registered in cli/app.py by one line; until it is, here.
if not any(c.callback is check for c in app.registered_commands):
    app.command(epilog=EXAMPLES)(check)


def _third(tmp_path: Path) -> Path:
    """A third log, of synthetic runs."""
    path = tmp_path / "third.log"
    path.write_text(synth.generate_seed(7, ()).text)
    return path


def _snapshot(store: Path) -> dict[str, bytes | None]:
    """Every file (with its bytes) and folder of a store, but the lock's record."""
    return {
        str(p.relative_to(store)): (p.read_bytes() if p.is_file() else None)
        for p in store.rglob("*")
        if not p.name.startswith(".lock")
    }


# A row: its source, line and run (a line may hold two runs' records: two rates an author
# states in one sentence, each a run of its own).
Key = tuple[str, int, str]
KEY = ("source_id", "line", "run_id")


def _keys(frame: pl.DataFrame) -> list[Key]:
    return list(zip(*(frame[c].to_list() for c in KEY), strict=True))


def _polars_glob(store: Path) -> list[Key]:
    frame = pl.scan_parquet(f"{store}/spec_decode/**/*.parquet", hive_partitioning=True)
    return _keys(frame.select(KEY).collect())


def _duckdb_glob(store: Path) -> list[Key]:
    with duckdb.connect() as con:
        rows = con.execute(
            "select source_id, line, run_id from "
            f"read_parquet('{store}/spec_decode/**/*.parquet', hive_partitioning=true)"
        ).fetchall()
    return [(s, int(n), r) for s, n, r in rows]


def _specscope_rows(store: Path) -> list[Key]:
    return _keys(specscope.open_store(store).spec_decode.select(KEY).collect())


def _error_line(r) -> str:
    assert r.err.count("\n") == 1, r.err
    return r.err


class _GlobReaders:
    """Polars and DuckDB reading the store's spec_decode glob over and over, from threads,
    while a writer works; ``reads`` keeps every answer."""

    def __init__(self, store: Path) -> None:
        self.store = store
        self.reads: list[list[Key]] = []
        self.errors: list[str] = []
        self._stop = threading.Event()
        self._threads = [
            threading.Thread(target=self._run, args=(read,), daemon=True)
            for read in (_polars_glob, _duckdb_glob)
        ]

    def _run(self, read) -> None:
        while not self._stop.is_set():
            try:
                self.reads.append(read(self.store))
            except Exception as exc:  # any error is a finding
                self.errors.append(f"{read.__name__}: {exc}")

    def __enter__(self) -> _GlobReaders:
        for t in self._threads:
            t.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        for t in self._threads:
            t.join()
        # and once more, on the store as the writer left it
        self.reads += [_polars_glob(self.store), _duckdb_glob(self.store)]


# -- a writer killed in its commit, read by globs meanwhile ------------------------------------

# Kills itself (SIGKILL) at the Nth durable step of the store (a file or folder synced, a
# rename), then ingests; prints the steps it took when it was not killed.
_KILLER = (
    KILLED_AT_STEP
    + """
import specscope
specscope.ingest(sys.argv[3], store=sys.argv[2], year=2026).raise_for_errors()
print(json.dumps(seen))
"""
)


@pytest.fixture(scope="module")
def two_logs(tmp_path_factory):
    """A store holding log A, and log B (several runs) with the rows it holds."""
    base = tmp_path_factory.mktemp("trust")
    log_b = base / "b.log"
    log_b.write_text("\n".join(synth.generate_seed(s, ()).text for s in range(3)) + "\n")
    committed = base / "a-store"
    specscope.ingest(INT4, store=committed, year=2026).raise_for_errors()
    alone = base / "b-alone"
    specscope.ingest(log_b, store=alone, year=2026).raise_for_errors()
    return committed, log_b, set(_specscope_rows(committed)), set(_specscope_rows(alone))


def _kill_at(step: int, store: Path, log: Path, tmp_path: Path) -> subprocess.CompletedProcess:
    script = tmp_path / "killer.py"
    script.write_text(_KILLER)
    return subprocess.run(
        [sys.executable, str(script), str(step), str(store), str(log)],
        env=ENV,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_globs_never_see_a_row_of_an_ingest_killed_in_its_commit(two_logs, tmp_path):
    committed, log_b, rows_a, rows_b = two_logs
    dry = tmp_path / "dry"
    shutil.copytree(committed, dry)
    whole = _kill_at(0, dry, log_b, tmp_path)
    assert whole.returncode == 0, whole.stderr
    steps = json.loads(whole.stdout.splitlines()[-1])
    listed = json.loads((dry / "specscope.json").read_text())["ingests"][-1]["files"]
    assert steps.count("move") == 1 + len(listed) >= 6  # the manifest, then each data file
    # Every rename, with the step before and after it, and the first and last steps: each
    # kind of moment of the commit (the syncs in a row between are alike).
    moves = [n for n, step in enumerate(steps, 1) if step == "move"]
    chosen = sorted({1, len(steps)} | {n + d for n in moves for d in (-1, 0, 1)})
    outcomes = []
    for step in chosen:
        store = tmp_path / f"killed-{step}"
        shutil.copytree(committed, store)
        manifest = json.loads((store / "specscope.json").read_text())
        with _GlobReaders(store) as readers:
            killed = _kill_at(step, store, log_b, tmp_path)
        assert killed.returncode == -signal.SIGKILL, (step, killed.stderr)
        assert not readers.errors, (step, readers.errors[:3])
        now = json.loads((store / "specscope.json").read_text())
        b_committed = len(now["ingests"]) == len(manifest["ingests"]) + 1
        allowed = rows_a | (rows_b if b_committed else set())
        for read in readers.reads:
            assert len(read) == len(set(read)), f"step {step}: a row read twice"
            assert rows_a <= set(read) <= allowed, f"step {step}: rows of an uncommitted ingest"
        # specscope reads an ingest whole or not at all, meanwhile
        assert set(_specscope_rows(store)) in (rows_a, rows_a | rows_b), step
        outcomes.append(b_committed)
        # the next writer finishes (committed) or forgets (not) what the killed one left
        specscope.ingest(log_b, store=store, year=2026).raise_for_errors()
        for read in (_polars_glob, _duckdb_glob, _specscope_rows):
            got = read(store)
            assert len(got) == len(set(got)) and set(got) == rows_a | rows_b, (step, read)
        assert check_store(store).ok, (step, check_store(store).lines())
        assert not (store / "stage").exists()
    assert False in outcomes and True in outcomes  # kills before and after the commit


def test_killed_at_random_times_while_globs_read(tmp_path):
    """Kills from outside at moments of a bigger ingest (reading, writing, committing)."""
    log = tmp_path / "big.log"
    log.write_text("\n".join(synth.generate_seed(s, ()).text for s in range(40)) + "\n")
    store = tmp_path / "store"
    specscope.ingest(INT4, store=store, year=2026).raise_for_errors()
    rows_a = set(_specscope_rows(store))
    alone = tmp_path / "alone"
    specscope.ingest(log, store=alone, year=2026).raise_for_errors()
    rows_b = set(_specscope_rows(alone))
    command = [sys.executable, "-m", "specscope", "ingest", str(log), "--store", str(store)]
    # Once one kill lands after the commit, the ingest stays committed: later iterations
    # (whose own ingest finds the log already in) may see its rows too.
    first = len(json.loads((store / "specscope.json").read_text())["ingests"])
    for delay in (0.3, 0.8, 1.2, 1.6, 2.0):
        with _GlobReaders(store) as readers:
            proc = subprocess.Popen(
                [*command, "--year", "2026"],
                env=ENV,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
            time.sleep(delay)
            proc.send_signal(signal.SIGKILL)
            proc.wait()
        assert not readers.errors, readers.errors[:3]
        after = len(json.loads((store / "specscope.json").read_text())["ingests"])
        allowed = rows_a | (rows_b if after > first else set())
        for read in readers.reads:
            assert len(read) == len(set(read)) and rows_a <= set(read) <= allowed, delay
    done = subprocess.run([*command, "--year", "2026"], env=ENV, capture_output=True, timeout=300)
    assert done.returncode == 0, done.stderr
    for read in (_polars_glob, _duckdb_glob, _specscope_rows):
        got = read(store)
        assert len(got) == len(set(got)) and set(got) == rows_a | rows_b, read
    assert check_store(store).ok


def test_the_commit_order_and_the_folders_synced(tmp_path, monkeypatch):
    """The manifest is renamed into place (and the store's folder synced) before any data
    file enters a table folder; every folder a file enters is synced after it did."""
    store = tmp_path / "s"
    specscope.ingest(INT4, store=store).raise_for_errors()
    events: list[tuple[str, Path]] = []
    real_move, real_sync = durable.move, durable.sync_dir
    monkeypatch.setattr(durable, "move", lambda a, b: (events.append(("move", b)), real_move(a, b)))
    monkeypatch.setattr(
        durable, "sync_dir", lambda d: (events.append(("sync", Path(d))), real_sync(d))
    )
    specscope.ingest(OTHER, store=store).raise_for_errors()
    moves = [(i, p) for i, (what, p) in enumerate(events) if what == "move"]
    manifest = next(i for i, p in moves if p.name == "specscope.json")
    data = [(i, p) for i, p in moves if p.suffix == ".parquet"]
    assert data and all(i > manifest for i, _ in data)
    assert ("sync", store) in events[manifest:]
    for i, p in data:
        assert ("sync", p.parent) in events[i:], p
        assert "stage" not in p.relative_to(store).parts
    stage_syncs = [p for what, p in events[:manifest] if what == "sync" and "stage" in p.parts]
    assert stage_syncs  # the staged files' folders, before the commit


# -- files that are not what was committed ---------------------------------------------------


@pytest.fixture
def stored(tmp_path):
    store = tmp_path / "s"
    specscope.ingest(INT4, store=store, year=2026).raise_for_errors()
    specscope.ingest(OTHER, store=store, year=2026).raise_for_errors()
    return store


def _spec_file(store: Path) -> Path:
    return specscope.open_store(store).files("spec_decode")[0]


def test_a_copied_data_file_is_ignored_and_named_by_check(cli, stored):
    rows = _specscope_rows(stored)
    original = _spec_file(stored)
    copies = [
        original.with_name("part-copy.parquet"),
        original.with_name(original.name.replace(".parquet", ".1.parquet")),  # a name of ours
    ]
    for c in copies:
        shutil.copy(original, c)
    assert len(_polars_glob(stored)) > len(rows)  # what a glob makes of it
    assert _specscope_rows(stored) == rows
    assert cli("detect", "--store", stored).status == 0
    r = cli("check", "--store", stored)
    assert r.status == ExitStatus.STORE_ERROR
    named = [line for line in r.out.splitlines() if line.startswith("foreign:")]
    assert len(named) == 2
    for c in copies:
        assert any(str(c.relative_to(stored)) in line for line in named)
        assert any(f"a copy of {original.relative_to(stored)}" in line for line in named)
    report = json.loads(cli("check", "--store", stored, "--json").out)
    assert {p["kind"] for p in report["problems"]} == {"foreign"} and not report["ok"]
    # the next writer leaves them (they are not its to remove); still ignored
    assert cli("ingest", _third(stored.parent), "--store", stored).status == 0
    assert all(c.exists() for c in copies)
    assert len(_specscope_rows(stored)) == len(set(_specscope_rows(stored)))


def _flip(p: Path) -> None:
    data = bytearray(p.read_bytes())
    data[len(data) // 3] ^= 0xFF
    p.write_bytes(bytes(data))


DAMAGES = {
    "truncated": lambda p: p.write_bytes(p.read_bytes()[: p.stat().st_size // 2]),
    "bit-flipped": _flip,
    "not-parquet": lambda p: p.write_bytes(b"not parquet at all\n" * 50),
    "emptied": lambda p: p.write_bytes(b""),
}


@pytest.mark.parametrize("damage", DAMAGES.values(), ids=DAMAGES.keys())
def test_a_damaged_data_file_is_one_line_naming_it(cli, stored, damage, tmp_path):
    target = _spec_file(stored)
    damage(target)
    for args in (("detect",), ("advise",), ("report", "--json")):
        r = cli(*args, "--store", stored)
        assert r.status == ExitStatus.STORE_ERROR, (args, r.err)
        line = _error_line(r)
        assert str(target) in line and "damaged" in line and "internal error" not in line
    with pytest.raises(StoreError, match="damaged"):
        specscope.open_store(stored).spec_decode.collect()
    r = cli("check", "--store", stored)
    assert r.status == ExitStatus.STORE_ERROR
    (bad,) = [line for line in r.out.splitlines() if not line[0].isdigit()]
    assert bad.startswith(f"damaged: {target.relative_to(stored)}: ")


@pytest.mark.parametrize("kind", ["schema-swapped", "missing"])
def test_a_swapped_or_missing_file_is_named_not_read_as_nulls(cli, stored, kind):
    target = _spec_file(stored)
    if kind == "missing":
        target.unlink()
    else:  # the same name, the other table's columns
        shutil.copy(specscope.open_store(stored).files("engine_stats")[0], target)
    r = cli("detect", "--store", stored)
    assert r.status == ExitStatus.STORE_ERROR
    assert kind in _error_line(r) and str(target) in r.err
    r = cli("check", "--store", stored)
    said = "holds the columns of engine_stats" if kind != "missing" else "listed in the manifest"
    assert r.status == ExitStatus.STORE_ERROR
    assert f"{kind}: {target.relative_to(stored)}: {said}" in r.out


def test_a_sound_store_checks_clean(cli, stored):
    r = cli("check", "--store", stored)
    assert r.status == 0, r.out
    assert r.out.strip().splitlines()[-1].endswith("all as committed")
    r = cli("check", "--store", stored.parent / "nothing")
    assert r.status == ExitStatus.STORE_ERROR and "no specscope store" in _error_line(r)


def test_a_store_whose_manifest_lists_no_files_still_reads(cli, stored):
    """A store written before the manifest listed files: each ingest owns the files named
    after it, read as before; check says they were checked without checksums; a new ingest
    into it lists its own."""
    rows = _specscope_rows(stored)
    manifest = json.loads((stored / "specscope.json").read_text())
    for ingest in manifest["ingests"]:
        del ingest["files"]
    (stored / "specscope.json").write_text(json.dumps(manifest))
    assert _specscope_rows(stored) == rows
    r = cli("check", "--store", stored)
    assert r.status == 0 and "without a checksum" in r.out, r.out
    copy = _spec_file(stored).with_name("copy.parquet")
    shutil.copy(_spec_file(stored), copy)
    assert _specscope_rows(stored) == rows
    r = cli("check", "--store", stored)
    assert r.status == ExitStatus.STORE_ERROR and f"foreign: {copy.relative_to(stored)}" in r.out
    copy.unlink()
    assert cli("ingest", _third(stored.parent), "--store", stored).status == 0
    latest = json.loads((stored / "specscope.json").read_text())["ingests"][-1]
    assert latest["files"] and len(_specscope_rows(stored)) > len(rows)
    assert cli("check", "--store", stored).status == 0
    stats = specscope.open_store(stored).files("engine_stats")[0]
    shutil.copy(stats, _spec_file(stored))  # into a file of a legacy ingest
    r = cli("detect", "--store", stored)
    assert r.status == ExitStatus.STORE_ERROR and "schema-swapped" in _error_line(r)


# -- a full disk, at every step ------------------------------------------------------------


def _full(*args, **kwargs):
    raise OSError(errno.ENOSPC, "No space left on device")


def _full_when(test):
    """A replacement that fails with ENOSPC when ``test(args)``, else does the real thing."""
    return lambda real: lambda *a, **k: _full() if test(a) else real(*a, **k)


def _ingest_on_full_disk(cli, stored):
    before = _snapshot(stored)
    r = cli("ingest", _third(stored.parent), "--store", stored)
    assert r.status == ExitStatus.STORE_ERROR, r.err
    line = _error_line(r)
    assert "No space left" in line and "nothing of this ingest was committed" in line
    assert _snapshot(stored) == before  # files, bytes and folders


def test_full_disk_at_the_first_write(cli, stored, monkeypatch):
    monkeypatch.setattr(staging, "MEMORY_BYTES", 0)  # the stage in files however small the log
    monkeypatch.setattr(pl.DataFrame, "write_ipc", _full)  # rows on their way, first of all
    _ingest_on_full_disk(cli, stored)


def test_full_disk_at_the_first_data_file(cli, stored, monkeypatch):
    import pyarrow.parquet as pq

    monkeypatch.setattr(pq, "ParquetWriter", _full)
    _ingest_on_full_disk(cli, stored)


def test_full_disk_at_a_later_write(cli, stored, monkeypatch):
    import pyarrow.parquet as pq

    later = _full_when(lambda args: "sources-" in str(args[1]))(pq.write_table)
    monkeypatch.setattr(pq, "write_table", later)  # the last file of the ingest
    _ingest_on_full_disk(cli, stored)


def test_full_disk_when_a_file_is_synced(cli, stored, monkeypatch):
    monkeypatch.setattr(
        durable, "sync_file", _full_when(lambda args: "runs-" in str(args[0]))(durable.sync_file)
    )
    _ingest_on_full_disk(cli, stored)


def test_full_disk_at_the_commit(cli, stored, monkeypatch):
    at_manifest = _full_when(lambda args: Path(args[1]).name == "specscope.json")(os.replace)
    monkeypatch.setattr(os, "replace", at_manifest)
    _ingest_on_full_disk(cli, stored)
    assert not list(stored.glob("specscope.json.tmp"))


def test_full_disk_when_the_table_folders_are_made(cli, stored, monkeypatch):
    real = Path.mkdir

    def mkdir(self, *args, **kwargs):
        if "stage" not in self.parts and self.name.startswith("source_id="):
            _full()
        return real(self, *args, **kwargs)

    monkeypatch.setattr(Path, "mkdir", mkdir)
    _ingest_on_full_disk(cli, stored)


def test_full_disk_after_the_commit_is_finished_by_the_next_write(cli, stored, monkeypatch):
    """Past the commit the ingest is in; a move that fails says so, specscope reads the store
    without it, and the next write moves the rest in."""
    rows = set(_specscope_rows(stored))
    moves = _full_when(lambda args: str(args[1]).endswith(".parquet") and "runs" in str(args[1]))
    monkeypatch.setattr(os, "replace", moves(os.replace))
    log = _third(stored.parent)
    r = cli("ingest", log, "--store", stored)
    assert r.status == ExitStatus.STORE_ERROR
    assert "committed" in _error_line(r) and "the next write moves them in" in r.err
    assert set(_specscope_rows(stored)) == rows
    assert "is committed and its files are still being moved" in cli("check", "--store", stored).out
    monkeypatch.undo()
    assert cli("ingest", log, "--store", stored).status == 0  # moves it in, then: unchanged
    after = _specscope_rows(stored)
    assert len(after) == len(set(after)) > len(rows)
    assert set(_polars_glob(stored)) == set(after) and check_store(stored).ok


# -- writers side by side; the lock: a lease ---------------------------------------------------

# A writer at work: writes a few rows, says so, then waits for a file to appear (a writer
# stuck on a server that answers nothing), then commits.
_HOLDER = """
import sys, time
from pathlib import Path
import polars as pl
from specscope.schema import store_columns
from specscope.store.reading import Store
from specscope.errors import SpecscopeError
store, go, busy = Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3] == "busy"

def slowly():  # a long pull: a part now and then, until told to stop
    n = 0
    while not go.exists():
        time.sleep(0.1)
        n += 1
        yield store_columns(pl.DataFrame({"line": [n]}), "engine_stats")

try:
    with Store(store).writer() as w:
        part = store_columns(pl.DataFrame({"line": [1, 2, 3]}), "spec_decode")
        w.add_parts("spec_decode", "held", [part])
        print("holding", flush=True)
        if busy:
            w.add_parts("engine_stats", "held", slowly())
        while not go.exists():  # stuck: no progress at all
            time.sleep(0.1)
except SpecscopeError as exc:
    print(exc.one_line(), file=sys.stderr)
    sys.exit(int(exc.exit_status))
"""

# Holds the store's lock itself, as a writer in the middle of its commit does: beating
# its heartbeat ("busy") or not ("stuck"), until a file appears.
_LOCKER = """
import sys, time
from pathlib import Path
from specscope.store import locking
store, go, busy = Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3] == "busy"
store.mkdir(parents=True, exist_ok=True)
lease = locking.acquire(store, wait_s=5, lease_s=locking.lease_seconds(), what="commit")
print("holding", flush=True)
while not go.exists():
    time.sleep(0.1)
    if busy:
        lease.beat(now=True)
print("held" if lease.held() else "lost", flush=True)
lease.release()
"""


def _holder(
    tmp_path: Path,
    store: Path,
    *,
    beat: bool,
    env: dict[str, str] | None = None,
    script: str = _HOLDER,
):
    path = tmp_path / "holder.py"
    path.write_text(script)
    go = tmp_path / "go"
    proc = subprocess.Popen(
        [sys.executable, str(path), str(store), str(go), "busy" if beat else "stuck"],
        env={**ENV, **(env or {})},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout.readline().strip() == "holding", proc.stderr.read()
    return proc, go


def test_a_writer_at_work_blocks_nobody(cli, tmp_path, monkeypatch):
    """Writers write side by side: the lock is held to commit only, so a pull or a long
    ingest does not keep another writer out for its whole length."""
    store = tmp_path / "s"
    proc, go = _holder(tmp_path, store, beat=True)
    try:
        monkeypatch.setattr(writing, "_LOCK_WAIT_S", 1.0)
        started = time.monotonic()
        r = cli("ingest", INT4, "--store", store)
        assert r.status == 0, r.err
        assert time.monotonic() - started < 30
        assert {s for s, *_ in _specscope_rows(store)} == {"s54e95cd2ea"}  # not the other's yet
        assert [p.name for p in (store / "stage").iterdir()]  # the other's stage is kept
    finally:
        go.touch()
        _, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    assert {s for s, *_ in _specscope_rows(store)} == {"held", "s54e95cd2ea"}
    assert len(specscope.open_store(store).sources.collect()) == 1  # only the log has a row
    assert check_store(store).ok and not (store / "stage").exists()


def test_two_writers_of_one_source_commit_one_and_refuse_the_other(cli, tmp_path):
    """Both read the same state of the source: the later commit would undo the earlier
    (its runs, its watermark), so it commits nothing and says to run it again."""
    store = tmp_path / "s"
    proc, go = _holder(tmp_path, store, beat=True)
    try:
        with Store(store).writer() as w:
            part = store_columns(pl.DataFrame({"line": [7]}), "spec_decode")
            w.add_parts("spec_decode", "held", [part])
    finally:
        go.touch()
        _, err = proc.communicate(timeout=60)
    assert proc.returncode == ExitStatus.STORE_ERROR
    assert "another writer committed source held while this one wrote it" in err
    assert [line for s, line, _ in _specscope_rows(store) if s == "held"] == [7]
    assert check_store(store).ok and not (store / "stage").exists()


def test_a_lock_holder_blocks_a_commit_until_the_wait_runs_out(cli, tmp_path, monkeypatch):
    store = tmp_path / "s"
    proc, go = _holder(tmp_path, store, beat=True, script=_LOCKER)
    try:
        monkeypatch.setattr(writing, "_LOCK_WAIT_S", 1.0)
        started = time.monotonic()
        r = cli("ingest", INT4, "--store", store)
        waited = time.monotonic() - started
        assert r.status == ExitStatus.STORE_ERROR
        assert f"pid {proc.pid} on" in _error_line(r) and "another specscope process" in r.err
        assert waited >= 1.0
    finally:
        go.touch()
        out, _ = proc.communicate(timeout=60)
    assert out.split() == ["held"]
    assert not (store / "specscope.json").exists() and not (store / "stage").exists()


def test_a_lock_holder_that_beats_keeps_its_lease(cli, tmp_path, monkeypatch):
    store = tmp_path / "s"
    lease = {"SPECSCOPE_LOCK_LEASE_S": "1.5"}
    proc, go = _holder(tmp_path, store, beat=True, env=lease, script=_LOCKER)
    try:
        monkeypatch.setattr(writing, "_LOCK_WAIT_S", 4.0)  # past the lease: its heartbeat holds
        r = cli("ingest", INT4, "--store", store, env=lease)
        assert r.status == ExitStatus.STORE_ERROR and "another specscope process" in r.err
    finally:
        go.touch()
        out, _ = proc.communicate(timeout=60)
    assert out.split() == ["held"]


def test_a_hung_lock_holder_loses_the_lock_after_its_lease(cli, tmp_path, monkeypatch):
    store = tmp_path / "s"
    lease = {"SPECSCOPE_LOCK_LEASE_S": "1"}
    proc, go = _holder(tmp_path, store, beat=False, env=lease, script=_LOCKER)
    try:
        monkeypatch.setattr(writing, "_LOCK_WAIT_S", 1.5)
        started = time.monotonic()
        r = cli("ingest", INT4, "--store", store, env=lease)
        assert r.status == 0, r.err
        assert time.monotonic() - started >= 1.5
        record = json.loads((store / ".lock").read_text())
        assert record["took_over_from"]["pid"] == proc.pid
    finally:
        go.touch()
        out, _ = proc.communicate(timeout=60)
    assert out.split() == ["lost"]
    assert {s for s, *_ in _specscope_rows(store)} == {"s54e95cd2ea"}


def test_a_hung_writer_loses_its_stage_after_its_lease_and_commits_nothing(cli, tmp_path):
    store = tmp_path / "s"
    lease = {"SPECSCOPE_LOCK_LEASE_S": "1"}
    proc, go = _holder(tmp_path, store, beat=False, env=lease)
    try:
        time.sleep(1.5)  # past its lease, with no heartbeat
        r = cli("ingest", INT4, "--store", store, env=lease)
        assert r.status == 0, r.err
    finally:
        go.touch()
        _, err = proc.communicate(timeout=60)
    assert proc.returncode == ExitStatus.STORE_ERROR and "lost its stage" in err
    assert {s for s, *_ in _specscope_rows(store)} == {"s54e95cd2ea"}  # nothing of the hung one
    assert check_store(store).ok and not (store / "stage").exists()


def test_a_killed_writer_blocks_nobody(cli, tmp_path, monkeypatch):
    store = tmp_path / "s"
    proc, _ = _holder(tmp_path, store, beat=False)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert list((store / "stage").glob("owner-*.json"))  # its claim stays
    monkeypatch.setattr(writing, "_LOCK_WAIT_S", 30.0)
    started = time.monotonic()
    assert cli("ingest", INT4, "--store", store).status == 0
    assert time.monotonic() - started < 10  # its pid is gone: its stage is nobody's
    assert {s for s, *_ in _specscope_rows(store)} == {"s54e95cd2ea"}
    assert not (store / "stage").exists()


def test_a_killed_lock_holder_blocks_nobody(cli, tmp_path, monkeypatch):
    store = tmp_path / "s"
    proc, _ = _holder(tmp_path, store, beat=False, script=_LOCKER)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert locking.read_holder(store / ".lock").pid == proc.pid  # its record stays
    monkeypatch.setattr(writing, "_LOCK_WAIT_S", 30.0)
    started = time.monotonic()
    assert cli("ingest", INT4, "--store", store).status == 0
    assert time.monotonic() - started < 10  # the kernel let go of its flock
    assert {s for s, *_ in _specscope_rows(store)} == {"s54e95cd2ea"}


def _dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def test_a_stale_lock_of_a_dead_pid_is_taken_over_without_flock(cli, tmp_path, monkeypatch):
    """Where there is no fcntl the lock is a file made with O_EXCL, which a dead writer
    leaves behind: it names the dead pid, and the next writer takes it over."""
    monkeypatch.setattr(locking, "FLOCK", None)
    monkeypatch.setattr(writing, "_LOCK_WAIT_S", 0.5)
    store = tmp_path / "s"
    assert cli("ingest", INT4, "--store", store).status == 0
    assert not (store / ".lock.held").exists()  # released
    held = store / ".lock.held"
    record = {"pid": _dead_pid(), "host": socket.gethostname(), "token": "x"}
    held.write_text(json.dumps({**record, "heartbeat": time.time()}))  # fresh, but dead
    assert cli("ingest", OTHER, "--store", store).status == 0
    assert not held.exists()
    # a live holder's record, fresh: the wait runs out
    held.write_text(json.dumps({**record, "pid": os.getppid(), "heartbeat": time.time()}))
    r = cli("ingest", _third(tmp_path), "--store", store)
    assert r.status == ExitStatus.STORE_ERROR and "another specscope process" in r.err
    # the same holder, silent for longer than the lease: taken over
    held.write_text(json.dumps({**record, "pid": os.getppid(), "heartbeat": time.time() - 700}))
    r = cli("ingest", _third(tmp_path), "--store", store)
    assert r.status == 0, r.err
    assert len(specscope.open_store(store).sources.collect()) == 3


def test_specscope_imports_and_writes_where_there_is_no_fcntl(tmp_path):
    code = (
        "import sys; sys.modules['fcntl'] = None\n"
        "import specscope\n"
        "from specscope.store import locking\n"
        "assert locking.FLOCK is None\n"
        f"specscope.ingest({str(INT4)!r}, store={str(tmp_path / 's')!r}).raise_for_errors()\n"
        f"print(len(specscope.open_store({str(tmp_path / 's')!r}).spec_decode.collect()))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], env=ENV, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "21"
    assert not (tmp_path / "s" / ".lock.held").exists()


def test_a_lease_that_is_not_a_number_is_a_usage_error(cli, tmp_path):
    r = cli("ingest", INT4, "--store", tmp_path / "s", env={"SPECSCOPE_LOCK_LEASE_S": "soon"})
    assert r.status == ExitStatus.USAGE and "SPECSCOPE_LOCK_LEASE_S" in _error_line(r)


def test_a_writer_ending_between_another_ones_mkdir_and_claim(tmp_path, monkeypatch):
    """The race the S3 two-writer test met once in four CI runs: writer A, which made the
    (local staging) folder and committed nothing there, ends and removes the empty
    ``stage/`` and the folder itself between writer B's mkdir and B's claim. B makes them
    again instead of failing with 'No such file or directory'."""
    root = tmp_path / "store"
    stage = root / "stage"
    real_open = os.open
    removed: list[str] = []

    def open_after_a_writer_ended(path, flags, mode=0o777):
        if not removed:
            removed.append(str(path))
            os.rmdir(stage)  # what writer A's end does when it finds them empty
            os.rmdir(root)
        return real_open(path, flags, mode)

    monkeypatch.setattr(locking.os, "open", open_after_a_writer_ended)
    owner = locking.own_stage(stage, "20261125T000000abcdef", 60.0)
    try:
        assert removed and (stage / "owner-20261125T000000abcdef.json").exists()
    finally:
        owner.release()


def test_a_writer_that_made_the_folder_leaves_another_writers_lock(tmp_path):
    """A writer that made the store and committed nothing removes what it made, but not
    while another writer's claim is in ``stage/``: the lock files would be that one's."""
    root = tmp_path / "store"
    stage = root / "stage"
    owner = locking.own_stage(stage, "20261125T000000abcdef", 60.0)
    (root / ".lock").write_text("{}")
    try:
        writing._unmake_if_empty(root)
        assert (root / ".lock").exists() and stage.is_dir()
    finally:
        owner.release()
    writing._unmake_if_empty(root)
    assert not root.exists()
