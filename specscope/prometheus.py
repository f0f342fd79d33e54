"""``pull``: raw samples of the speculative-decoding counters and their neighbours from a
Prometheus (or Thanos, Mimir, VictoriaMetrics: the same HTTP API) into the store.

Raw samples, not ``rate()``: a pull asks for range vectors (``metric[1800s]`` at the end of
each window), so the stored intervals are the differences between real scrapes, exact and
reset-aware (``specscope.counters``). Windows are split so that no request loads more
samples than the server allows; the store keeps a watermark per target for each (URL,
selector), so a pull every 15 minutes from cron continues where the last one ended: no gap,
no duplicate. A window that still fails after retries stops the pull there: what came
before is kept and the watermark does not pass the gap.
"""

from __future__ import annotations

import hashlib
import ipaddress
import json
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import numpy as np
import polars as pl
import regex
import requests
from prometheus_api_client import PrometheusApiClientException, PrometheusConnect
from urllib3.util.retry import Retry

from specscope.counters import SERIES_NAMES, Intervals, Series, intervals
from specscope.errors import PrometheusError, UsageError
from specscope.finish import store_columns
from specscope.store import Store, StoreWriter, default_store_path

TOKEN_ENV = "SPECSCOPE_PROMETHEUS_TOKEN"
USER_ENV = "SPECSCOPE_PROMETHEUS_USER"
PASSWORD_ENV = "SPECSCOPE_PROMETHEUS_PASSWORD"
DEFAULT_WINDOW_S = 1800
MIN_WINDOW_S = 1
# The sample before a window's first interval lies in the window before it.
LOOKBACK_S = 600
_TOO_MANY = regex.compile(r"too many samples|exceeded.*(?:sample|point)|max.?samples", regex.I)
_DURATION = regex.compile(r"(?P<n>\d+(?:\.\d+)?)\s*(?P<unit>ms|s|m|h|d|w)")
_UNIT_S = {"ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}


def parse_duration(text: str) -> timedelta:
    """``"6h"``, ``"90m"``, ``"1h30m"``, ``"10s"`` as a timedelta."""
    parts = list(_DURATION.finditer(text.strip()))
    if not parts or "".join(m.group(0) for m in parts).replace(" ", "") != text.replace(" ", ""):
        raise UsageError(f"not a duration: {text!r} (write 6h, 90m, 1h30m, 10s)")
    return timedelta(seconds=sum(float(m["n"]) * _UNIT_S[m["unit"]] for m in parts))


def parse_time(text: str) -> datetime:
    """An RFC 3339 time or unix seconds, as an aware UTC datetime."""
    try:
        return datetime.fromtimestamp(float(text), UTC)
    except ValueError:
        pass
    try:
        value = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError as exc:
        raise UsageError(f"not a time: {text!r} (RFC 3339 or unix seconds)") from exc
    return value if value.tzinfo else value.replace(tzinfo=UTC)


@dataclass(frozen=True)
class Endpoint:
    """A Prometheus URL without credentials, and how to authenticate to it."""

    url: str
    headers: Mapping[str, str] = field(default_factory=dict, repr=False)
    auth: tuple[str, str] | None = field(default=None, repr=False)
    verify: bool | str = True

    @classmethod
    def from_url(
        cls,
        url: str,
        *,
        env: Mapping[str, str] | None = None,
        ca_bundle: str | None = None,
        insecure: bool = False,
    ) -> Endpoint:
        env = os.environ if env is None else env
        parts = urlsplit(url.strip())
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise UsageError(f"not an http(s) URL: {_redact(url)!r}")
        auth = None
        if parts.username:
            auth = (parts.username, parts.password or "")
        elif env.get(USER_ENV):
            auth = (env[USER_ENV], env.get(PASSWORD_ENV, ""))
        host = f"[{parts.hostname}]" if ":" in parts.hostname else parts.hostname
        netloc = host + (f":{parts.port}" if parts.port else "")
        clean = urlunsplit((parts.scheme, netloc, parts.path.rstrip("/"), "", ""))
        headers = {}
        if env.get(TOKEN_ENV):
            headers["Authorization"] = f"Bearer {env[TOKEN_ENV]}"
        verify: bool | str = False if insecure else (ca_bundle or True)
        return cls(clean, headers, auth, verify)


def _redact(url: str) -> str:
    parts = urlsplit(url)
    if parts.password or parts.username:
        netloc = (parts.hostname or "") + (f":{parts.port}" if parts.port else "")
        return urlunsplit((parts.scheme, netloc, parts.path, parts.query, parts.fragment))
    return url


def series_selector(selector: str | None) -> str:
    """The PromQL selector for every series a pull reads, with the user's matchers."""
    # Either spelling of the prefix: `vllm:` or, escaped by newer clients, `vllm_`.
    names = "|".join(
        regex.sub(r"^(vllm|sglang):", r"\1[:_]", n).replace(".", "\\.") for n in SERIES_NAMES
    )
    extra = (selector or "").strip()
    if extra.startswith("{") and extra.endswith("}"):
        extra = extra[1:-1].strip()
    if extra and not regex.fullmatch(
        r'\s*\w+\s*(=|!=|=~|!~)\s*"[^"]*"\s*(,\s*\w+\s*(=|!=|=~|!~)\s*"[^"]*"\s*)*,?\s*', extra
    ):
        raise UsageError(f'--selector wants label matchers like {{job="vllm"}}, got {selector!r}')
    matchers = f'__name__=~"{names}"' + (f", {extra.rstrip(',')}" if extra else "")
    return "{" + matchers + "}"


@dataclass
class Window:
    start: float
    end: float


@dataclass
class PullReport:
    url: str
    selector: str | None
    source_id: str
    start: datetime
    end: datetime
    requests: int = 0
    samples: int = 0
    added: dict[str, int] = field(default_factory=dict)
    runs: int = 0
    notes: list[str] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)  # windows that could not be read
    watermark: datetime | None = None
    kind: str = "prometheus"  # or "scrape": a /metrics endpoint read directly

    def to_dict(self) -> dict[str, Any]:
        d = dict(self.__dict__)
        for key in ("start", "end", "watermark"):
            d[key] = d[key].isoformat() if d[key] is not None else None
        return d


