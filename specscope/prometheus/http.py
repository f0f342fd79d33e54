"""Reading a ``/metrics`` endpoint over HTTP, for ``scrape`` and ``watch`` alike. requests
is imported when the first poll starts, not with the package."""

from __future__ import annotations

from typing import TYPE_CHECKING

from specscope.errors import PrometheusError

if TYPE_CHECKING:
    import requests


class NoAnswerError(PrometheusError):
    """The endpoint could not be reached (as against an answer that was not 200)."""


def new_session() -> requests.Session:
    import requests

    return requests.Session()


def get_metrics(session: requests.Session, url: str, *, timeout: float, shown: str) -> str:
    """The exposition text ``url`` answers; a PrometheusError naming ``shown`` (the URL
    without credentials) when it cannot be reached or answers anything but 200."""
    import requests

    try:
        answer = session.get(url, timeout=timeout, headers={"Accept": "text/plain"})
    except requests.exceptions.RequestException as exc:
        raise NoAnswerError(f"cannot reach {shown} ({type(exc).__name__})") from exc
    if answer.status_code != 200:
        raise PrometheusError(f"{shown} answered HTTP {answer.status_code}")
    return answer.text


def instance_of(url: str) -> str:
    """The ``host:port`` a URL names (what Prometheus would label ``instance``)."""
    return url.split("://", 1)[1].split("/", 1)[0]


__all__ = ["NoAnswerError", "get_metrics", "instance_of", "new_session"]
