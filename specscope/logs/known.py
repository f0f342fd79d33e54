"""Which stored source a log is before it is read: the same file, the same text under
another name (a rotated or gzipped copy), or the text of one it grew from. A ``.gz``
whose content is not hashed yet (the core hashes it as it reads it) is told by its head
and inflated only as far as a stored text its head may start."""

from __future__ import annotations

from typing import Any

from specscope.logs.source import HEAD_BYTES, Source


def known_as(
    src: Source, known: list[dict[str, Any]]
) -> tuple[dict[str, Any] | None, dict[str, Any] | None]:
    """The stored source this one is (the same file, or the same text under another name:
    nothing to read), else the one whose text it starts with (``_grown_from``). A ``.gz``
    whose content is not hashed yet is compared by its head first, and only a stored
    text its head may start is inflated to (in one read; a rotated copy of a stored log)."""
    prefixes: dict[int, str] | None = None
    if not src.content_sha256:
        sizes = [k["content_size"] for k in known if _may_hold(src, k)]
        prefixes = src.prefix_digests(sizes) if sizes else {}
    same = next(
        (
            k
            for k in known
            if k["sha256"] == src.sha256
            or (k.get("content_sha256") and k["content_sha256"] == src.content_sha256)
        ),
        None,
    )
    if same is not None:
        return same, None
    return None, _grown_from(src, known, prefixes)


def _may_hold(src: Source, k: dict[str, Any]) -> bool:
    """Whether the stored source ``k``'s text may be the start of ``src``'s, by sizes and
    by the first 64 KiB (cheap)."""
    size = k.get("content_size")
    if not size or (src.content_sha256 and size >= src.content_size):
        return False
    return not (
        k.get("head_sha256")
        and min(size, HEAD_BYTES) == HEAD_BYTES
        and k["head_sha256"] != src.head_sha256
    )


def _grown_from(
    src: Source, known: list[dict[str, Any]], prefixes: dict[int, str] | None = None
) -> dict[str, Any] | None:
    """The stored source whose text this one starts with: the same file grown, or a log
    rotated away and found under its new name (``server.log.1``, ``server.log.2.gz``).
    ``prefixes``: the digests of the content's starts, read before (``prefix_digests``)."""
    for k in known:
        if not _may_hold(src, k):
            continue
        size = k["content_size"]
        if prefixes is not None:
            if prefixes.get(size) == k["content_sha256"]:
                return k
        elif src.prefix_sha256(size) == k["content_sha256"]:
            return k
    return None


def same_text(src: Source, known: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The stored source with the same text, once ``src``'s content is hashed."""
    return next((k for k in known if k.get("content_sha256") == src.content_sha256), None)


__all__ = ["known_as", "same_text"]
