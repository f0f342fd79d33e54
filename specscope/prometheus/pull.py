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

import ipaddress
import json
import os
import time
from collections import deque
from collections.abc import Callable, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit, urlunsplit

import numpy as np
import regex

from specscope.durations import parse_duration, parse_time
from specscope.errors import PrometheusError, UsageError
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
from specscope.prometheus.http import (
    DEFAULT_MAX_ANSWER_MB,
    MAX_ANSWER_ENV,
    MAX_RETRY_AFTER_S,
    MB,
    Budget,
    Http,
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
from specscope.prometheus.names import PREFIXES, SERIES_NAMES
from specscope.prometheus.storing import PullReport, store_intervals
from specscope.store.layout import default_store_path
from specscope.store.reading import Store
from specscope.store.sources import source_id as new_source_id

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
        regex.sub(rf"^({'|'.join(PREFIXES)}):", r"\1[:_]", n).replace(".", "\\.")
        for n in SERIES_NAMES
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


class Client:
    """The HTTP side: range-vector queries, each bounded in size and in time as a whole,
    with retries, backoff and a capped ``Retry-After`` (``specscope.prometheus.http``)."""

    def __init__(
        self,
        endpoint: Endpoint,
        *,
        timeout: float = 30.0,
        retries: int = 3,
        max_bytes: int = DEFAULT_MAX_ANSWER_MB * MB,
        follow_redirects: bool = False,
        max_retry_after: float = MAX_RETRY_AFTER_S,
        deadline: float | None = None,
    ) -> None:
        # Imported when a pull starts: requests and its kin add 7 MB to every command, and
        # an ingest has 300 MB in all (likewise in scrape and watch).
        session = new_session()
        session.verify = endpoint.verify
        self.endpoint = endpoint
        headers = dict(endpoint.headers)
        if _loopback(endpoint.url):
            # Compressing costs both ends CPU and saves nothing on loopback.
            headers["Accept-Encoding"] = "identity"
        self.session = session
        self.http = Http(
            session,
            shown=endpoint.url,
            timeout=timeout,
            max_bytes=max_bytes,
            retries=retries,
            follow_redirects=follow_redirects,
            max_retry_after=max_retry_after,
            deadline=deadline,
            headers=headers,
            auth=_settle_environment(session, endpoint),
        )
        self.budget = Budget()

    @property
    def requests(self) -> int:
        return self.http.requests

    def range_body(self, selector: str, seconds: int, at: float, ticket: int = 0) -> bytearray:
        """The answer to ``selector[seconds]`` at ``at``, undecoded. Not through
        prometheus_api_client: it decodes with ``json``, the slowest part of a pull
        (``answers.decode_all`` reads Prometheus' layout in bulk), and reads whole bodies."""
        return self.http.get(
            f"{self.endpoint.url}/api/v1/query",
            {"query": f"{selector}[{seconds}s]", "time": f"{at:.3f}"},
            budget=self.budget,
            ticket=ticket,
        )


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


def _fetch(
    client: Client, selector: str, window: Window, ticket: int = 0
) -> list[tuple[Window, bytearray]]:
    """One window's answers, in halves while the server finds a window too big."""
    seconds = max(1, round(window.end - window.start))
    try:
        return [(window, client.range_body(selector, seconds, window.end, ticket))]
    except PrometheusError as exc:
        if _TOO_MANY.search(exc.message) and seconds > MIN_WINDOW_S:
            middle = window.start + (window.end - window.start) / 2
            return _fetch(client, selector, Window(window.start, middle), ticket) + _fetch(
                client, selector, Window(middle, window.end), ticket
            )
        raise


_Failure = tuple[Window, str]  # a window and what went wrong with it
_LEFT_OUT: SeriesKey = ("", "a series past the limits")


class _Gathered:
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

    def take(self, window: Window, answers: list[tuple[Window, bytearray]]) -> _Failure | None:
        """Queue the answers for ``window`` (one, or one per part of a split window)."""
        self.waiting.append((window, answers))
        self.waiting_bytes += sum(len(body) for _, body in answers)
        return self.settle() if self.waiting_bytes >= _BATCH_BYTES else None

    def settle(self) -> _Failure | None:
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
    max_answer_mb: float | None = None,
    follow_redirects: bool = False,
    deadline: float | None = None,
    max_retry_after: float = MAX_RETRY_AFTER_S,
    max_series: int = MAX_SERIES,
    max_targets: int = MAX_TARGETS,
) -> PullReport:
    """Pull the samples since the last pull (or ``since`` / ``start``..``end``) into the store.

    ``timeout`` bounds each request as a whole; ``deadline`` (seconds) the whole pull.
    An answer over ``max_answer_mb`` (default ``$SPECSCOPE_MAX_ANSWER_MB`` or 100) is
    refused; a redirect to another host is refused unless ``follow_redirects``. The store
    is locked only to write what was read, not while the server is asked."""
    env = os.environ if env is None else env
    endpoint = Endpoint.from_url(url, env=env, ca_bundle=ca_bundle, insecure=insecure)
    query = series_selector(selector)
    max_bytes = size_limit(max_answer_mb, env, MAX_ANSWER_ENV, DEFAULT_MAX_ANSWER_MB)
    until = None if deadline is None else time.monotonic() + deadline
    target = store if isinstance(store, Store) else Store(store or default_store_path(dict(env)))
    target.manifest()  # a store of a newer schema is refused before the server is asked
    source_id = new_source_id("prometheus", f"{endpoint.url}|{selector or ''}")
    marks = _marks(_source(target, source_id)[0])
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
    client = Client(
        endpoint,
        timeout=timeout,
        retries=retries,
        max_bytes=max_bytes,
        follow_redirects=follow_redirects,
        max_retry_after=max_retry_after,
        deadline=until,
    )
    gathered = _Gathered(endpoint.url, Admission(max_series, max_targets))
    windows = _windows(t_start.timestamp() - LOOKBACK_S, t_end.timestamp(), window_s)
    failed = _read_windows(client, query, windows, gathered)
    if failed:
        window, message = failed
        report.failed.append(f"{_iso(window.start)} .. {_iso(window.end)}: {message}")
    report.samples = gathered.samples
    read_until = gathered.until if gathered.until is not None else windows[0].start
    report.requests = client.requests
    if report.failed and not gathered.ids:
        raise PrometheusError(report.failed[0].split(": ", 1)[1])
    report.notes.extend(f"followed a redirect to {o}" for o in sorted(client.http.followed))
    report.notes.extend(gathered.notes())
    got = intervals(gathered.series(), after=None)
    report.notes.extend(got.notes)
    # Locked only now: a slow server keeps no other writer waiting. The watermarks are
    # read again under the lock, so a pull that wrote meanwhile is not stored twice.
    with target.writer() as writer:
        previous, known = _source(target, source_id)
        store_intervals(writer, target, got, report, _marks(previous), previous, read_until, known)
    return report


