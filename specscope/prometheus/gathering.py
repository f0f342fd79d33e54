"""A pull's samples as they come (``Gathered``): answers wait undecoded until a few MB of
them are there, are decoded in one call, and kept per series in the order they came, up
to the limits on series, targets and label sizes."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import numpy as np

from specscope.prometheus.answers import (
    MAX_LABEL_VALUE,
    MAX_LABELS,
    Answer,
    SeriesKey,
    decode_all,
    labels_fit,
    labels_of,
    series_key,
)
from specscope.prometheus.intervals import MAX_SERIES, Admission, Series

_BATCH_BYTES = 2 << 20  # answers decoded together


@dataclass
class Window:
    start: float
    end: float


Failure = tuple[Window, str]  # a window and what went wrong with it
_LEFT_OUT: SeriesKey = ("", "a series past the limits")


class Gathered:
    """A pull's samples, per series in the order they came. Answers wait undecoded until
    a few MB of them are there, then are decoded in one call."""

    def __init__(self, url: str, admission: Admission | None = None) -> None:
        self.url = url
        self.admission = admission or Admission()
        self.ids: dict[SeriesKey, int] = {}
        self.started: list[bool] = []  # per series: a sample of it is kept
        self.rows: list[np.ndarray] = []
        self.row_ids: list[np.ndarray] = []
        self.samples = 0
        self.long_labels = 0  # series left out for a long label (the most in one answer)
        # The labels of the series kept, as answers send them, and hashes of those of the
        # series left out (True: past the limits; False: a label too long): a series named
        # again in the next window is not decoded again.
        self.raw_keys: dict[bytes, SeriesKey] = {}
        self.raw_left: dict[int, bool] = {}
        self.until: float | None = None  # the end of the last window wholly kept
        self.waiting: list[tuple[Window, list[tuple[Window, bytearray]]]] = []
        self.waiting_bytes = 0

    def notes(self) -> list[str]:
        out = self.admission.notes()
        if self.long_labels:
            out.append(
                f"left out {self.long_labels:,} series (the most in one answer) with a label "
                f"value over {MAX_LABEL_VALUE:,} characters, or labels over "
                f"{MAX_LABELS // 1024} KiB in all"
            )
        return out

    def take(self, window: Window, answers: list[tuple[Window, bytearray]]) -> Failure | None:
        """Queue the answers for ``window`` (one, or one per part of a split window)."""
        self.waiting.append((window, answers))
        self.waiting_bytes += sum(len(body) for _, body in answers)
        return self.settle() if self.waiting_bytes >= _BATCH_BYTES else None

    def settle(self) -> Failure | None:
        """Decode and keep what waits, in order, up to the first malformed answer: that
        answer's window and what is wrong, if there is one."""
        waiting, self.waiting, self.waiting_bytes = self.waiting, [], 0
        bodies = [body for _, answers in waiting for _, body in answers]
        decoded = iter(decode_all(bodies, self.key_of))
        for window, answers in waiting:
            for part, _ in answers:
                got = next(decoded)
                if isinstance(got, ValueError):
                    return window, f"{self.url} sent a malformed answer"
                self.samples += self._add(part, got)
            self.until = window.end
        return None

    def _add(self, window: Window, answer: Answer) -> int:
        at = answer.samples[:, 0]
        keep = (at > window.start) & (at <= window.end)  # a boundary sample: one window
        ids = np.empty(len(answer.keys), dtype=np.int64)
        self.long_labels = max(self.long_labels, answer.dropped)
        first = 0
        for i, (key, n) in enumerate(zip(answer.keys, answer.counts, strict=True)):
            sid = self._id(key)
            ids[i] = max(sid, 0)
            if sid < 0:  # left out: a long label, or past the limits
                keep[first : first + n] = False
                first += n
                continue
            if sid == len(self.started):
                self.started.append(False)
            if n and not self.started[sid]:
                keep[first] = True  # a series' first sample, whatever its window
                self.started[sid] = True
            first += n
        self.rows.append(answer.samples[keep])
        self.row_ids.append(np.repeat(ids, answer.counts)[keep])
        return int(keep.sum())

    def key_of(self, metric: bytes) -> SeriesKey | None:
        """The key of a series an answer names (``answers.KeyOf``): None for one with a
        label too long, ``_LEFT_OUT`` for one past the limits on series and targets."""
        key = self.raw_keys.get(metric)
        if key is not None:
            return key
        known = self.raw_left.get(hash(metric))
        if known is not None:
            return _LEFT_OUT if known else None
        labels = labels_of(metric)
        fits = len(metric) <= MAX_LABEL_VALUE or labels_fit(labels)
        key = series_key(labels) if fits else None
        if key is not None and (key in self.ids or self._admit(key, labels)):
            if len(metric) <= 1024:
                self.raw_keys[metric] = key
            return key
        if len(self.raw_left) < MAX_SERIES:
            self.raw_left[hash(metric)] = fits
        return _LEFT_OUT if fits else None

    def _admit(self, key: SeriesKey, labels: dict[str, Any]) -> bool:
        if self.admission.refused(key) or not self.admission.admit(key, labels):
            return False
        self.ids[key] = len(self.ids)
        return True

    def _id(self, key: SeriesKey | None) -> int:
        """The series' number; -1 for one left out."""
        if key is None or key is _LEFT_OUT:
            return -1
        sid = self.ids.get(key)
        if sid is None:
            if not self._admit(key, json.loads(key[1])):
                return -1
            sid = self.ids[key]
        return sid

    def series(self) -> list[Series]:
        """Every series named in an answer, with its samples (none, for some)."""
        ids = np.concatenate(self.row_ids) if self.row_ids else np.empty(0, dtype=np.int64)
        rows = np.concatenate(self.rows) if self.rows else np.empty((0, 2))
        rows = rows[np.argsort(ids, kind="stable")]
        ends = np.cumsum(np.bincount(ids, minlength=len(self.ids)))
        return [
            Series(name, json.loads(labels), rows[ends[sid - 1] if sid else 0 : ends[sid]])
            for (name, labels), sid in self.ids.items()
        ]


__all__ = ["Failure", "Gathered", "Window"]
