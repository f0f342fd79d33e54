"""``scrape``: read a vLLM or SGLang ``/metrics`` endpoint directly, no Prometheus between,
polling it at an interval and storing the intervals between polls like a pull does.

``Poller`` is the polling, for ``scrape`` and ``watch`` alike: each body read as a stream
and refused past a size cap, each poll bounded in time as a whole, a redirect to another
host refused unless asked for, and the series and targets it keeps bounded."""

from __future__ import annotations

import json
import os
import re
import time
from collections.abc import Callable, Iterator, Mapping
from datetime import UTC, datetime
from urllib.parse import urlsplit

from specscope.errors import PrometheusError, UsageError
from specscope.exposition import Sample, parse_sample
from specscope.prometheus.answers import MAX_LABEL_VALUE, MAX_LABELS, labels_fit
from specscope.prometheus.http import (
    DEFAULT_MAX_BODY_MB,
    MAX_BODY_ENV,
    Http,
    instance_of,
    new_session,
    size_limit,
)
from specscope.prometheus.intervals import (
    MAX_SERIES,
    MAX_TARGETS,
    Admission,
    Series,
    intervals,
)
from specscope.prometheus.names import SERIES_NAMES, canonical_name
from specscope.prometheus.storing import PullReport, store_intervals
from specscope.store.layout import default_store_path
from specscope.store.reading import Store
from specscope.store.sources import source_id as new_source_id

_WANTED = set(SERIES_NAMES)


def read_metrics(text: str, instance: str) -> list[Sample]:
    """The samples specscope reads from one exposition, as (name, labels, value); a series
    with a label value over ``MAX_LABEL_VALUE`` characters is left out."""
    return list(_samples(text.encode(), instance, [0]))


# The text format (version 0.0.4), a line at a time by ``parse_sample`` (pasted text is read
# with it too). Only the lines of the series specscope reads are parsed (a /metrics body is
# mostly histograms); the others are skipped on their name. prometheus_client's parser
# builds every sample of a family before it yields one: 300 MB and 10 s for 10^5 samples of
# one counter.
_NAME = re.compile(rb"[ \t]*([a-zA-Z_:][a-zA-Z0-9_:]*)")
_WANTED_RAW = frozenset(
    spelling.encode() for name in SERIES_NAMES for spelling in (name, name.replace(":", "_", 1))
)


def _samples(body: bytes | bytearray, instance: str, long_labels: list[int]) -> Iterator[Sample]:
    """The wanted samples of an exposition, one line at a time; a series whose labels are
    too long is counted in ``long_labels[0]`` and left out."""
    pos, size, first = 0, len(body), True
    while pos < size:
        end = body.find(b"\n", pos)
        end = size if end < 0 else end
        name = _NAME.match(body, pos, end)
        if body.startswith(b"#", pos) or (name is None and not body[pos:end].strip()):
            pos = end + 1
            continue
        if first or (name is not None and name[1] in _WANTED_RAW):
            line = bytes(body[pos:end]).decode("utf-8", errors="replace")
            sample = parse_sample(line.strip())
            if sample is None:
                raise PrometheusError(f"not a Prometheus text exposition: {line[:80]!r}")
            first = False
            if name is not None and name[1] in _WANTED_RAW:
                key, labels, value = sample
                if labels_fit(labels):
                    yield canonical_name(key), {"instance": instance, **labels}, value
                else:
                    long_labels[0] += 1
        pos = end + 1


