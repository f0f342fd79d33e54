"""Compaction (``specscope compact``, ``store.compaction``): a folder's many small files
merged into few as one commit. Every reader reads the same rows in the same order before,
during and after it; a compactor killed at any step leaves a store readers read as before
and the next writer recovers; the files it replaced go a lease later, with their entries
in the manifest."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import polars as pl
import pytest
from polars.testing import assert_frame_equal

import specscope
from specscope.store import writing
from specscope.store.check import check_store
from specscope.store.compaction import compact
from specscope.store.layout import read_manifest
from tests.helpers import KILLED_AT_STEP, ROOT
from tests.prom_servers import Misbehaving

START = datetime(2026, 11, 24, 12, 0, tzinfo=UTC)
PULLS = 12
ENV = {**os.environ, "PYTHONPATH": str(ROOT)}


def pulls(server: Misbehaving, store: Path | str, count: int, first: int = 0) -> int:
    """``count`` pulls a minute apart, as cron runs them: the spec-decode rows they added."""
    added = 0
    for i in range(first, first + count):
        at = START + timedelta(minutes=i)
        report = specscope.pull(server.url, store=store, since="1m", retries=0, now=lambda a=at: a)
        added += report.added.get("spec_decode", 0)
    return added


def table_rows(store: Path | str, table: str) -> pl.DataFrame:
    return specscope.open_store(store).table(table).collect()


def files(store: Path, table: str) -> list[Path]:
    return sorted((store / table).rglob("*.parquet"))


def state(store: Path | str) -> dict[str, pl.DataFrame]:
    """What a reader reads: every table that compaction rewrites, in order."""
    return {t: table_rows(store, t) for t in ("spec_decode", "run_sums", "runs")}


def same_state(got: dict[str, pl.DataFrame], want: dict[str, pl.DataFrame]) -> None:
    for table, frame in want.items():
        assert_frame_equal(got[table], frame, check_exact=True)


@pytest.fixture(scope="module")
def scattered(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, Misbehaving]]:
    """A store of PULLS pulls of one server, a file a pull and table (as on object storage,
    where a file never grows)."""
    store = tmp_path_factory.mktemp("compaction") / "s"
    server = Misbehaving("matrix")
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(writing, "GROW_ROWS", 0)
        assert pulls(server, store, PULLS) > 0
    try:
        yield store, server
    finally:
        server.stop()


def test_compaction_keeps_every_row_in_order_in_one_file_a_folder(scattered, tmp_path):
    base, server = scattered
    store = tmp_path / "s"
    shutil.copytree(base, store)
    before = state(store)
    assert len(files(store, "spec_decode")) >= PULLS - 1
    assert specscope.open_store(store).sums_cover_rows()
    done = compact(store)
    assert done.ingest is not None and done.read["spec_decode"] >= PULLS - 1
    assert done.written == {"spec_decode": 1, "run_sums": 1}
    same_state(state(store), before)
    live = specscope.open_store(store)
    assert [p.name for p in live.files("spec_decode")] == [f"part-{done.ingest}.parquet"]
    assert live.sums_cover_rows()
    assert check_store(store).ok, check_store(store).lines()
    # Nothing more to do: a second compaction commits nothing.
    ingests = len(read_manifest(store)["ingests"])
    assert compact(store).ingest is None
    assert len(read_manifest(store)["ingests"]) == ingests
    # Pulls go on after it: the compacted file takes their rows as any file would.
    added = pulls(server, store, 2, first=PULLS)
    rows = table_rows(store, "spec_decode")
    assert rows.height == before["spec_decode"].height + added
    assert rows.select("run_id", "engine", "ts").is_unique().all()
    assert check_store(store).ok


def test_replaced_files_go_a_lease_later_with_their_entries(scattered, tmp_path, monkeypatch):
    base, _ = scattered
    store = tmp_path / "s"
    shutil.copytree(base, store)
    before = state(store)
    size = len((store / "specscope.json").read_bytes())
    old = files(store, "spec_decode")
    compact(store)
    # Within the lease the replaced files stay, for readers of the manifest before.
    assert set(old) <= set(files(store, "spec_decode"))
    monkeypatch.setenv("SPECSCOPE_LOCK_LEASE_S", "0.001")
    done = compact(store)
    assert done.ingest is None and done.deleted >= 2 * (PULLS - 1)
    assert not set(old) & set(files(store, "spec_decode"))
    same_state(state(store), before)
    # A glob now reads each row once, and the manifest lists only files that are there.
    glob = pl.scan_parquet(str(store / "spec_decode" / "**" / "*.parquet")).collect()
    assert glob.height == before["spec_decode"].height
    manifest = read_manifest(store)
    listed = [f["path"] for i in manifest["ingests"] for f in i["files"]]
    assert all((store / p).is_file() for p in listed)
    assert not any(i.get("replaces") for i in manifest["ingests"])
    assert len((store / "specscope.json").read_bytes()) < size
    assert check_store(store).ok, check_store(store).lines()


def test_a_reader_during_compaction_reads_every_row_once(scattered, tmp_path):
    base, _ = scattered
    store = tmp_path / "s"
    shutil.copytree(base, store)
    want = state(store)
    seen: list[int] = []
    errors: list[str] = []
    stop = threading.Event()

    def read() -> None:
        while not stop.is_set():
            try:
                got = state(store)
                same_state(got, want)
                seen.append(got["spec_decode"].height)
            except Exception as exc:  # any error is a finding
                errors.append(f"{type(exc).__name__}: {exc}")

    def compact_store() -> None:
        proc = subprocess.run(
            [sys.executable, "-m", "specscope", "compact", "--store", str(store)],
            env={**ENV, "SPECSCOPE_LOCK_LEASE_S": "0.5"},
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert proc.returncode == 0, proc.stderr

    reader = threading.Thread(target=read)
    reader.start()
    try:
        compact_store()
    finally:
        stop.set()
        reader.join()
    assert not errors, errors[:3]
    assert len(seen) >= 2  # it read during the compaction, not only before it
    # The lease over, a second run deletes what the first replaced. Not under a reader: one
    # that read the manifest a lease ago is promised nothing, and a read can outlast a lease
    # of half a second on a loaded machine (as 6a51f2d found for S3).
    time.sleep(0.6)
    compact_store()
    same_state(state(store), want)


# Kills itself (SIGKILL) at the Nth durable step (a file or folder synced, a rename), then
# compacts; prints the steps it took when it was not killed.
_KILLER = (
    KILLED_AT_STEP
    + """
