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

import regex

from specscope.durations import parse_duration, parse_time
from specscope.errors import PrometheusError, UsageError
from specscope.prometheus.chunking import (
    DEFAULT_CHUNK_SERIES,
    MAX_INSTANCES,
    Chunk,
    Unread,
    instance_starts,
    instances_of,
    named,
    pack,
    recorded_note,
)
from specscope.prometheus.gathering import Failure, Gathered, Window
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
IN_FLIGHT = 2  # requests at a time: the server answers one while it works out the next
# Answers (bytes) a chunk reads before it commits and reads on from there: about 600 k
# samples (a 2,000-series chunk scraped every 15 s for an hour and a quarter), which a
# pull turns into rows within ~250 MB (bench/README.md, "Fleet pulls").
SPAN_BYTES = 16 * MB
# Intervals are made for this many series at a time: their sorts and joins copy what they
# are given several times over, the chunk's decoded samples only once.
GROUP_SERIES = 500
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
        counts = instances_of(client.series_body(query, start, end, http))
        recorded = recorded_note(client.endpoint.url, http)
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
    return pack(counts, chunk_series), notes


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
    begins = instance_starts(marks, chunks, t_start.timestamp())
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
    unread = Unread(
        {
            i: (fallback.timestamp() if fallback else begins[i])
            for i in begins
            if i not in named(marks)
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
    unread: Unread,
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
    unread: Unread,
) -> float | None:
    """Read a chunk's windows from ``report.start`` until ``SPAN_BYTES`` of answers came,
    and commit them; where the next part begins (None: the chunk is done)."""
    gathered = Gathered(report.url, Admission(max_series, max_targets))
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
    got = intervals(gathered.series(), after=None, group_series=GROUP_SERIES)
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
    gathered: Gathered,
    enough: int | None = None,
    counted_from: float = 0.0,
) -> tuple[Failure | None, int]:
    """Read the windows in order, two requests in flight, up to the first that fails or
    until ``enough`` bytes of answers came for windows past ``counted_from`` (a part's
    look back before its start is not counted, so each part reads on); the failure, and
    how many windows were read."""
    failed: Failure | None = None
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