class Client:
    """The HTTP side: range-vector queries with retries, backoff and a timeout."""

    def __init__(self, endpoint: Endpoint, *, timeout: float = 30.0, retries: int = 3) -> None:
        session = requests.Session()
        session.verify = endpoint.verify
        retry = Retry(
            total=retries,
            backoff_factor=0.5,
            status_forcelist=(429, 500, 502, 503, 504),
            allowed_methods=("GET",),
            respect_retry_after_header=True,
            raise_on_status=False,
        )
        self.endpoint = endpoint
        self.timeout = timeout
        headers = dict(endpoint.headers)
        if _loopback(endpoint.url):
            # Compressing costs both ends CPU and saves nothing on loopback.
            headers["Accept-Encoding"] = "identity"
        self.prom = PrometheusConnect(
            url=endpoint.url,
            headers=headers,
            disable_ssl=endpoint.verify is False,
            retry=retry,
            auth=endpoint.auth,
            session=session,
            timeout=timeout,
        )
        if isinstance(endpoint.verify, str):
            session.verify = endpoint.verify
        self.requests = 0

    def range_vector(self, selector: str, seconds: int, at: float) -> list[dict[str, Any]]:
        self.requests += 1
        try:
            result = self.prom.custom_query(f"{selector}[{seconds}s]", params={"time": f"{at:.3f}"})
        except PrometheusApiClientException as exc:
            raise PrometheusError(f"{self.endpoint.url} answered: {_short(exc)}") from exc
        except requests.exceptions.RequestException as exc:
            raise PrometheusError(
                f"cannot reach {self.endpoint.url} ({type(exc).__name__})"
            ) from exc
        except ValueError as exc:  # a body that is not JSON
            raise PrometheusError(f"{self.endpoint.url} sent a malformed answer") from exc
        if not isinstance(result, list):
            raise PrometheusError(f"{self.endpoint.url} sent a malformed answer")
        return result


def _loopback(url: str) -> bool:
    host = urlsplit(url).hostname or ""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _short(exc: Exception) -> str:
    text = " ".join(str(exc).split())
    return text[:300]


def _source_id(url: str, selector: str | None) -> str:
    return "p" + hashlib.sha256(f"{url}|{selector or ''}".encode()).hexdigest()[:10]


Chunks = dict[tuple[str, str], list[np.ndarray]]  # per (name, labels): (n, 2) sample arrays


