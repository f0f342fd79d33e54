"""``pull``: raw samples of the speculative-decoding counters and their neighbours from a
Prometheus (or Thanos, Mimir, VictoriaMetrics: the same HTTP API) into the store.

Raw samples, not ``rate()``: a pull asks for range vectors (``metric[1800s]`` at the end of
each window), so the stored intervals are the differences between real scrapes, exact and
reset-aware (``specscope.prometheus.intervals``). Windows are split so that no request loads more
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
from collections import deque
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit, urlunsplit

import numpy as np
import polars as pl
import regex

from specscope.durations import parse_duration, parse_time
from specscope.errors import PrometheusError, UsageError
from specscope.prometheus.answers import Answer, SeriesKey, decode_all
from specscope.prometheus.intervals import Intervals, Series, intervals
from specscope.prometheus.names import SERIES_NAMES
from specscope.schema import store_columns
from specscope.store.layout import default_store_path
from specscope.store.reading import Store
from specscope.store.sources import source_id as new_source_id
from specscope.store.sources import sources_row
from specscope.store.writing import StoreWriter

if TYPE_CHECKING:
    import requests

TOKEN_ENV = "SPECSCOPE_PROMETHEUS_TOKEN"
USER_ENV = "SPECSCOPE_PROMETHEUS_USER"
PASSWORD_ENV = "SPECSCOPE_PROMETHEUS_PASSWORD"
DEFAULT_WINDOW_S = 1800
MIN_WINDOW_S = 1
# The sample before a window's first interval lies in the window before it.
LOOKBACK_S = 600
_BATCH_BYTES = 2 << 20  # answers decoded together
IN_FLIGHT = 2  # requests at a time: the server answers one while it works out the next
_TOO_MANY = regex.compile(r"too many samples|exceeded.*(?:sample|point)|max.?samples", regex.I)


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
        # Imported when a pull starts: requests and its kin add 7 MB to every command, and
        # an ingest has 300 MB in all (likewise in scrape and watch).
        import requests
        from prometheus_api_client import PrometheusConnect
        from urllib3.util.retry import Retry

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
        self.session = session
        self.auth = _settle_environment(session, endpoint)
        self.requests = 0

    def range_body(self, selector: str, seconds: int, at: float) -> bytes:
        """The answer to ``selector[seconds]`` at ``at``, undecoded."""
        import requests

        self.requests += 1
        # Not ``custom_query``: it decodes the answer with ``json``, the slowest part of a
        # pull; ``matrix.decode_all`` reads Prometheus' layout in bulk.
        try:
            response = self.session.get(
                f"{self.prom.url}/api/v1/query",
                params={"query": f"{selector}[{seconds}s]", "time": f"{at:.3f}"},
                headers=self.prom.headers,
                auth=self.auth,
                timeout=self.timeout,
            )
        except requests.exceptions.RequestException as exc:
            raise PrometheusError(
                f"cannot reach {self.endpoint.url} ({type(exc).__name__})"
            ) from exc
        if response.status_code != 200:
            raise PrometheusError(
                f"{self.endpoint.url} answered: "
                + _short(f"HTTP Status Code {response.status_code} ({response.content!r})")
            )
        return response.content


def _settle_environment(session: requests.Session, endpoint: Endpoint) -> Any:
    """Look up once what requests would look up in the environment before every request
    (proxies, a CA bundle, .netrc; a tenth of a pull's time on loopback); the credentials
    to send."""
    import requests.utils

    settled = session.merge_environment_settings(endpoint.url, {}, None, session.verify, None)
    session.proxies, session.verify = settled["proxies"], settled["verify"]
    session.trust_env = False
    return endpoint.auth or requests.utils.get_netrc_auth(endpoint.url)


def _loopback(url: str) -> bool:
    host = urlsplit(url).hostname or ""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _short(exc: Exception | str) -> str:
    text = " ".join(str(exc).split())
    return text[:300]


def _fetch(client: Client, selector: str, window: Window) -> list[tuple[Window, bytes]]:
    """One window's answers, in halves while the server finds a window too big."""
    seconds = max(1, round(window.end - window.start))
    try:
        return [(window, client.range_body(selector, seconds, window.end))]
    except PrometheusError as exc:
        if _TOO_MANY.search(exc.message) and seconds > MIN_WINDOW_S:
            middle = window.start + (window.end - window.start) / 2
            return _fetch(client, selector, Window(window.start, middle)) + _fetch(
                client, selector, Window(middle, window.end)
            )
        raise


_Failure = tuple[Window, str]  # a window and what went wrong with it


class _Gathered:
    """A pull's samples, per series in the order they came. Answers wait undecoded until
    a few MB of them are there, then are decoded in one call."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.ids: dict[SeriesKey, int] = {}
        self.started: list[bool] = []  # per series: a sample of it is kept
        self.rows: list[np.ndarray] = []
        self.row_ids: list[np.ndarray] = []
        self.samples = 0
        self.until: float | None = None  # the end of the last window wholly kept
        self.waiting: list[tuple[Window, list[tuple[Window, bytes]]]] = []
        self.waiting_bytes = 0

    def take(self, window: Window, answers: list[tuple[Window, bytes]]) -> _Failure | None:
        """Queue the answers for ``window`` (one, or one per part of a split window)."""
        self.waiting.append((window, answers))
        self.waiting_bytes += sum(len(body) for _, body in answers)
        return self.settle() if self.waiting_bytes >= _BATCH_BYTES else None

    def settle(self) -> _Failure | None:
        """Decode and keep what waits, in order, up to the first malformed answer: that
        answer's window and what is wrong, if there is one."""
        waiting, self.waiting, self.waiting_bytes = self.waiting, [], 0
        decoded = iter(decode_all([body for _, answers in waiting for _, body in answers]))
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
        first = 0
        for i, (key, n) in enumerate(zip(answer.keys, answer.counts, strict=True)):
            sid = ids[i] = self.ids.setdefault(key, len(self.ids))
            if sid == len(self.started):
                self.started.append(False)
            if n and not self.started[sid]:
                keep[first] = True  # a series' first sample, whatever its window
                self.started[sid] = True
            first += n
        self.rows.append(answer.samples[keep])
        self.row_ids.append(np.repeat(ids, answer.counts)[keep])
        return int(keep.sum())

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


def _windows(start: float, stop: float, width: int) -> list[Window]:
    out: list[Window] = []
    edge = start
    while edge < stop:
        out.append(Window(edge, min(stop, edge + width)))
        edge = out[-1].end
    return out


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
    source_id = new_source_id("prometheus", f"{endpoint.url}|{selector or ''}")
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
        gathered = _Gathered(endpoint.url)
        windows = _windows(t_start.timestamp() - LOOKBACK_S, t_end.timestamp(), window_s)
        failed: _Failure | None = None
        with ThreadPoolExecutor(IN_FLIGHT, thread_name_prefix="specscope-pull") as ahead:
            pending = deque(ahead.submit(_fetch, client, query, w) for w in windows[:IN_FLIGHT])
            for i, window in enumerate(windows):
                try:
                    answers = pending.popleft().result()
                except PrometheusError as exc:
                    failed = (window, exc.message)
                    for later in pending:
                        later.cancel()
                    break
                # The next windows are asked for while this one is decoded.
                if i + IN_FLIGHT < len(windows):
                    pending.append(ahead.submit(_fetch, client, query, windows[i + IN_FLIGHT]))
                if failed := gathered.take(window, answers):
                    break
        failed = gathered.settle() or failed  # a malformed answer comes before the failure
        if failed:
            window, message = failed
            report.failed.append(f"{_iso(window.start)} .. {_iso(window.end)}: {message}")
        report.samples = gathered.samples
        read_until = gathered.until if gathered.until is not None else windows[0].start
        report.requests = client.requests
        if report.failed and not gathered.ids:
            raise PrometheusError(report.failed[0].split(": ", 1)[1])
        got = intervals(gathered.series(), after=None)
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
    return sources_row(
        report.source_id,
        report.url + (f" {report.selector}" if report.selector else ""),
        report.kind,
        ingest_id,
        spec_records=(prev.get("spec_records") or 0) + report.added.get("spec_decode", 0),
        stats_records=(prev.get("stats_records") or 0) + report.added.get("engine_stats", 0),
        runs=report.runs,
        events=0,
        bench_records=0,
        skipped_lines=0,
        watermark=report.watermark.replace(tzinfo=None) if report.watermark else None,
        watermarks=json.dumps(marks) if marks else prev.get("watermarks"),
    )


__all__ = [
    "Endpoint",
    "PrometheusError",
    "PullReport",
    "pull",
    "series_selector",
    "store_intervals",
]
