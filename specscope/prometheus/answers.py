"""Prometheus' range-vector answers (``resultType: matrix``) as numpy arrays.

``json.loads`` makes a Python list, float and str of every sample, which made decoding an
answer cost as much as the server's producing it. Prometheus writes a matrix in one layout
(Go's encoder: no spaces, keys in a fixed order, every quote inside a string escaped, so
the markers below cannot occur inside a label value): the sample lists are cut out at those
markers and read by Arrow's CSV reader, many answers in one call. Any other layout (a proxy's,
an added field, native histograms, a value that is not a number) goes through ``json``; a
differential test holds the two to the same result.

A series with a label value longer than ``MAX_LABEL_VALUE`` characters (or labels longer
than ``MAX_LABELS`` bytes in all) is left out, its key None, and counted in ``dropped``:
no telemetry needs one, and a 50 MB model name copied into every row is gigabytes.
"""

from __future__ import annotations

import io
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.csv as pa_csv

__all__ = [
    "MAX_LABELS",
    "MAX_LABEL_VALUE",
    "Answer",
    "SeriesKey",
    "decode",
    "decode_all",
    "key_of",
    "labels_fit",
    "labels_of",
    "series_key",
]

SeriesKey = tuple[str, str]
"""A series' name and its other labels as JSON with sorted keys."""

MAX_LABEL_VALUE = 4096  # characters of one label value
MAX_LABELS = 64 << 10  # bytes of a series' labels, names and values, as the answer has them


@dataclass(frozen=True)
class Answer:
    """The series of one answer, in its order, and their samples one after another; the
    key of a series left out for its labels is None."""

    keys: list[SeriesKey | None]
    counts: list[int]  # samples of each series
    samples: np.ndarray  # (sum(counts), 2): seconds, value
    dropped: int = 0  # series left out: a label value too long


_HEAD = b'{"status":"success","data":{"resultType":"matrix","result":['
_ITEM = b'{"metric":'
_VALUES = b',"values":['
_CLOSE = b"]}"
_PAIRS = b"],["
_READ = pa_csv.ReadOptions(column_names=["t", "v"], use_threads=False)
_PARSE = pa_csv.ParseOptions(quote_char='"')
# No null spellings: "NaN" is a number here, and an empty field is an error.
_CONVERT = pa_csv.ConvertOptions(
    column_types={"t": pa.float64(), "v": pa.float64()},
    null_values=[],
    strings_can_be_null=False,
    quoted_strings_can_be_null=False,
)


def series_key(labels: dict[str, Any]) -> SeriesKey:
    """The key of a series with these labels (``__name__`` among them)."""
    rest = {k: v for k, v in labels.items() if k != "__name__"}
    return str(labels.get("__name__", "")), json.dumps(rest, sort_keys=True)


def labels_fit(labels: dict[str, Any]) -> bool:
    """No label value over ``MAX_LABEL_VALUE`` characters, ``MAX_LABELS`` in all."""
    total = 0
    for name, value in labels.items():
        size = len(value) if isinstance(value, str) else len(str(value))
        if size > MAX_LABEL_VALUE:
            return False
        total += len(name) + size
    return total <= MAX_LABELS


KeyOf = Callable[[bytes], SeriesKey | None]
"""A series' key from its labels as the answer has them (a JSON object); None to leave
the series out. ``decode_all`` takes one: a pull remembers the series it keeps."""


def labels_of(metric: bytes | bytearray) -> dict[str, Any]:
    """A series' labels from the JSON object an answer names it with."""
    labels = json.loads(metric)
    if not isinstance(labels, dict):
        raise ValueError("metric is not an object")
    return labels


def key_of(metric: bytes | bytearray) -> SeriesKey | None:
    """The key of a series named ``metric``; None when a label is too long."""
    labels = labels_of(metric)
    # No value of a metric this short can be too long.
    fits = len(metric) <= MAX_LABEL_VALUE or labels_fit(labels)
    return series_key(labels) if fits else None


@lru_cache(maxsize=8192)
def _cached_key_of(metric: bytes) -> SeriesKey | None:
    # Each window's answer names the same series again: decoded once.
    return key_of(metric)


def decode(body: bytes | bytearray, key: KeyOf = _cached_key_of) -> Answer:
    """The series of a range-vector answer.

    Raises ``ValueError`` naming what is wrong when the body is not JSON, has no result
    list, or holds a sample that is not a (time, number) pair.
    """
    got = decode_all([body], key)[0]
    if isinstance(got, ValueError):
        raise got
    return got


