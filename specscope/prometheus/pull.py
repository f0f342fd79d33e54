"""``pull``: raw samples of the speculative-decoding counters and their neighbours from a
Prometheus (or Thanos, Mimir, VictoriaMetrics: the same HTTP API) into the store.

Raw samples, not ``rate()``: a pull asks for range vectors (``metric[1800s]`` at the end of
each window), so the stored intervals are the differences between real scrapes, exact and
reset-aware (``specscope.prometheus.intervals``). Windows are split so that no request loads more
samples than the server allows; the store keeps a watermark per target for each (URL,
selector), so a pull every 15 minutes from cron continues where the last one ended: no gap,
no duplicate. A window that still fails after retries stops the pull there: what came
before is kept and the watermark does not pass the gap.

A fleet's pull is cut by series too: the series API (``/api/v1/series``) says how many
series each ``instance`` has, and the instances are read in chunks of a bounded number of
series, one chunk after another, each committed to the store before the next is asked
for. What a pull holds is one chunk's, not the fleet's; a pull that stops half way keeps
the chunks it finished, and the next one continues each target from its own watermark.
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
# Answers (bytes) a chunk reads before it commits and reads on from there: about 600 k
# samples (a 2,000-series chunk scraped every 15 s for an hour and a quarter), which a
# pull turns into rows within ~250 MB (bench/README.md, "Fleet pulls").
SPAN_BYTES = 16 * MB
DEFAULT_CHUNK_SERIES = 2_000  # series one chunk of a pull reads (each window, each request)
MAX_INSTANCES = 100_000  # instances one pull reads, in all its chunks
# Instances in one chunk: its matcher goes into the URL, which proxies cap at 8-16 KB.
MAX_CHUNK_INSTANCES = 200
RECORDED_PREFIX = "specscope:spec_decode"  # what `specscope rules` records (rules.PREFIX)
_RE2_SPECIAL = regex.compile(r"([\\.+*?()|\[\]{}^$])")
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
        self.extra_requests = 0  # of the series API

    @property
    def requests(self) -> int:
        return self.http.requests + self.extra_requests

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

    def series_body(self, selector: str, start: float, end: float, http: Http) -> bytearray:
        """The series API's answer: every series ``selector`` names between ``start`` and
        ``end`` (labels only, no samples)."""
        return http.get(
            f"{self.endpoint.url}/api/v1/series",
            {"match[]": selector, "start": f"{start:.3f}", "end": f"{end:.3f}"},
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


@dataclass(frozen=True)
class Chunk:
    """The instances one part of a pull reads together (None: every series of the
    selector, unchunked) and how many series the series API named for them."""

    instances: tuple[str, ...] | None
    series: int = 0

    def selector(self, query: str) -> str:
        if self.instances is None:
            return query
        # An absent instance label reads as "": the empty alternative matches it.
        alternatives = "|".join(_RE2_SPECIAL.sub(r"\\\1", i) for i in self.instances)
        return f"{query[:-1]}, instance=~{json.dumps(alternatives)}}}"


def _instances_of(body: bytes | bytearray) -> dict[str, int]:
    """Series per instance in a series API answer; a ValueError if it is not one. Each
    series' labels are cut to its instance as they are parsed: a fleet's list is not held."""

    def hook(pairs: list[tuple[str, Any]]) -> Any:
        # The answer itself is the object whose "data" is a list: a series' labels are
        # strings (a label may be called "status" or "data").
        if any(k == "data" and isinstance(v, list) for k, v in pairs):
            return dict(pairs)
        return next((v for k, v in pairs if k == "instance"), "")

    try:
        answer = json.loads(body, object_pairs_hook=hook)
    except ValueError as exc:
        raise ValueError("not JSON") from exc
    if not isinstance(answer, dict) or answer.get("status") != "success":
        raise ValueError("no list of series")
    data = answer["data"]
    counts: dict[str, int] = {}
    for instance in data:
        if not isinstance(instance, str):
            raise ValueError("a series that is not an object of labels")
        counts[instance] = counts.get(instance, 0) + 1
    return counts


def _chunks(counts: Mapping[str, int], chunk_series: int) -> list[Chunk]:
    """Instances packed in order into chunks of at most ``chunk_series`` series (an
    instance with more is a chunk of its own) and ``MAX_CHUNK_INSTANCES`` instances."""
    out: list[Chunk] = []
    names: list[str] = []
    series = 0
    for instance in sorted(counts):
        n = counts[instance]
        if names and (series + n > chunk_series or len(names) >= MAX_CHUNK_INSTANCES):
            out.append(Chunk(tuple(names), series))
            names, series = [], 0
        names.append(instance)
        series += n
    if names:
        out.append(Chunk(tuple(names), series))
    return out


def _plan(
    client: Client, query: str, start: float, end: float, chunk_series: int | None
) -> tuple[list[Chunk], list[str]]:
    """The chunks a pull reads, and notes: one when it reads unchunked for want of an
    answer from the series API (an old proxy, a server that does not serve it)."""
    if not chunk_series:
        return [Chunk(None)], []
    # Once retried at most: a server that cannot answer this is read as before.
    http = Http(
        client.session,
        shown=client.http.shown,
        timeout=client.http.timeout,
        max_bytes=client.http.max_bytes,
        retries=min(1, client.http.retries),
        follow_redirects=client.http.follow_redirects,
        max_retry_after=client.http.max_retry_after,
        deadline=client.http.deadline,
        headers=client.http.headers,
        auth=client.http.auth,
    )
    try:
        counts = _instances_of(client.series_body(query, start, end, http))
        recorded = _recorded_note(client, http)
    except (PrometheusError, ValueError) as exc:
        why = exc.message if isinstance(exc, PrometheusError) else f"{exc}"
        return [Chunk(None)], [f"the series API gave no list of series ({why}): read unchunked"]
    finally:
        client.extra_requests += http.requests
        client.http.followed |= http.followed
    notes = [recorded] if recorded else []
    if not counts:
        return [Chunk(None)], notes
    if len(counts) > MAX_INSTANCES:
        # A list no fleet has (a hostile or broken server): as many runs as a pull keeps.
        kept = sorted(counts)[:MAX_INSTANCES]
        notes.append(
            f"the series API named {len(counts):,} instances: read the first "
            f"{MAX_INSTANCES:,} (by name), left out the rest"
        )
        counts = {i: counts[i] for i in kept}
    return _chunks(counts, chunk_series), notes


def _recorded_note(client: Client, http: Http) -> str | None:
    """Why the series ``specscope rules`` records, when the server evaluates them, are not
    pulled in place of the raw counters; None when it records none (or cannot say)."""
    try:
        body = http.get(f"{client.endpoint.url}/api/v1/rules", {"type": "record"})
        groups = json.loads(body)["data"]["groups"]
        names = sorted(
            {
                str(rule["name"])
                for group in groups
                for rule in group["rules"]
                if str(rule.get("name", "")).startswith(RECORDED_PREFIX + ":")
            }
        )
    except (PrometheusError, ValueError, KeyError, TypeError, AttributeError):
        return None  # a server without the rules API (Thanos Query without a ruler, say)
    if not names:
        return None
    # The rules are rate()s: extrapolated per-second averages over their window, whose
    # sums are not the counts. A rule copying the counters is sampled at its evaluations
    # and loses what was counted between the last one and a restart. Neither is exact.
    return (
        f"the server records specscope's rules ({len(names)} series, such as {names[0]}); "
        "pulled the raw counters instead: a recorded rate() is a per-second average over "
        "its window, extrapolated at the window's edges, not the counts of each interval, "
        "and a recorded copy of a counter would lose the counts between the rule's last "
        "evaluation and a server restart"
    )


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
    chunk_series: int | None = DEFAULT_CHUNK_SERIES,
) -> PullReport:
    """Pull the samples since the last pull (or ``since`` / ``start``..``end``) into the store.

    ``timeout`` bounds each request as a whole; ``deadline`` (seconds) the whole pull.
    An answer over ``max_answer_mb`` (default ``$SPECSCOPE_MAX_ANSWER_MB`` or 100) is
    refused; a redirect to another host is refused unless ``follow_redirects``. The store
    is locked only to write what was read, not while the server is asked.

    The instances are read in chunks of at most ``chunk_series`` series (None: all at
    once, as a server without the series API is), each committed before the next; the
    series and target caps hold per chunk."""
    env = os.environ if env is None else env
    endpoint = Endpoint.from_url(url, env=env, ca_bundle=ca_bundle, insecure=insecure)
    query = series_selector(selector)
    max_bytes = size_limit(max_answer_mb, env, MAX_ANSWER_ENV, DEFAULT_MAX_ANSWER_MB)
    if chunk_series is not None and chunk_series < 1:
        raise UsageError(f"--chunk-series wants a positive number, got {chunk_series!r}")
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
    first = t_start.timestamp() - LOOKBACK_S
    chunks, notes = _plan(client, query, first, t_end.timestamp(), chunk_series)
    report.notes.extend(notes)
    # Each chunk from its own targets' watermarks: a pull that stopped half way is not
    # read again for the chunks it finished.
    begins = _instance_starts(marks, chunks, t_start.timestamp())
    fallback = t_start if start is not None or not marks else None
    starts = [
        fallback
        or datetime.fromtimestamp(
            min(begins[i] for i in c.instances) if c.instances else t_start.timestamp(), UTC
        )
        for c in chunks
    ]
    report.start = min(starts)
    report.requests = client.requests
    # The instances of chunks not read yet that no watermark names (new servers) are held
    # at where their chunk begins, so that a pull stopped before them is resumed there.
    unread = _Unread(
        {
            i: (fallback.timestamp() if fallback else begins[i])
            for i in begins
            if i not in _named(marks)
        },
        first,
    )
    read = 0
    for number, (chunk, chunk_start) in enumerate(zip(chunks, starts, strict=True)):
        if chunk_start >= t_end:
            continue
        read += 1
        part = PullReport(endpoint.url, selector, source_id, chunk_start, t_end)
        unread.later = [i for c in chunks[number + 1 :] for i in c.instances or ()]
        unread.own = list(chunk.instances or ())
        unread.listed = set(begins)
        _pull_chunk(
            client,
            target,
            chunk.selector(query),
            part,
            window_s,
            max_series,
            max_targets,
            first=read == 1,
            unread=unread,
        )
        report.requests = client.requests
        _merge(report, part)
        if part.failed:
            break
    if not read:
        report.notes.append("nothing new since the last pull")
    if report.watermark is None:
        report.watermark = _watermark(_marks(_source(target, source_id)[0]))
    if len(chunks) > 1:
        report.notes.append(
            f"read in {len(chunks):,} chunks of instances (at most {chunk_series:,} series each)"
        )
    return report


_UNREAD = "unread"  # a watermark's key for an instance none of whose chunks was read


@dataclass
class _Unread:
    """Instances no watermark names, by where their reading begins (unix seconds), and
    the chunks around the one being committed (``_Unread.marks``)."""

    begins: dict[str, float]
    asked_from: float  # the series API's start: an instance it did not list has no series
    own: list[str] = field(default_factory=list)
    later: list[str] = field(default_factory=list)
    listed: set[str] = field(default_factory=set)

    def marks(
        self, stored: Mapping[str, float], failed: bool, resume_at: float | None = None
    ) -> dict[str, float]:
        """The watermarks to commit with a chunk's part: ``stored`` with the holds of this
        chunk's instances let go when it is done (kept when it failed, moved to
        ``resume_at`` when a part of its time is still to read) and those of the later
        chunks set."""
        if resume_at is not None and not failed:
            self.begins.update({i: resume_at for i in self.own if i in self.begins})
        hold = [*self.later, *(self.own if failed or resume_at is not None else ())]
        out: dict[str, float] = {}
        for key, mark in stored.items():
            instance = _unread_instance(key)
            if instance is None or failed:
                out[key] = mark
            elif instance not in self.listed and mark < self.asked_from:
                out[key] = mark  # outside what the series API was asked: still unknown
        out.update({_unread_key(i): self.begins[i] for i in hold if i in self.begins})
        return out


def _unread_key(instance: str) -> str:
    return json.dumps({_UNREAD: instance})


def _unread_instance(key: str) -> str | None:
    """The instance a hold names; None for a target's watermark."""
    if not key.startswith("{"):
        return None
    value = json.loads(key)
    return str(value.get(_UNREAD, "")) if isinstance(value, dict) else None


