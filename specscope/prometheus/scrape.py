"""``scrape``: read a vLLM or SGLang ``/metrics`` endpoint directly, no Prometheus between,
polling it at an interval and storing the intervals between polls like a pull does."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from urllib.parse import urlsplit

from specscope.errors import PrometheusError, UsageError
from specscope.prometheus.http import NoAnswerError, get_metrics, new_session
from specscope.prometheus.intervals import Series, intervals
from specscope.prometheus.names import SERIES_NAMES, canonical_name
from specscope.prometheus.pull import PullReport, store_intervals
from specscope.store.layout import default_store_path
from specscope.store.reading import Store
from specscope.store.sources import source_id as new_source_id

_WANTED = set(SERIES_NAMES)


def read_metrics(text: str, instance: str) -> list[tuple[str, dict[str, str], float]]:
    """The samples specscope reads from one exposition, as (name, labels, value)."""
    # Imported here: with the http and email modules it brings, 1.4 MB of every command.
    from prometheus_client.parser import text_string_to_metric_families

    out = []
    try:
        for family in text_string_to_metric_families(text):
            for sample in family.samples:
                name = canonical_name(sample.name)
                if name in _WANTED:
                    out.append((name, {"instance": instance, **sample.labels}, sample.value))
    except ValueError as exc:
        raise PrometheusError(f"not a Prometheus text exposition ({exc})") from exc
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
) -> PullReport:
    """Poll ``url`` ``count`` times (or for ``duration`` seconds) and store the intervals."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise UsageError(f"not an http(s) URL: {url!r}")
    if count is None:
        count = max(2, int((duration or 60.0) // interval) + 1)
    if count < 2:
        raise UsageError("--count must be at least 2: an interval needs two polls")
    instance = parts.netloc.rsplit("@", 1)[-1]
    clean = f"{parts.scheme}://{instance}{parts.path}"
    target = (
        store
        if isinstance(store, Store)
        else Store(store or default_store_path(dict(os.environ if env is None else env)))
    )
    source_id = new_source_id("scrape", clean)
    series: dict[tuple[str, str], dict[float, float]] = {}
    started = clock()
    report = PullReport(clean, None, source_id, _utc(started), _utc(started), kind="scrape")
    session = new_session()
    for i in range(count):
        if i:
            sleep(interval)
        at = clock()
        try:
            text = get_metrics(session, url, timeout=timeout, shown=clean)
        except PrometheusError as exc:
            report.requests += not isinstance(exc, NoAnswerError)
            report.failed.append(f"poll {i + 1} at {_utc(at):%H:%M:%S}: {exc.message}")
            break
        report.requests += 1
        for name, labels, value in read_metrics(text, instance):
            key = (name, json.dumps(labels, sort_keys=True))
            series.setdefault(key, {})[at] = value
            report.samples += 1
    if report.failed and not series:
        raise PrometheusError(report.failed[0])
    report.end = _utc(clock())
    got = intervals(
        [Series(n, json.loads(labels), tuple(p.items())) for (n, labels), p in series.items()]
    )
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


__all__ = ["read_metrics", "scrape"]