def _collect(client: Client, selector: str, window: Window, series: Chunks) -> int:
    """Read one window into ``series``; split it when the server finds it too big."""
    seconds = max(1, round(window.end - window.start))
    try:
        result = client.range_vector(selector, seconds, window.end)
    except PrometheusError as exc:
        if _TOO_MANY.search(exc.message) and seconds > MIN_WINDOW_S:
            middle = window.start + (window.end - window.start) / 2
            return _collect(client, selector, Window(window.start, middle), series) + _collect(
                client, selector, Window(middle, window.end), series
            )
        raise
    count = 0
    for item in result:
        metric, values = item.get("metric"), item.get("values")
        if not isinstance(metric, dict) or not isinstance(values, list):
            raise PrometheusError(f"{client.endpoint.url} sent a malformed answer")
        name = metric.get("__name__", "")
        key = (
            name,
            json.dumps({k: v for k, v in metric.items() if k != "__name__"}, sort_keys=True),
        )
        chunks = series.setdefault(key, [])
        if not values:
            continue
        try:
            times, samples = zip(*values, strict=True)
            at = np.array(times, dtype=np.float64)
            sample = np.array(samples, dtype=np.float64)
        except (TypeError, ValueError) as exc:
            raise PrometheusError(f"{client.endpoint.url} sent a malformed sample") from exc
        keep = (at > window.start) & (at <= window.end)  # a boundary sample: one window
        if not chunks:
            keep[0] = True  # a series' first sample, whatever its window
        kept = np.column_stack((at[keep], sample[keep]))
        chunks.append(kept)
        count += len(kept)
    return count


def pull(
    url: str,
    *,
    store: str | os.PathLike[str] | Store | None = None,
    since: str | timedelta | None = None,
    start: str | datetime | None = None,
    end: str | datetime | None = None,
    selector: str | None = None,
    timeout: float = 30.0,
    retries: int = 3,
    ca_bundle: str | None = None,
    insecure: bool = False,
    window_s: int = DEFAULT_WINDOW_S,
    env: Mapping[str, str] | None = None,
    now: Callable[[], datetime] = lambda: datetime.now(UTC),
) -> PullReport:
    """Pull the samples since the last pull (or ``since`` / ``start``..``end``) into the store."""
    endpoint = Endpoint.from_url(url, env=env, ca_bundle=ca_bundle, insecure=insecure)
    query = series_selector(selector)
    target = (
        store
        if isinstance(store, Store)
        else Store(store or default_store_path(dict(os.environ if env is None else env)))
    )
    source_id = _source_id(endpoint.url, selector)
    with target.writer() as writer:
        known = target.sources.collect().to_dicts()
        previous = next((k for k in known if k["source_id"] == source_id), None)
        marks: dict[str, float] = (
            json.loads(previous["watermarks"]) if previous and previous.get("watermarks") else {}
        )
        t_end = _as_time(end) if end is not None else now()
        if start is not None:
            t_start = _as_time(start)
        elif marks:
            t_start = datetime.fromtimestamp(min(marks.values()), UTC)
        else:
            t_start = t_end - (_as_delta(since) if since is not None else timedelta(hours=1))
        report = PullReport(endpoint.url, selector, source_id, t_start, t_end)
        if t_start >= t_end:
            report.notes.append("nothing new since the last pull")
            report.watermark = t_start
            return report
        client = Client(endpoint, timeout=timeout, retries=retries)
        series: Chunks = {}
        read_until = t_start.timestamp() - LOOKBACK_S
        edge = read_until
        stop = t_end.timestamp()
        while edge < stop:
            window = Window(edge, min(stop, edge + window_s))
            try:
                report.samples += _collect(client, query, window, series)
            except PrometheusError as exc:
                report.failed.append(f"{_iso(window.start)} .. {_iso(window.end)}: {exc.message}")
                break
            edge = read_until = window.end
        report.requests = client.requests
        if report.failed and not series:
            raise PrometheusError(report.failed[0].split(": ", 1)[1])
        batch = [
            Series(name, json.loads(labels), np.concatenate(chunks) if chunks else ())
            for (name, labels), chunks in series.items()
        ]
        got = intervals(batch, after=None)
        report.notes.extend(got.notes)
        store_intervals(writer, target, got, report, marks, previous, read_until, known)
    return report


def _as_time(value: str | datetime) -> datetime:
    if isinstance(value, datetime):
        return value if value.tzinfo else value.replace(tzinfo=UTC)
    return parse_time(value)


def _as_delta(value: str | timedelta) -> timedelta:
    return value if isinstance(value, timedelta) else parse_duration(value)