def decode_all(
    bodies: Sequence[bytes | bytearray], key: KeyOf = _cached_key_of
) -> list[Answer | ValueError]:
    """The series of each answer, or what is wrong with it; the samples of all answers in
    Prometheus' layout are read in one call (a call costs as much as 100 kB of samples).
    ``key`` names each series of those (``key_of``, cached, unless a caller has its own)."""
    cuts = [_cut(body, key) for body in bodies]
    lines = [line for cut in cuts if cut is not None for line in cut.lines]
    together = _read_pairs(lines, sum(sum(cut.counts) for cut in cuts if cut is not None))
    out: list[Answer | ValueError] = []
    start = 0
    for body, cut in zip(bodies, cuts, strict=True):
        if cut is None:
            out.append(_general_or_error(body))
            continue
        n = sum(cut.counts)
        samples = together[start : start + n] if together is not None else _read_pairs(cut.lines, n)
        start += n
        if samples is None:
            out.append(_general_or_error(body))
        else:
            out.append(Answer(cut.keys, cut.counts, samples, cut.keys.count(None)))
    return out


@dataclass(frozen=True)
class _Cut:
    keys: list[SeriesKey | None]
    counts: list[int]
    lines: list[bytes | bytearray]  # "seconds,\"value\"" lines, a series' after the one before


def _cut(body: bytes | bytearray, key: KeyOf = _cached_key_of) -> _Cut | None:
    """An answer in Prometheus' own layout cut at its markers; None for any other."""
    if not body.startswith(_HEAD):
        return None
    pos = len(_HEAD)
    metrics: list[bytes | bytearray | None] = []
    counts: list[int] = []
    lines: list[bytes | bytearray] = []
    while body.startswith(_ITEM, pos):
        mark = body.find(_VALUES, pos)
        close = body.find(_CLOSE, mark)
        if mark < 0 or close < 0:
            return None
        pairs = body[mark + len(_VALUES) : close]
        # Labels too long to be telemetry are not even copied out of the body.
        too_long = mark - pos - len(_ITEM) > 8 * MAX_LABELS
        metrics.append(None if too_long else body[pos + len(_ITEM) : mark])
        if pairs:
            counts.append(pairs.count(_PAIRS) + 1)
            lines.append(pairs[1:-1].replace(_PAIRS, b"\n"))
        else:
            counts.append(0)
        pos = close + len(_CLOSE)
        if body[pos : pos + 1] != b",":
            break
        pos += 1
    if body[pos : pos + 1] != b"]":
        return None
    try:
        return _Cut([None if m is None else key(bytes(m)) for m in metrics], counts, lines)
    except ValueError:
        return None


def _read_pairs(lines: list[bytes | bytearray], expected: int) -> np.ndarray | None:
    if not expected:
        return np.empty((0, 2))
    try:
        table = pa_csv.read_csv(
            io.BytesIO(b"\n".join(lines)),
            read_options=_READ,
            parse_options=_PARSE,
            convert_options=_CONVERT,
        )
    except pa.ArrowException:
        return None
    if table.num_rows != expected or any(c.null_count for c in table.columns):
        return None
    return np.column_stack([c.to_numpy() for c in table.columns])


def _general_or_error(body: bytes | bytearray) -> Answer | ValueError:
    try:
        return _general(body)
    except ValueError as exc:
        return exc


def _general(body: bytes | bytearray) -> Answer:
    try:
        answer: Any = json.loads(body)
    except ValueError as exc:
        raise ValueError(f"not JSON: {bytes(body[:80])!r}") from exc
    result = answer.get("data", {}).get("result") if isinstance(answer, dict) else None
    if not isinstance(result, list):
        raise ValueError(f"no result list: {bytes(body[:80])!r}")
    keys: list[SeriesKey | None] = []
    counts: list[int] = []
    arrays: list[np.ndarray] = []
    for item in result:
        metric = item.get("metric") if isinstance(item, dict) else None
        values = item.get("values") if isinstance(item, dict) else None
        if not isinstance(metric, dict) or not isinstance(values, list):
            raise ValueError(f"a series without metric and values: {str(item)[:80]}")
        try:
            samples = np.array(values, dtype=np.float64).reshape(-1, 2)
        except (TypeError, ValueError) as exc:
            raise ValueError(f"a sample that is not (time, number): {str(values)[:80]}") from exc
        if len(samples) != len(values):
            raise ValueError(f"a sample that is not (time, number): {str(values)[:80]}")
        keys.append(series_key(metric) if labels_fit(metric) else None)
        counts.append(len(samples))
        arrays.append(samples)
    samples = np.concatenate(arrays) if arrays else np.empty((0, 2))
    return Answer(keys, counts, samples, keys.count(None))