def _instance_of_key(key: str) -> str:
    held = _unread_instance(key)
    if held is not None:
        return held
    target = json.loads(key)
    return target[0] if isinstance(target, list) and target and target[0] else ""


def _named(marks: Mapping[str, float]) -> set[str]:
    """The instances a target's watermark names (holds aside)."""
    return {_instance_of_key(k) for k in marks if _unread_instance(k) is None}


def _instance_starts(
    marks: Mapping[str, float], chunks: list[Chunk], default: float
) -> dict[str, float]:
    """Where each instance's read begins: its oldest watermark (or hold); for one with
    none (a server new since the last pull), the oldest of all watermarks."""
    oldest: dict[str, float] = {}
    for key, mark in marks.items():
        instance = _instance_of_key(key)
        oldest[instance] = min(mark, oldest.get(instance, mark))
    return {i: oldest.get(i, default) for c in chunks for i in c.instances or ()}


def _watermark(marks: Mapping[str, float]) -> datetime | None:
    return datetime.fromtimestamp(min(marks.values()), UTC) if marks else None


def _pull_chunk(
    client: Client,
    target: Store,
    query: str,
    report: PullReport,
    window_s: int,
    max_series: int,
    max_targets: int,
    first: bool,
    unread: _Unread,
) -> None:
    """Read one chunk's windows and commit what they gave (``report`` is the chunk's),
    a part of its time at a time: each part stops after ``SPAN_BYTES`` of answers, so a
    long backfill holds no more than a short one. A first chunk that reads nothing at all
    fails the pull: nothing of it was stored."""
    begin = report.start.timestamp()
    while True:
        part = PullReport(report.url, report.selector, report.source_id, _at(begin), report.end)
        more = _pull_span(
            client, target, query, part, window_s, max_series, max_targets, first, unread
        )
        _merge(report, part)
        if part.failed or more is None:
            return
        begin, first = more, False