def _iso(t: float) -> str:
    return datetime.fromtimestamp(t, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def store_intervals(
    writer: StoreWriter,
    store: Store,
    got: Intervals,
    report: PullReport,
    marks: dict[str, float],
    previous: dict[str, Any] | None,
    read_until: float,
    known: list[dict[str, Any]],
) -> None:
    """Keep the intervals past their target's watermark (or the window's start) and up to
    the end of what was read, then move the watermarks to the newest interval kept."""
    start = report.start.timestamp()
    new_marks = dict(marks)
    kept: dict[str, pl.DataFrame] = {}
    for table in ("spec_decode", "engine_stats"):
        rows = getattr(got, table)
        if rows.is_empty():
            kept[table] = rows
            continue
        keys = rows["_key"].unique().to_list()
        since = pl.DataFrame(
            {"_key": keys, "_since": [marks.get(k, start) for k in keys]},
            schema={"_key": pl.String, "_since": pl.Float64},
        )
        runs = rows.select("_instance", "_model").unique()
        runs = runs.with_columns(
            pl.Series(
                "run_id",
                [_run_id(report.source_id, i, m) for i, m in runs.iter_rows()],
                pl.String,
            )
        )
        rows = (
            rows.join(since, on="_key", maintain_order="left")
            .filter((pl.col("_t") > pl.col("_since")) & (pl.col("_t") <= read_until))
            .join(runs, on=["_instance", "_model"], nulls_equal=True, maintain_order="left")
        )
        for key, newest in rows.group_by("_key").agg(pl.col("_t").max()).iter_rows():
            if newest > new_marks.get(key, 0.0):
                new_marks[key] = newest
        kept[table] = rows.with_columns(pl.lit(report.url).alias("source"))
        report.added[table] = writer.add_parts(
            table, report.source_id, [store_columns(kept[table], table)]
        )
    run_rows = _run_rows(store, report, got, kept)
    writer.add("runs", report.source_id, run_rows)
    report.runs = len(run_rows)
    if new_marks:
        report.watermark = datetime.fromtimestamp(min(new_marks.values()), UTC)
    row = _source_row(report, previous, new_marks, writer.ingest_id)
    writer.replace_sources([k for k in known if k["source_id"] != report.source_id] + [row])


def _run_id(source_id: str, instance: str | None, model: str | None) -> str:
    tag = hashlib.sha256(f"{instance}|{model}".encode()).hexdigest()[:6]
    return f"{source_id}-{tag}"


def _run_rows(
    store: Store, report: PullReport, got: Intervals, added: Mapping[str, pl.DataFrame]
) -> list[dict[str, Any]]:
    """The source's runs (one per instance and model): those stored before, updated with
    what this pull saw, with their record counts."""
    before = {
        r["run_id"]: r
        for r in store.runs.filter(pl.col("source_id") == report.source_id).collect().to_dicts()
    }
    for (instance, model), config in got.runs.items():
        run_id = _run_id(report.source_id, instance, model)
        row = before.setdefault(run_id, {"run_id": run_id, "ordinal": len(before) + 1})
        row.update(
            source=report.url,
            server=config.get("server", "vllm"),
            model=model,
            pids=json.dumps({"instance": instance}),
        )
        for key in ("enable_prefix_caching", "kv_cache_dtype"):
            if config.get(key) is not None:
                row[key] = config[key]
    for table, column in (("spec_decode", "spec_records"), ("engine_stats", "stats_records")):
        stored = (
            getattr(store, table)
            .filter(pl.col("source_id") == report.source_id)
            .group_by("run_id")
            .agg(pl.len().alias("n"))
            .collect()
        )
        counts = dict(zip(stored["run_id"], stored["n"], strict=True))
        if not added[table].is_empty():
            for run_id, n in added[table].group_by("run_id").len().iter_rows():
                counts[run_id] = counts.get(run_id, 0) + n
        for run_id, row in before.items():
            row[column] = counts.get(run_id, 0)
    for row in before.values():
        row.pop("source_id", None)
    return list(before.values())


def _source_row(
    report: PullReport, previous: dict[str, Any] | None, marks: dict[str, float], ingest_id: str
) -> dict[str, Any]:
    prev = previous or {}
    return {
        "source_id": report.source_id,
        "path": report.url + (f" {report.selector}" if report.selector else ""),
        "kind": report.kind,
        "size": None,
        "sha256": None,
        "mtime": None,
        "lines": None,
        "spec_records": (prev.get("spec_records") or 0) + report.added.get("spec_decode", 0),
        "stats_records": (prev.get("stats_records") or 0) + report.added.get("engine_stats", 0),
        "runs": report.runs,
        "events": 0,
        "bench_records": 0,
        "skipped_lines": 0,
        "watermark": report.watermark.replace(tzinfo=None) if report.watermark else None,
        "watermarks": json.dumps(marks) if marks else prev.get("watermarks"),
        "ingest_id": ingest_id,
        "ingested_at": datetime.now(UTC).replace(tzinfo=None),
    }


__all__ = [
    "Endpoint",
    "PrometheusError",
    "PullReport",
    "parse_duration",
    "parse_time",
    "pull",
    "series_selector",
    "store_intervals",
]
