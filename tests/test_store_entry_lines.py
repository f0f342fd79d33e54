"""Each manifest entry keeps the range of lines its file holds (``layout.FileEntry.lines``),
taken from the file's footer when it is committed: readers put a source's files in line
order from the manifest alone (a fleet's month has thousands of files, and a footer read
each cost seconds). A manifest written before entries kept them orders by the footers as
before, to the same rows; an entry whose lines are not its file's is damaged."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import polars as pl
import pyarrow.parquet as pq
import pytest
from polars.testing import assert_frame_equal

import specscope
from specscope.store import order
from specscope.store.check import check_store
from specscope.store.layout import LINES, MANIFEST
from tests.test_store_line_order import _generated, _redated


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A log whose days go back (its files' lines interleave) and one whose days go forward."""
    work = tmp_path_factory.mktemp("lines")
    back, forward = work / "back.log", work / "forward.log"
    back.write_text(
        "\n".join(_redated(_generated(back, 4, "80K", 6), ["08-27", "08-25", "08-26", "08-25"]))
        + "\n"
    )
    forward.write_text(
        "\n".join(_redated(_generated(forward, 5, runs=1), ["08-24", "08-25", "08-26"])) + "\n"
    )
    specscope.ingest([str(back), str(forward)], store=work / "s", year=2026).raise_for_errors()
    return work / "s"


def _entries(store: Path) -> list[dict[str, Any]]:
    manifest = json.loads((store / MANIFEST).read_text())
    return [f for i in manifest["ingests"] for f in i["files"]]


def _read(store: Path) -> dict[str, Any]:
    s = specscope.open_store(store)
    return {
        "files": {t: s.files(t) for t in ("spec_decode", "engine_stats")},
        "shuffled": {t: s.shuffled(t) for t in ("spec_decode", "engine_stats")},
        "spec": s.spec_decode.collect(),
        "stats": s.engine_stats.collect(),
    }


def _footers_read(monkeypatch: pytest.MonkeyPatch) -> list[Path]:
    read: list[Path] = []
    real = order._footer_range
    order._ranges.clear()
    monkeypatch.setattr(order, "_footer_range", lambda p: read.append(p) or real(p))
    return read


def test_each_entry_keeps_the_lines_its_footer_bounds(store):
    entries = _entries(store)
    dated = [e for e in entries if e["path"].startswith(("spec_decode/", "engine_stats/"))]
    assert len({e["path"].split("/")[1] for e in dated}) >= 4  # days' folders
    for e in dated:
        path = store / e["path"]
        lines = pq.read_table(path, columns=["line"])["line"]
        assert e[LINES] == [pl.Series(lines).min(), pl.Series(lines).max()], e["path"]
    runs = [e for e in entries if e["path"].startswith("runs/")]
    assert runs and all(e[LINES] is None for e in runs)  # runs hold no line


def test_the_order_comes_from_the_manifest_and_old_manifests_from_the_footers(
    store, tmp_path, monkeypatch
):
    read = _footers_read(monkeypatch)
    new = _read(store)
    assert read == []  # no footer opened to order the files
    # The log whose days go back interleaves; the one going forward does not.
    assert len(new["shuffled"]["spec_decode"]) == 1
    for (source,), rows in new["spec"].group_by("source_id"):
        assert rows["line"].is_sorted(), source
    # The same store as a manifest written before entries kept lines: the footers say.
    old = tmp_path / "old"
    shutil.copytree(store, old)
    manifest = json.loads((old / MANIFEST).read_text())
    for ingest in manifest["ingests"]:
        for f in ingest["files"]:
            del f[LINES]
    (old / MANIFEST).write_text(json.dumps(manifest))
    was = _read(old)
    assert len(read) >= 2 * 4  # a footer a file of the sources over several days
    assert was["shuffled"] == new["shuffled"]
    assert [p.relative_to(old) for p in was["files"]["spec_decode"]] == [
        p.relative_to(store) for p in new["files"]["spec_decode"]
    ]
    assert_frame_equal(was["spec"], new["spec"], check_exact=True)
    assert_frame_equal(was["stats"], new["stats"], check_exact=True)
    assert check_store(old).ok, check_store(old).lines()


def test_an_entry_whose_lines_are_not_its_files_is_damaged(store, tmp_path):
    copy = tmp_path / "s"
    shutil.copytree(store, copy)
    manifest = json.loads((copy / MANIFEST).read_text())
    edited = next(
        f for i in manifest["ingests"] for f in i["files"] if f["path"].startswith("spec_decode/")
    )
    edited[LINES] = [edited[LINES][0], edited[LINES][1] + 1]
    (copy / MANIFEST).write_text(json.dumps(manifest))
    report = check_store(copy)
    assert not report.ok
    (problem,) = report.problems
    assert problem.kind == "damaged" and "the manifest says" in problem.detail
    assert problem.path == copy / edited["path"]
    with pytest.raises(specscope.StoreError, match="damaged"):
        specscope.open_store(copy).spec_decode.collect()