def _pull_span(
    client: Client,
    target: Store,
    query: str,
    report: PullReport,
    window_s: int,
    max_series: int,
    max_targets: int,
    first: bool,
    unread: _Unread,
) -> float | None:
    """Read a chunk's windows from ``report.start`` until ``SPAN_BYTES`` of answers came,
    and commit them; where the next part begins (None: the chunk is done)."""
    gathered = _Gathered(report.url, Admission(max_series, max_targets))
    windows = _windows(report.start.timestamp() - LOOKBACK_S, report.end.timestamp(), window_s)
    failed, stopped = _read_windows(
        client, query, windows, gathered, SPAN_BYTES, report.start.timestamp()
    )
    if failed:
        window, message = failed
        report.failed.append(f"{_iso(window.start)} .. {_iso(window.end)}: {message}")
    report.samples = gathered.samples
    read_until = gathered.until if gathered.until is not None else windows[0].start
    more = read_until if not failed and stopped < len(windows) else None
    if report.failed and not gathered.ids and first:
        raise PrometheusError(report.failed[0].split(": ", 1)[1])
    if report.failed and not gathered.ids:
        return None  # what came before is stored: the pull's report says where it stopped
    report.notes.extend(f"followed a redirect to {o}" for o in sorted(client.http.followed))
    report.notes.extend(gathered.notes())
    got = intervals(gathered.series(), after=None)
    del gathered  # the part's samples: what is held is its rows, not the fleet's
    report.notes.extend(got.notes)
    # Committed now: a later part or chunk that fails leaves this one stored. The
    # watermarks are read again, so a pull that wrote meanwhile is not stored twice.
    with target.writer() as writer:
        previous, known = _source(target, report.source_id)
        marks = unread.marks(_marks(previous), bool(report.failed), more)
        store_intervals(writer, target, got, report, marks, previous, read_until, known)
    return more


