"""Bad input: one line naming the file, a distinct exit status, nothing stored lost."""

from __future__ import annotations

import gzip
import json
import os

import pytest

import specscope
from specscope.errors import ExitStatus

from .helpers import SEEDS

INT4 = SEEDS / "003_83783f5568908b19.txt"


def _snapshot(store):
    """Every file of the store but the lock, whose lease a writer renews as it works."""
    return {
        p.relative_to(store): p.read_bytes()
        for p in store.rglob("*")
        if p.is_file() and not p.name.startswith(".lock")
    }


@pytest.fixture
def stored(cli, tmp_path):
    store = tmp_path / "store"
    assert cli("ingest", INT4, "--store", store).status == 0
    return store


def _one_error_line(result, name):
    lines = result.err.strip().splitlines()
    assert len(lines) == 1, result.err
    assert name in lines[0]
    assert "Traceback" not in result.err + result.out
    return lines[0]


CASES = {
    "missing": (ExitStatus.INPUT_MISSING, "no such file"),
    "directory": (ExitStatus.INPUT_NOT_A_FILE, "is a directory"),
    "empty": (ExitStatus.INPUT_EMPTY, "empty"),
    "binary": (ExitStatus.INPUT_BINARY, "binary"),
    "bad-gzip": (ExitStatus.INPUT_BINARY, "gzip"),
    "no-telemetry": (ExitStatus.NO_TELEMETRY, "no speculative-decoding telemetry"),
}


def _make(kind, tmp_path):
    path = tmp_path / f"{kind}.log"
    if kind == "directory":
        path.mkdir()
    elif kind == "empty":
        path.write_bytes(b"")
    elif kind == "binary":
        path.write_bytes(bytes(range(256)) * 64)
    elif kind == "bad-gzip":
        path.write_bytes(b"\x1f\x8b\x08\x00" + os.urandom(200))
    elif kind == "no-telemetry":
        # A real issue's prose, without the line naming its crash (a crash alone is stored
        # and judged: tests/test_crash_paste.py).
        text = (SEEDS / "000_cd87a0961b7b2059.txt").read_text(encoding="utf-8").splitlines()
        path.write_text("\n".join(s for s in text if "size of tensor" not in s) + "\n")
    return path


@pytest.mark.parametrize("kind", CASES)
def test_bad_input_is_one_line_and_keeps_the_store(kind, cli, stored, tmp_path):
    status, words = CASES[kind]
    before = _snapshot(stored)
    path = _make(kind, tmp_path)
    r = cli("ingest", path, "--store", stored)
    assert r.status == status
    line = _one_error_line(r, path.name)
    assert words in line
    assert _snapshot(stored) == before


def test_exit_statuses_are_distinct():
    values = [s.value for s in ExitStatus]
    assert len(values) == len(set(values))


def test_permission_denied(cli, stored, tmp_path):
    if os.geteuid() == 0:
        pytest.skip("root reads every file; permission denied cannot happen here")
    path = tmp_path / "secret.log"
    path.write_bytes(INT4.read_bytes())
    path.chmod(0)
    r = cli("ingest", path, "--store", stored)
    assert r.status == ExitStatus.INPUT_UNREADABLE
    assert "permission denied" in _one_error_line(r, "secret.log")


def test_good_and_bad_together_store_the_good_one(cli, tmp_path):
    store = tmp_path / "store"
    r = cli("ingest", tmp_path / "nope.log", INT4, "--store", store)
    assert r.status == ExitStatus.INPUT_MISSING
    assert "found 21 spec-decode records" in r.out
    assert specscope.open_store(store).spec_decode.collect().height == 21


