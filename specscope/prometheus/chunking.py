"""How a pull cuts a fleet: instances packed into chunks of a bounded number of series,
as the series API counts them (``pack``); the holds that keep the instances a stopped pull
did not reach where their chunk began (``Unread``); and why the series specscope's
recording rules record are not pulled in place of the raw counters (``recorded_note``)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import regex

from specscope.errors import PrometheusError
from specscope.prometheus.http import Http

DEFAULT_CHUNK_SERIES = 2_000  # series one chunk of a pull reads (each window, each request)
MAX_INSTANCES = 100_000  # instances one pull reads, in all its chunks
# Instances in one chunk: its matcher goes into the URL, which proxies cap at 8-16 KB.
MAX_CHUNK_INSTANCES = 200
RECORDED_PREFIX = "specscope:spec_decode"  # what `specscope rules` records (rules.PREFIX)
_RE2_SPECIAL = regex.compile(r"([\\.+*?()|\[\]{}^$])")


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


def instances_of(body: bytes | bytearray) -> dict[str, int]:
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


def pack(counts: Mapping[str, int], chunk_series: int) -> list[Chunk]:
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


def recorded_note(url: str, http: Http) -> str | None:
    """Why the series ``specscope rules`` records, when the server evaluates them, are not
    pulled in place of the raw counters; None when it records none (or cannot say)."""
    try:
        body = http.get(f"{url}/api/v1/rules", {"type": "record"})
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


_UNREAD = "unread"  # a watermark's key for an instance none of whose chunks was read


@dataclass
class Unread:
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


def named(marks: Mapping[str, float]) -> set[str]:
    """The instances a target's watermark names (holds aside)."""
    return {_instance_of_key(k) for k in marks if _unread_instance(k) is None}


def instance_starts(
    marks: Mapping[str, float], chunks: list[Chunk], default: float
) -> dict[str, float]:
    """Where each instance's read begins: its oldest watermark (or hold); for one with
    none (a server new since the last pull), the oldest of all watermarks."""
    oldest: dict[str, float] = {}
    for key, mark in marks.items():
        instance = _instance_of_key(key)
        oldest[instance] = min(mark, oldest.get(instance, mark))
    return {i: oldest.get(i, default) for c in chunks for i in c.instances or ()}


__all__ = [
    "DEFAULT_CHUNK_SERIES",
    "MAX_CHUNK_INSTANCES",
    "MAX_INSTANCES",
    "RECORDED_PREFIX",
    "Chunk",
    "Unread",
    "instance_starts",
    "instances_of",
    "named",
    "pack",
    "recorded_note",
]