from specscope.store.compaction import compact
compact(sys.argv[2])
print(json.dumps(seen))
"""
)


def test_a_compactor_killed_at_any_step_leaves_the_rows_as_they_were(scattered, tmp_path):
    base, _ = scattered
    script = tmp_path / "killer.py"
    script.write_text(_KILLER)
    want = state(base)

    def run(step: int, store: Path) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, str(script), str(step), str(store)],
            env=ENV,
            capture_output=True,
            text=True,
            timeout=120,
        )

    dry = tmp_path / "dry"
    shutil.copytree(base, dry)
    whole = run(0, dry)
    assert whole.returncode == 0, whole.stderr
    steps = json.loads(whole.stdout.splitlines()[-1])
    moves = [n for n, step in enumerate(steps, 1) if step == "move"]
    # The first step, the last, and each rename with the steps either side of it.
    chosen = sorted({1, len(steps)} | {n + d for n in moves[:3] + moves[-3:] for d in (-1, 0, 1)})
    committed = []
    for step in chosen:
        store = tmp_path / f"killed-{step}"
        shutil.copytree(base, store)
        ingests = len(read_manifest(store)["ingests"])
        killed = run(step, store)
        assert killed.returncode == -signal.SIGKILL, (step, killed.stderr)
        same_state(state(store), want)  # the rows as before, whatever was left half done
        committed.append(len(read_manifest(store)["ingests"]) > ingests)
        compact(store)  # recovers what the killed one left, then compacts what is left
        same_state(state(store), want)
        assert len(specscope.open_store(store).files("spec_decode")) == 1, step
        assert check_store(store).ok, (step, check_store(store).lines())
        assert not (store / "stage").exists(), step
    assert True in committed and False in committed


def test_a_pull_of_a_source_being_compacted_commits_nothing_and_says_so(scattered, tmp_path):
    """The pull grows the newest file while the compaction replaces it: whichever commits
    second would undo the first, so it commits nothing (exit 9), as two writers of one
    source do."""
    base, server = scattered
    store = tmp_path / "s"
    shutil.copytree(base, store)
    want = state(store)
    from specscope.errors import StoreError
    from specscope.store.reading import Store

    original = writing.StoreWriter.commit

    def pull_first(self: writing.StoreWriter) -> None:
        if self.replaces:  # the compaction, about to commit: a pull commits before it
            pulls(server, store, 1, first=PULLS)
        original(self)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(writing.StoreWriter, "commit", pull_first)
        with pytest.raises(StoreError, match="another writer committed source"):
            compact(store)
    rows = table_rows(store, "spec_decode")
    assert rows.height > want["spec_decode"].height  # the pull's rows, once
    assert rows.select("run_id", "engine", "ts").is_unique().all()
    assert len(Store(store).files("spec_decode")) > 1
    compact(store)
    assert_frame_equal(table_rows(store, "spec_decode"), rows, check_exact=True)
