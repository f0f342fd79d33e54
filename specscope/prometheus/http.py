"""HTTP for ``pull``, ``scrape`` and ``watch``: what a server may make specscope do.

- Every answer is read as a stream, in chunks, and refused once past a size cap (never
  more than the cap is held); the in-flight answers of a pull share the cap (``Budget``).
- ``timeout`` bounds a request as a whole, however slowly its bytes come: a watchdog shuts
  the connection down at the deadline (a per-read socket timeout is reset by every byte).
- 429 and 5xx are retried with backoff; a ``Retry-After`` is waited for up to a cap and
  never past the caller's deadline, a longer one ends the request at once.
- A redirect to another origin (scheme, host and port) is refused unless asked for, and
  then followed without the credentials.

requests is imported when the first request starts, not with the package.
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable, Mapping
from email.utils import parsedate_to_datetime
from functools import cache
from typing import TYPE_CHECKING, Any
from urllib.parse import urljoin, urlsplit, urlunsplit

from specscope.errors import PrometheusError, UsageError

if TYPE_CHECKING:
    import requests

MB = 1 << 20
# A pull holds ~130 MB before an answer comes (the ingest budget is 300 MB in all).
DEFAULT_MAX_ANSWER_MB = 100  # a Prometheus answer (pull)
DEFAULT_MAX_BODY_MB = 64  # a /metrics body (scrape, watch)
MAX_ANSWER_ENV = "SPECSCOPE_MAX_ANSWER_MB"
MAX_BODY_ENV = "SPECSCOPE_MAX_BODY_MB"
MAX_RETRY_AFTER_S = 60.0
MAX_REDIRECTS = 5
RETRY_STATUSES = frozenset((429, 500, 502, 503, 504))
_CHUNK = 1 << 20
_ERROR_BODY = 64 << 10  # of an answer that is not 200: enough for its message
_REDIRECTS = frozenset((301, 302, 303, 307, 308))


class NoAnswerError(PrometheusError):
    """The endpoint could not be reached or gave no whole answer (as against an answer
    that was not 200)."""


class TooBigError(PrometheusError):
    """An answer past the size cap."""


class StoppedError(PrometheusError):
    """The request was abandoned: the caller stopped (another window failed)."""


def size_limit(mb: float | None, env: Mapping[str, str], name: str, default: int) -> int:
    """A size cap in bytes: ``mb`` if given, else ``$name``, else ``default`` MB."""
    raw: Any = mb if mb is not None else env.get(name) or default
    try:
        value = float(raw)
    except ValueError:
        value = 0.0
    if not value > 0 or value == float("inf"):
        raise UsageError(f"a size limit wants a positive number of MB, got {raw!r} ({name})")
    return int(value * MB)


def origin(url: str) -> tuple[str, str, int | None]:
    """Scheme, host and port of a URL (the default port made explicit)."""
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    try:
        port = parts.port
    except ValueError:
        port = None
    return scheme, (parts.hostname or "").lower(), port or {"http": 80, "https": 443}.get(scheme)


def without_credentials(url: str) -> str:
    parts = urlsplit(url)
    if parts.username is None and parts.password is None:
        return url
    netloc = parts.netloc.rsplit("@", 1)[-1]
    return urlunsplit((parts.scheme, netloc, parts.path, parts.query, parts.fragment))


def instance_of(url: str) -> str:
    """The ``host:port`` a URL names (what Prometheus would label ``instance``)."""
    return url.split("://", 1)[1].split("/", 1)[0].rsplit("@", 1)[-1]


# -- the watchdog: a deadline for a request as a whole ------------------------------------

_local = threading.local()


class _Watch:
    """Shuts the socket of the current thread's request down at ``seconds`` from now. The
    connection makes its socket known when it connects and when it sends the request
    (``_attach``), so a server that trickles its headers is cut off as surely as one that
    trickles a body. The socket, not the connection: http.client lets go of the socket of
    a response that ends with the connection (HTTP/1.0) while the body is still read."""

    def __init__(self, seconds: float) -> None:
        self.lock = threading.Lock()
        self.sock: Any = None
        self.fired = False
        self.done = False
        self.timer = threading.Timer(max(0.0, seconds), self.fire)
        self.timer.daemon = True

    def __enter__(self) -> _Watch:
        _local.watch = self
        self.timer.start()
        return self

    def __exit__(self, *exc: object) -> None:
        with self.lock:
            self.done = True
        self.timer.cancel()
        _local.watch = None

    def attach(self, conn: Any) -> None:
        with self.lock:
            self.sock = getattr(conn, "sock", None) or self.sock
            if self.fired:
                _shut(self.sock)

    def fire(self) -> None:
        with self.lock:
            if self.done:
                return
            self.fired = True
            _shut(self.sock)


def _shut(sock: Any) -> None:
    if sock is not None:
        try:
            # socket.socket's own: SSLSocket.shutdown would unwrap under the reader's feet.
            socket.socket.shutdown(sock, socket.SHUT_RDWR)
        except OSError:
            pass


def _attach(conn: Any) -> None:
    watch = getattr(_local, "watch", None)
    if watch is not None:
        watch.attach(conn)


@cache
def _adapter_class() -> Any:
    """An HTTPAdapter whose connections tell the watchdog who they are."""
    import requests.adapters
    import urllib3.connection
    import urllib3.connectionpool

    class _HTTP(urllib3.connection.HTTPConnection):
        def connect(self) -> None:
            super().connect()
            _attach(self)

        def request(self, *args: Any, **kwargs: Any) -> None:
            _attach(self)
            super().request(*args, **kwargs)

    # _HTTP's methods, over HTTPS: its super() is HTTPSConnection's in this order.
    class _HTTPS(_HTTP, urllib3.connection.HTTPSConnection):
        pass

    class _HTTPPool(urllib3.connectionpool.HTTPConnectionPool):
        ConnectionCls = _HTTP

    class _HTTPSPool(urllib3.connectionpool.HTTPSConnectionPool):
        ConnectionCls = _HTTPS

    pools = {"http": _HTTPPool, "https": _HTTPSPool}

    class Adapter(requests.adapters.HTTPAdapter):
        def init_poolmanager(self, *args: Any, **kwargs: Any) -> None:
            super().init_poolmanager(*args, **kwargs)
            self.poolmanager.pool_classes_by_scheme = pools

        def proxy_manager_for(self, proxy: str, **kwargs: Any) -> Any:
            manager = super().proxy_manager_for(proxy, **kwargs)
            if hasattr(manager, "pool_classes_by_scheme"):
                manager.pool_classes_by_scheme = pools
            return manager

    return Adapter


def new_session() -> requests.Session:
    """A session whose requests the watchdog can cut off; no retries of its own."""
    import requests

    session = requests.Session()
    adapter = _adapter_class()()
    session.mount("http://", adapter)
    session.mount("https://", adapter)
    return session


# -- the bytes in flight -------------------------------------------------------------------


class Budget:
    """The bytes of a pull's answers in flight together (read, not yet decoded): the oldest
    ticket open may read its answer up to the size cap; a younger one reads ``ahead``
    bytes of its own, then waits until it is the oldest. Only younger tickets wait, on
    older ones, so nothing waits in a circle; at most cap + ``ahead`` per younger ticket
    is held at once."""

    def __init__(self, ahead: int = 8 * MB) -> None:
        self.ahead = ahead
        self.held: dict[int, int] = {}
        self.cond = threading.Condition()

    def open(self, ticket: int) -> None:
        with self.cond:
            self.held.setdefault(ticket, 0)

    def grow(self, ticket: int, size: int, deadline: float) -> bool:
        """Count ``size`` more bytes for ``ticket``; False when the wait passed
        ``deadline`` (monotonic)."""
        with self.cond:
            while True:
                mine = self.held.get(ticket, 0) + size
                if mine <= self.ahead or all(t >= ticket for t in self.held):
                    self.held[ticket] = mine
                    return True
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self.cond.wait(min(left, 1.0))

    def give_back(self, ticket: int, size: int) -> None:
        """Uncount ``size`` bytes of ``ticket`` (an attempt that came to nothing)."""
        with self.cond:
            if ticket in self.held:
                self.held[ticket] = max(0, self.held[ticket] - size)
            self.cond.notify_all()

    def release(self, ticket: int) -> None:
        with self.cond:
            self.held.pop(ticket, None)
            self.cond.notify_all()


class Http:
    """GETs from one server, each bounded in size and in time as a whole, retried on 429
    and 5xx. ``shown`` is the server as messages name it (no credentials)."""

    def __init__(
        self,
        session: requests.Session,
        *,
        shown: str,
        timeout: float,
        max_bytes: int,
        retries: int = 0,
        follow_redirects: bool = False,
        max_retry_after: float = MAX_RETRY_AFTER_S,
        deadline: float | None = None,
        headers: Mapping[str, str] | None = None,
        auth: Any = None,
        what: str = "answer",
        limit_option: str = "--max-answer-mb",
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        if not timeout > 0:
            raise UsageError(f"--timeout wants a positive number of seconds, got {timeout!r}")
        self.session = session
        self.shown = shown
        self.timeout = timeout
        self.max_bytes = max_bytes
        self.retries = max(0, retries)
        self.follow_redirects = follow_redirects
        self.max_retry_after = max_retry_after
        self.deadline = deadline  # of the whole pull (monotonic), if it has one
        self.headers = dict(headers or {})
        self.auth = auth
        self.what = what
        self.limit_option = limit_option
        self.sleep = sleep
        self.stopped = threading.Event()
        self.watches: set[_Watch] = set()  # of the requests in flight
        self.followed: set[str] = set()  # other origins a redirect led to (followed)
        self.requests = 0

    def stop(self) -> None:
        """Abandon the requests in flight: cut off now, or at their next chunk."""
        self.stopped.set()
        for watch in list(self.watches):
            watch.fire()

    def get(
        self,
        url: str,
        params: Mapping[str, str] | None = None,
        *,
        budget: Budget | None = None,
        ticket: int = 0,
    ) -> bytearray:
        """The body of a 200 answer to ``url``; a PrometheusError naming the server
        otherwise (unreachable, refused, too slow, too big, redirected elsewhere)."""
        for attempt in range(self.retries + 1):
            if self.stopped.is_set():
                raise StoppedError(f"{self.shown}: abandoned")
            self._check_deadline()
            try:
                status, headers, body = self._once(url, params, budget, ticket)
            except (TooBigError, StoppedError):
                raise
            except NoAnswerError:
                if attempt == self.retries:
                    raise
                self._wait(attempt, None, None)
                continue
            if status == 200:
                return body
            if status in RETRY_STATUSES and attempt < self.retries:
                self._wait(attempt, headers.get("Retry-After"), status)
                continue
            excerpt = _excerpt(body)
            raise PrometheusError(
                f"{self.shown} answered HTTP {status}" + (f" ({excerpt})" if excerpt else "")
            )
        raise AssertionError("unreachable")  # the loop returns or raises

    def _check_deadline(self) -> None:
        if self.deadline is not None and time.monotonic() >= self.deadline:
            raise PrometheusError(
                f"{self.shown}: the deadline of the whole pull (--deadline) passed"
            )

    def _wait(self, attempt: int, retry_after: str | None, status: int | None) -> None:
        """Sleep before the next attempt: ``Retry-After`` if the server sent one (up to
        the cap), else backoff; never past the deadline."""
        asked = _seconds(retry_after)
        if asked is not None and asked > self.max_retry_after:
            raise PrometheusError(
                f"{self.shown} answered HTTP {status} and asks to wait {asked:.0f} s "
                f"(Retry-After), more than the {self.max_retry_after:.0f} s specscope waits"
            )
        wait = asked if asked is not None else min(0.5 * 2**attempt, self.max_retry_after)
        if self.deadline is not None and time.monotonic() + wait >= self.deadline:
            raise PrometheusError(
                f"{self.shown} answered HTTP {status} and asks to wait {wait:.0f} s, past the "
                "deadline of the whole pull (--deadline)"
                if status
                else f"cannot reach {self.shown} before the deadline of the whole pull"
            )
        if wait > 0 and not self.stopped.is_set():
            self.sleep(wait)

    def _once(
        self, url: str, params: Mapping[str, str] | None, budget: Budget | None, ticket: int
    ) -> tuple[int, Mapping[str, str], bytearray]:
        """One request (and the redirects it leads to), within one deadline."""
        seconds = self.timeout
        if self.deadline is not None:
            seconds = min(seconds, self.deadline - time.monotonic())
        deadline = time.monotonic() + seconds
        with _Watch(seconds) as watch:
            self.watches.add(watch)
            try:
                return self._hops(url, params, budget, ticket, watch, deadline)
            finally:
                self.watches.discard(watch)

    def _hops(
        self,
        url: str,
        params: Mapping[str, str] | None,
        budget: Budget | None,
        ticket: int,
        watch: _Watch,
        deadline: float,
    ) -> tuple[int, Mapping[str, str], bytearray]:
        """The request and the redirects it leads to."""
        import requests

        headers, auth = dict(self.headers), self.auth
        first = origin(url)
        for _ in range(MAX_REDIRECTS + 1):
            left = max(0.001, deadline - time.monotonic())
            self.requests += 1
            try:
                response = self.session.get(
                    url,
                    params=params,
                    headers=headers,
                    auth=auth,
                    timeout=(left, left),
                    stream=True,
                    allow_redirects=False,
                )
            except requests.exceptions.RequestException as exc:
                raise self._lost(exc, watch) from exc
            try:
                location = response.headers.get("Location")
                if response.status_code in _REDIRECTS and location:
                    url = urljoin(response.url, location)
                    params = None
                    if origin(url) != first:
                        parts = urlsplit(without_credentials(url))
                        shown = urlunsplit((*parts[:3], "", ""))
                        if not self.follow_redirects:
                            raise PrometheusError(
                                f"{self.shown} redirected to another host ({shown}): "
                                "refused (--follow-redirects follows it)"
                            )
                        self.followed.add(urlunsplit((*parts[:2], "", "", "")))
                        headers.pop("Authorization", None)
                        auth = None
                    continue
                ok = response.status_code == 200
                body = self._read(
                    response,
                    watch,
                    self.max_bytes if ok else _ERROR_BODY,
                    refuse=ok,
                    budget=budget if ok else None,
                    ticket=ticket,
                    deadline=deadline,
                )
                return response.status_code, response.headers, body
            finally:
                response.close()
        raise PrometheusError(f"{self.shown} redirected more than {MAX_REDIRECTS} times")

    def _read(
        self,
        response: requests.Response,
        watch: _Watch,
        limit: int,
        *,
        refuse: bool,
        budget: Budget | None,
        ticket: int,
        deadline: float,
    ) -> bytearray:
        declared = response.headers.get("Content-Length", "")
        plain = not response.headers.get("Content-Encoding")
        if refuse and plain and declared.isdigit() and int(declared) > limit:
            raise self._too_big(
                f"announced {int(declared) / MB:.0f} MB of one {self.what} (Content-Length), "
                f"over the {limit / MB:g} MB limit"
            )
        body = bytearray()
        try:
            return self._chunks(response, watch, body, limit, refuse, budget, ticket, deadline)
        except BaseException:
            if budget is not None:
                budget.give_back(ticket, len(body))
            raise

    def _chunks(
        self,
        response: requests.Response,
        watch: _Watch,
        body: bytearray,
        limit: int,
        refuse: bool,
        budget: Budget | None,
        ticket: int,
        deadline: float,
    ) -> bytearray:
        import requests

        try:
            for chunk in response.iter_content(_CHUNK):
                if self.stopped.is_set():
                    raise StoppedError(f"{self.shown}: abandoned")
                if len(body) + len(chunk) > limit:
                    if refuse:
                        raise self._too_big(f"sent more than {limit / MB:g} MB of one {self.what}")
                    body += chunk[: limit - len(body)]
                    break
                if budget is not None and not budget.grow(ticket, len(chunk), deadline):
                    raise self._lost(None, watch, late=True)  # waited for older answers
                body += chunk
                if watch.fired:
                    break
        except PrometheusError:
            raise
        except (requests.exceptions.RequestException, OSError, ValueError) as exc:
            if refuse or watch.fired:
                raise self._lost(exc, watch) from exc
        except Exception as exc:  # what urllib3 raises on a socket shut under it
            if watch.fired:
                raise self._lost(exc, watch) from exc
            raise
        if watch.fired:  # the body ended because the watchdog shut the socket
            raise self._lost(None, watch)
        return body

    def _too_big(self, what: str) -> TooBigError:
        return TooBigError(f"{self.shown} {what}: refused ({self.limit_option} raises the limit)")

    def _lost(self, exc: Exception | None, watch: _Watch, *, late: bool = False) -> NoAnswerError:
        import requests

        if watch.fired or late or isinstance(exc, requests.exceptions.Timeout):
            if self.deadline is not None and time.monotonic() >= self.deadline - 0.05:
                return NoAnswerError(
                    f"{self.shown} gave no whole {self.what} before the deadline of the whole "
                    "pull (--deadline)"
                )
            return NoAnswerError(
                f"{self.shown} gave no whole {self.what} within {self.timeout:g} s "
                "(--timeout bounds the whole request)"
            )
        if isinstance(exc, requests.exceptions.ConnectionError) and not isinstance(
            exc, requests.exceptions.ChunkedEncodingError
        ):
            return NoAnswerError(f"cannot reach {self.shown} ({type(exc).__name__})")
        name = type(exc).__name__ if exc is not None else "cut off"
        return NoAnswerError(f"{self.shown} broke off its {self.what} ({name})")


def _seconds(retry_after: str | None) -> float | None:
    """A ``Retry-After`` (seconds or an HTTP date) in seconds from now."""
    if not retry_after:
        return None
    text = retry_after.strip()
    try:
        return max(0.0, float(text))
    except ValueError:
        pass
    try:
        when = parsedate_to_datetime(text)
    except (TypeError, ValueError, IndexError):
        return None
    return max(0.0, when.timestamp() - time.time())


def _excerpt(body: bytes | bytearray) -> str:
    text = bytes(body[:400]).decode("utf-8", errors="replace")
    return " ".join(text.split())[:300]


__all__ = [
    "DEFAULT_MAX_ANSWER_MB",
    "DEFAULT_MAX_BODY_MB",
    "MAX_ANSWER_ENV",
    "MAX_BODY_ENV",
    "MAX_RETRY_AFTER_S",
    "Budget",
    "Http",
    "NoAnswerError",
    "StoppedError",
    "TooBigError",
    "instance_of",
    "new_session",
    "origin",
    "size_limit",
    "without_credentials",
]