class Poller:
    """Polls one ``/metrics`` URL and keeps the samples of each series by time."""

    def __init__(
        self,
        url: str,
        *,
        timeout: float = 10.0,
        max_body_mb: float | None = None,
        follow_redirects: bool = False,
        max_series: int = MAX_SERIES,
        max_targets: int = MAX_TARGETS,
        env: Mapping[str, str] | None = None,
    ) -> None:
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise UsageError(f"not an http(s) URL: {url!r}")
        self.url = url
        self.instance = instance_of(url)
        self.shown = f"{parts.scheme}://{self.instance}{parts.path}"
        env = os.environ if env is None else env
        self.max_bytes = size_limit(max_body_mb, env, MAX_BODY_ENV, DEFAULT_MAX_BODY_MB)
        self.timeout = timeout
        self.follow_redirects = follow_redirects
        self.http: Http | None = None  # made at the first poll: requests is imported then
        self.admission = Admission(max_series, max_targets)
        self.series: dict[tuple[str, str], dict[float, float]] = {}
        self.long_labels = 0
        self.polls = 0

    def poll(self, at: float) -> int:
        """Read the endpoint once, the samples stamped ``at``; how many were kept."""
        if self.http is None:
            self.http = Http(
                new_session(),
                shown=self.shown,
                timeout=self.timeout,
                max_bytes=self.max_bytes,
                follow_redirects=self.follow_redirects,
                headers={"Accept": "text/plain"},
                what="body",
                limit_option="--max-body-mb",
            )
        body = self.http.get(self.url)
        long_labels = [0]
        fresh: dict[tuple[str, str], float] = {}  # kept only once the whole body is read
        for name, labels, value in _samples(body, self.instance, long_labels):
            key = (name, json.dumps(labels, sort_keys=True))
            if key in self.series or key in fresh:
                fresh[key] = value
            elif not self.admission.refused(key) and self.admission.admit(key, labels):
                self.series[key] = {}
                fresh[key] = value
        for key, value in fresh.items():
            self.series[key][at] = value
        self.long_labels = max(self.long_labels, long_labels[0])
        self.polls += 1
        return len(fresh)

    def batch(self) -> list[Series]:
        """Every series kept, with its samples."""
        return [
            Series(n, json.loads(labels), tuple(p.items()))
            for (n, labels), p in self.series.items()
        ]

    def notes(self) -> list[str]:
        out = self.admission.notes()
        if self.long_labels:
            out.append(
                f"left out {self.long_labels:,} series (the most in one poll) with a label "
                f"value over {MAX_LABEL_VALUE:,} characters, or labels over "
                f"{MAX_LABELS // 1024} KiB in all"
            )
        if self.http is not None:
            out.extend(f"followed a redirect to {o}" for o in sorted(self.http.followed))
        return out


def scrape(
    url: str,
    *,
    store: str | os.PathLike[str] | Store | None = None,
    interval: float = 10.0,
    count: int | None = None,
    duration: float | None = None,
    timeout: float = 10.0,
    env: Mapping[str, str] | None = None,
    sleep: Callable[[float], None] = time.sleep,
    clock: Callable[[], float] = time.time,
    max_body_mb: float | None = None,
    follow_redirects: bool = False,
    max_series: int = MAX_SERIES,
    max_targets: int = MAX_TARGETS,
) -> PullReport:
    """Poll ``url`` ``count`` times (or for ``duration`` seconds) and store the intervals.

    ``timeout`` bounds each poll as a whole; a body over ``max_body_mb`` (default
    ``$SPECSCOPE_MAX_BODY_MB`` or 64) is refused; a redirect to another host is refused
    unless ``follow_redirects``. A poll that fails ends the scrape; the polls before it
    are stored."""
    poller = Poller(
        url,
        timeout=timeout,
        max_body_mb=max_body_mb,
        follow_redirects=follow_redirects,
        max_series=max_series,
        max_targets=max_targets,
        env=env,
    )
    if count is None:
        count = max(2, int((duration or 60.0) // interval) + 1)
    if count < 2:
        raise UsageError("--count must be at least 2: an interval needs two polls")
    env = os.environ if env is None else env
    target = store if isinstance(store, Store) else Store(store or default_store_path(dict(env)))
    source_id = new_source_id("scrape", poller.shown)
    started = clock()
    report = PullReport(poller.shown, None, source_id, _utc(started), _utc(started), kind="scrape")
    for i in range(count):
        if i:
            sleep(interval)
        at = clock()
        try:
            report.samples += poller.poll(at)
        except PrometheusError as exc:
            report.failed.append(f"poll {i + 1} at {_utc(at):%H:%M:%S}: {exc.message}")
            break
    report.requests = poller.http.requests if poller.http is not None else 0
    if report.failed and not poller.series:
        raise PrometheusError(report.failed[0])
    report.end = _utc(clock())
    report.notes.extend(poller.notes())
    got = intervals(poller.batch())
    report.notes.extend(got.notes)
    with target.writer() as writer:
        known = target.sources.collect().to_dicts()
        previous = next((k for k in known if k["source_id"] == source_id), None)
        store_intervals(
            writer, target, got, report, {}, previous, report.end.timestamp() + 1, known
        )
    return report


def _utc(t: float) -> datetime:
    return datetime.fromtimestamp(t, UTC)


__all__ = ["Poller", "read_metrics", "scrape"]