def _source(store: Store, source_id: str) -> tuple[dict[str, Any] | None, list[dict[str, Any]]]:
    """The stored row of this source (None before the first pull), and every source row."""
    known = store.sources.collect().to_dicts()
    return next((k for k in known if k["source_id"] == source_id), None), known


def _marks(previous: dict[str, Any] | None) -> dict[str, float]:
    if previous and previous.get("watermarks"):
        marks: dict[str, float] = json.loads(previous["watermarks"])
        return marks
    return {}


def _read_windows(
    client: Client, query: str, windows: list[Window], gathered: _Gathered
) -> _Failure | None:
    """Read the windows in order, two requests in flight, up to the first that fails."""
    failed: _Failure | None = None

    def fetch(i: int) -> Future[list[tuple[Window, bytearray]]]:
        client.budget.open(i)
        return ahead.submit(_fetch, client, query, windows[i], i)

    with ThreadPoolExecutor(IN_FLIGHT, thread_name_prefix="specscope-pull") as ahead:
        pending = deque(fetch(i) for i in range(min(IN_FLIGHT, len(windows))))
        for i, window in enumerate(windows):
            try:
                answers = pending.popleft().result()
            except PrometheusError as exc:
                failed = (window, exc.message)
                client.budget.release(i)
                break
            # The next windows are asked for while this one is decoded.
            if i + IN_FLIGHT < len(windows):
                pending.append(fetch(i + IN_FLIGHT))
            failed = gathered.take(window, answers)
            del answers
            client.budget.release(i)
            if failed:
                break
        if failed:
            client.http.stop()  # the requests still in flight are abandoned
            for later in pending:
                later.cancel()
    return gathered.settle() or failed  # a malformed answer comes before the failure


def _as_time(value: str | datetime) -> datetime:
    if isinstance(value, datetime):
        return value if value.tzinfo else value.replace(tzinfo=UTC)
    return parse_time(value)


def _as_delta(value: str | timedelta) -> timedelta:
    return value if isinstance(value, timedelta) else parse_duration(value)


def _iso(t: float) -> str:
    return datetime.fromtimestamp(t, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


__all__ = [
    "Endpoint",
    "PrometheusError",
    "PullReport",
    "pull",
    "series_selector",
    "store_intervals",
]
