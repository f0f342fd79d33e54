"""Prometheus' range-vector answers (``resultType: matrix``) as numpy arrays.

``json.loads`` makes a Python list, float and str of every sample, which made decoding an
answer cost as much as the server's producing it. Prometheus writes a matrix in one layout
(Go's encoder: no spaces, keys in a fixed order, every quote inside a string escaped, so
the markers below cannot occur inside a label value): the sample lists are cut out at those
markers and read by Arrow's CSV reader, many answers in one call. Any other layout (a proxy's,
an added field, native histograms, a value that is not a number) goes through ``json``; a
differential test holds the two to the same result.
"""

from __future__ import annotations

import io
import json
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.csv as pa_csv

__all__ = ["Answer", "SeriesKey", "decode", "decode_all", "series_key"]

SeriesKey = tuple[str, str]
"""A series' name and its other labels as JSON with sorted keys."""


@dataclass(frozen=True)
class Answer:
    """The series of one answer, in its order, and their samples one after another."""

    keys: list[SeriesKey]
    counts: list[int]  # samples of each series
    samples: np.ndarray  # (sum(counts), 2): seconds, value


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


@lru_cache(maxsize=8192)
def _key_of(metric: bytes) -> SeriesKey:
    # Each window's answer names the same series again: decoded once.
    labels = json.loads(metric)
    if not isinstance(labels, dict):
        raise ValueError("metric is not an object")
    return series_key(labels)


def decode(body: bytes) -> Answer:
    """The series of a range-vector answer.

    Raises ``ValueError`` naming what is wrong when the body is not JSON, has no result
    list, or holds a sample that is not a (time, number) pair.
    """
    got = decode_all([body])[0]
    if isinstance(got, ValueError):
        raise got
    return got


def decode_all(bodies: Sequence[bytes]) -> list[Answer | ValueError]:
    """The series of each answer, or what is wrong with it; the samples of all answers in
    Prometheus' layout are read in one call (a call costs as much as 100 kB of samples)."""
    cuts = [_cut(body) for body in bodies]
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
            out.append(Answer(cut.keys, cut.counts, samples))
    return out


@dataclass(frozen=True)
class _Cut:
    keys: list[SeriesKey]
    counts: list[int]
    lines: list[bytes]  # "seconds,\"value\"" lines, a series' after the one before


def _cut(body: bytes) -> _Cut | None:
    """An answer in Prometheus' own layout cut at its markers; None for any other."""
    if not body.startswith(_HEAD):
        return None
    pos = len(_HEAD)
    metrics: list[bytes] = []
    counts: list[int] = []
    lines: list[bytes] = []
    while body.startswith(_ITEM, pos):
        mark = body.find(_VALUES, pos)
        close = body.find(_CLOSE, mark)
        if mark < 0 or close < 0:
            return None
        pairs = body[mark + len(_VALUES) : close]
        metrics.append(body[pos + len(_ITEM) : mark])
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
        return _Cut([_key_of(m) for m in metrics], counts, lines)
    except ValueError:
        return None


def _read_pairs(lines: list[bytes], expected: int) -> np.ndarray | None:
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


def _general_or_error(body: bytes) -> Answer | ValueError:
    try:
        return _general(body)
    except ValueError as exc:
        return exc


def _general(body: bytes) -> Answer:
    try:
        answer: Any = json.loads(body)
    except ValueError as exc:
        raise ValueError(f"not JSON: {body[:80]!r}") from exc
    result = answer.get("data", {}).get("result") if isinstance(answer, dict) else None
    if not isinstance(result, list):
        raise ValueError(f"no result list: {body[:80]!r}")
    keys: list[SeriesKey] = []
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
        keys.append(series_key(metric))
        counts.append(len(samples))
        arrays.append(samples)
    return Answer(keys, counts, np.concatenate(arrays) if arrays else np.empty((0, 2)))
