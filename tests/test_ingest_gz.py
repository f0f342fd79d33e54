"""A ``.gz`` log is inflated once (issue 17): the compiled core hashes its content as it
inflates it to read it, and ingest tells a log already in the store (the same file, the
same text under another name, a log that grew) before it reads one, by the file's digest
and the content's first 64 KiB, inflating in Python only as far as a stored text its head
may start."""

from __future__ import annotations

import gzip
import hashlib
from collections.abc import Iterator
from pathlib import Path

import polars as pl
import pytest

import specscope
from specscope.logs import core, ingest
from specscope.logs.source import Source
from specscope.store.reading import Store

from .loglines import spec, stats

# Several MB of text: more than the few chunks Python inflates for the head, the encoding
# and the container stamps.
LINES = [x for i in range(1, 12_000) for x in (stats(i), spec(i, 100, [70, 40]))]
TEXT = ("\n".join(LINES) + "\n").encode()


@pytest.fixture
def inflated(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The bytes of gzip content Python inflates (``Source._chunks`` of a .gz)."""
    counts: list[int] = []
    chunks = Source._chunks

    def counted(self: Source) -> Iterator[bytes]:
        gz = self._data is None and Path(self.path).read_bytes()[:2] == b"\x1f\x8b"
        for chunk in chunks(self):
            if gz:
                counts.append(len(chunk))
            yield chunk

    monkeypatch.setattr(Source, "_chunks", counted)
    return counts


def _row(store: Path) -> dict[str, object]:
    (row,) = specscope.open_store(store).sources.collect().to_dicts()
    return row


def _spec(store: Path) -> pl.DataFrame:
    rows = specscope.open_store(store).spec_decode.collect()
    return rows.drop("source", "source_id", "run_id", "ingest_id", strict=False).sort("line")


def test_a_gz_is_inflated_by_the_core_alone(tmp_path: Path, inflated: list[int]) -> None:
    assert core.available()
    gz = tmp_path / "server.log.gz"
    gz.write_bytes(gzip.compress(TEXT, 1))
    report = specscope.ingest(gz, store=tmp_path / "s", year=2026)
    report.raise_for_errors()
    assert report.sources[0].status == "new"
    assert report.sources[0].found["spec_decode"] == 11_999
    # The head (64 KiB), the encoding and the container stamps (1 MiB each): at most a
    # chunk of 1 MiB each; the rest was inflated by the core, which hashed it.
    assert len(TEXT) > 5 << 20
    assert sum(inflated) <= 3 << 20
    row = _row(tmp_path / "s")
    assert row["content_sha256"] == hashlib.sha256(TEXT).hexdigest()
    assert row["content_size"] == len(TEXT)
    assert row["head_sha256"] == hashlib.sha256(TEXT[:65536]).hexdigest()
    assert row["sha256"] == hashlib.sha256(gz.read_bytes()).hexdigest()
    # The same digests as a plain file of the text is stored with, the same rows.
    plain = tmp_path / "server.log"
    plain.write_bytes(TEXT)
    specscope.ingest(plain, store=tmp_path / "p", year=2026).raise_for_errors()
    other = _row(tmp_path / "p")
    for key in ("content_sha256", "content_size", "head_sha256", "lines", "spec_records"):
        assert row[key] == other[key], key
    assert _spec(tmp_path / "s").equals(_spec(tmp_path / "p"))


@pytest.mark.parametrize("how", ["line parser", "no core"])
def test_a_gz_not_read_by_the_core_is_hashed_by_python(
    tmp_path: Path, how: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    if how == "no core":
        monkeypatch.setenv("SPECSCOPE_CORE", "0")
    text = TEXT[: TEXT.index(b"\n", 200_000) + 1]
    gz = tmp_path / "server.log.gz"
    gz.write_bytes(gzip.compress(text))
    report = specscope.ingest(gz, store=tmp_path / "s", year=2026, bulk=how != "line parser")
    report.raise_for_errors()
    row = _row(tmp_path / "s")
    assert (row["content_sha256"], row["content_size"]) == (
        hashlib.sha256(text).hexdigest(),
        len(text),
    )


def test_a_gz_copy_of_a_stored_log_is_known_without_being_read(
    tmp_path: Path, inflated: list[int], monkeypatch: pytest.MonkeyPatch
) -> None:
    store = tmp_path / "s"
    plain = tmp_path / "server.log"
    plain.write_bytes(TEXT)
    specscope.ingest(plain, store=store, year=2026).raise_for_errors()
    before = {p: p.read_bytes() for p in store.rglob("*.parquet")}

    def unread(*args: object, **kwargs: object) -> None:
        raise AssertionError("a log already in the store was read")

    monkeypatch.setattr(ingest, "parse_source", unread)
    gz = tmp_path / "server.log.1.gz"
    gz.write_bytes(gzip.compress(TEXT, 1))
    report = specscope.ingest(gz, store=store, year=2026)
    report.raise_for_errors()
    (source,) = report.sources
    assert source.status == "unchanged" and source.found["spec_decode"] == 11_999
    assert "already in the store as" in source.notes[0]
    # The stored text's length and one byte past it: the content once, by Python.
    assert len(TEXT) <= sum(inflated) <= len(TEXT) + (2 << 20)
    assert {p: p.read_bytes() for p in store.rglob("*.parquet")} == before
    again = specscope.ingest(gz, store=store, year=2026)  # the same file: its digest alone
    assert again.sources[0].status == "unchanged"


def test_a_gz_of_a_log_that_grew_reads_on(tmp_path: Path) -> None:
    store = tmp_path / "s"
    first = TEXT[: TEXT.index(b"\n", len(TEXT) // 3) + 1]
    plain = tmp_path / "server.log"
    plain.write_bytes(first)
    specscope.ingest(plain, store=store, year=2026).raise_for_errors()
    gz = tmp_path / "server.log.1.gz"
    gz.write_bytes(gzip.compress(TEXT, 1))
    report = specscope.ingest(gz, store=store, year=2026)
    report.raise_for_errors()
    assert report.sources[0].status == "grown"
    whole = tmp_path / "whole.log"
    whole.write_bytes(TEXT)
    specscope.ingest(whole, store=tmp_path / "w", year=2026).raise_for_errors()
    assert _spec(store).equals(_spec(tmp_path / "w"))
    rows = specscope.open_store(store).sources.collect()
    assert rows.height == 1
    assert rows["content_sha256"][0] == hashlib.sha256(TEXT).hexdigest()


def test_a_gz_whose_text_a_stored_source_holds_unsized_is_dropped_after_the_scan(
    tmp_path: Path,
) -> None:
    """A stored source known by its content's digest alone (no size, no head): the text
    is only known to be the same once the core has hashed it; what was staged is dropped
    and nothing is written."""
    text = TEXT[: TEXT.index(b"\n", 300_000) + 1]
    plain = tmp_path / "server.log"
    plain.write_bytes(text)
    store = Store(tmp_path / "s")
    specscope.ingest(plain, store=store, year=2026).raise_for_errors()
    (row,) = store.sources.collect().to_dicts()
    row.update(content_size=None, head_sha256=None)
    gz = tmp_path / "server.log.gz"
    gz.write_bytes(gzip.compress(text))
    with store.writer() as writer:
        report, new = ingest._ingest_one(str(gz), writer, [row], 2026, {}, ingest.default_grammar())
        assert report.status == "unchanged" and new is None
        assert writer.written == []