def test_truncated_gzip_keeps_what_came_before(cli, tmp_path):
    data = gzip.compress(INT4.read_bytes())
    path = tmp_path / "cut.log.gz"
    path.write_bytes(data[: len(data) // 3])
    r = cli("ingest", path, "--store", tmp_path / "s", "--json")
    assert r.status == 0
    (source,) = json.loads(r.out)["sources"]
    assert 0 < source["found"]["spec_decode"] < 21
    assert any("cut off" in note for note in source["notes"])


def test_partial_records_are_reported_with_line_numbers(cli, tmp_path):
    text = INT4.read_text(encoding="utf-8").splitlines()
    # cut two records before their counts, as a paste cut off mid-line would
    cuts = [i for i, line in enumerate(text) if "Drafted: 1692" in line][:2]
    for i in cuts:
        text[i] = text[i].split("Accepted: 0 tokens")[0]
    path = tmp_path / "cut.log"
    path.write_text("\n".join(text) + "\n", encoding="utf-8")
    r = cli("ingest", path, "--store", tmp_path / "s")
    assert r.status == 0
    # Cut after a whole value: what they printed is kept, partial, and the report says where.
    assert "found 21 spec-decode records" in r.out
    assert "skipped 0 lines" in r.out
    lines = f"line {cuts[0] + 1}, {cuts[1] + 1}"
    assert f"2 records kept with a problem (their `problems` column; {lines})" in r.out
    assert "cut off after 'Drafted throughput'" in r.out
    # ... and inside a value, the record is reported skipped, with what it lacks.
    for i in cuts:
        text[i] = text[i].split("Drafted throughput: 169")[0] + "Drafted throughput: 16"
    path.write_text("\n".join(text) + "\n", encoding="utf-8")
    r = cli("ingest", path, "--store", tmp_path / "s2")
    assert r.status == 0
    assert "found 19 spec-decode records" in r.out and "skipped 2 lines" in r.out
    assert f"line {cuts[0] + 1}, {cuts[1] + 1}" in r.out
    assert "'Accepted'" in r.out or "'Drafted'" in r.out


def test_newer_store_schema_is_refused_untouched(cli, stored):
    manifest = stored / "specscope.json"
    data = json.loads(manifest.read_text())
    data["schema_version"] = 99
    manifest.write_text(json.dumps(data))
    before = _snapshot(stored)
    r = cli("ingest", INT4, "--store", stored)
    assert r.status == ExitStatus.STORE_ERROR
    assert "newer" in _one_error_line(r, str(stored))
    assert _snapshot(stored) == before
    r = cli("runs", "--store", stored)
    assert r.status == ExitStatus.STORE_ERROR


def test_uncommitted_files_of_a_killed_ingest_are_ignored_and_removed(cli, stored):
    spec = stored / "spec_decode"
    part = next(spec.rglob("*.parquet"))
    orphan = part.with_name("part-20990101T000000abcdef.parquet")
    orphan.write_bytes(part.read_bytes())
    assert specscope.open_store(stored).spec_decode.collect().height == 21
    assert cli("ingest", SEEDS / "002_2dcac71f91935498.txt", "--store", stored).status == 0
    assert not orphan.exists()
    assert specscope.open_store(stored).spec_decode.collect().height == 21 + 16


def test_internal_errors_are_one_line(cli, monkeypatch, tmp_path):
    def boom(*args, **kwargs):
        raise RuntimeError("synthetic failure")

    monkeypatch.setattr("specscope.logs.ingest.ingest", boom)  # the CLI imports it when run
    r = cli("ingest", INT4, "--store", tmp_path / "s")
    assert r.status == ExitStatus.ERROR
    assert "internal error" in _one_error_line(r, "synthetic failure")


@pytest.mark.parametrize(
    "args",
    [
        ("detect",),
        ("advise",),
        ("runs",),
        ("compare", "a", "b"),
        ("report", "--out", "r.html"),
    ],
)
def test_reading_commands_refuse_a_directory_without_a_store(cli, tmp_path, args):
    r = cli(*args, "--store", tmp_path / "mistyped")
    assert r.status == ExitStatus.STORE_ERROR, r.out
    assert r.err.count("\n") == 1 and "no specscope store here" in r.err
    assert "no findings" not in r.out


def test_report_to_an_unknown_kind_of_file_is_a_usage_error(cli, tmp_path):
    store = tmp_path / "s"
    assert cli("ingest", INT4, "--store", store).status == ExitStatus.SUCCESS
    r = cli("report", "--store", store, "--out", tmp_path / "r.pdf")
    assert r.status == ExitStatus.USAGE
    assert r.err.count("\n") == 1 and "r.pdf" in r.err
    assert not (tmp_path / "r.pdf").exists()