def _merge(into: PullReport, part: PullReport) -> None:
    """Add what a part of a pull did to the report of the whole."""
    into.samples += part.samples
    for table, n in part.added.items():
        into.added[table] = into.added.get(table, 0) + n
    into.runs = part.runs or into.runs
    into.watermark = part.watermark or into.watermark
    into.notes.extend(n for n in part.notes if n not in into.notes)
    into.failed.extend(part.failed)


def _at(t: float) -> datetime:
    return datetime.fromtimestamp(t, UTC)


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
    client: Client,
    query: str,
    windows: list[Window],
    gathered: _Gathered,
    enough: int | None = None,
    counted_from: float = 0.0,
) -> tuple[_Failure | None, int]:
    """Read the windows in order, two requests in flight, up to the first that fails or
    until ``enough`` bytes of answers came for windows past ``counted_from`` (a part's
    look back before its start is not counted, so each part reads on); the failure, and
    how many windows were read."""
    failed: _Failure | None = None
    done = 0
    got = 0

    def fetch(i: int) -> tuple[int, Future[list[tuple[Window, bytearray]]]]:
        client.budget.open(i)
        return i, ahead.submit(_fetch, client, query, windows[i], i)

    with ThreadPoolExecutor(IN_FLIGHT, thread_name_prefix="specscope-pull") as ahead:
        pending = deque(fetch(i) for i in range(min(IN_FLIGHT, len(windows))))
        for i, window in enumerate(windows):
            try:
                answers = pending.popleft()[1].result()
            except PrometheusError as exc:
                failed = (window, exc.message)
                client.budget.release(i)
                break
            if window.end > counted_from:
                got += sum(len(body) for _, body in answers)
            full = enough is not None and got >= enough
            # The next windows are asked for while this one is decoded.
            if i + IN_FLIGHT < len(windows) and not full:
                pending.append(fetch(i + IN_FLIGHT))
            failed = gathered.take(window, answers)
            del answers
            client.budget.release(i)
            done = i + 1
            if failed or full:
                break
        if failed:
            client.http.stop()  # the requests still in flight are abandoned
        for ticket, later in pending:
            # Asked ahead and not read (the next part asks again): its bytes let go.
            if not later.cancel():
                try:
                    later.result()
                except PrometheusError:
                    pass
            client.budget.release(ticket)
    failed = gathered.settle() or failed  # a malformed answer comes before the failure
    return failed, done


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
