"""The sides a paste sets against each other: the runs of one source, and within a run the
records of each k where its records change k with nothing between to split the run (two
launches pasted as two fenced lines with their start-up cut). Each side's counts are summed
the way a run's are (``weighted_acceptance``), with what its lines print where they print no
counts: the per-position rates and the rate, taken as printed, and the label of a table's
row or column naming the setup.

Only sources with two sides or more are read, and only from a log or a paste of at most
``MAX_ROWS`` records: the instances of a Prometheus pull are servers of a fleet, not one
setup's variants.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from itertools import pairwise
from typing import Any

import polars as pl

from specscope.acceptance import weighted_acceptance
from specscope.store.reading import Store

# The keys of ``extra`` that name the setup a record was measured under (a table's row or
# column heading, a bullet's label).
_LABEL_KEYS = ("row", "column", "label", "setup")

# Past this many sides, or records, a source is a fleet's or a week's log, not a paste
# comparing setups (and its rows are not read again for a comparison nobody asked for).
MAX_SIDES = 16
MAX_ROWS = 5_000


@dataclass
class Side:
    """One side of a comparison: a run, or one k's records of a run whose records change k."""

    run_id: str
    source: str
    k: int | None
    split: bool  # one k's records of a run that holds several
    lines: tuple[int | None, int | None]
    agg: dict[str, Any]  # as ``Evidence.per_run`` holds a run's: counts, k, tau, curve
    printed: list[float] | None = None  # per-position rates as printed, where no counts
    labels: list[str] = field(default_factory=list)
    formats: frozenset[str] = frozenset()  # the lines it was read from: what it measures
    # A point along a dimension a table states (its first column a context length, the
    # row's place along it in ``at``): points along one are no setups compared.
    along: str | None = None
    at: float | None = None
    spread: tuple[float, float] | None = None  # a stated range of runs ('80-91%')

    @property
    def where(self) -> str:
        if self.lines[0] is not None and self.lines[1] not in (None, self.lines[0]):
            return f"lines {self.lines[0]}-{self.lines[1]}"
        return f"line {self.lines[0]}" if self.lines[0] is not None else f"run {self.run_id}"

    @property
    def name(self) -> str:
        """The side in a finding's words: its label where the paste gives one."""
        said = f"'{self.labels[0]}'" if self.labels else f"k={self.k}" if self.k else "the run"
        return f"{said} ({self.where})"


def side_rows(
    store: Store, run_ids: Iterable[str] | None = None, *, stated: Sequence[str] = ()
) -> list[Side]:
    """The sides of every source that holds two or more, in the order of their lines.
    ``stated``: the formats whose rate an author states (``evidence.STATED_RATE_FORMATS``)."""
    spec = store.spec_decode
    if run_ids is not None:
        run_ids = list(run_ids)
        spec = spec.filter(pl.col("run_id").is_in(run_ids))
    sources = _candidates(store, spec, run_ids)
    if not sources:
        return []
    wanted = [
        "source",
        "source_id",
        "run_id",
        "line",
        "end_line",
        "ts",
        "k",
        "format",
        "drafts",
        "draft_tokens",
        "accepted_tokens",
        "accepted_per_pos",
        "drafted_per_pos",
        "mean_acceptance_length",
        "per_position_rate",
        "acceptance_rate",
        "reported_rate",
        "extra",
    ]
    names = spec.collect_schema().names()
    rows = (
        spec.filter(pl.col("source_id").is_in(sources))
        .select(c for c in wanted if c in names)
        .filter(~pl.col("source").str.starts_with("http"))
        .collect()
    )
    kept = (
        rows.group_by("source_id", "run_id", "k")
        .len()
        .group_by("source_id")
        .agg(pl.len().alias("sides"), pl.col("len").sum().alias("rows"))
        .filter(pl.col("sides").is_between(2, MAX_SIDES) & (pl.col("rows") <= MAX_ROWS))
    )
    rows = rows.filter(pl.col("source_id").is_in(kept["source_id"].implode())).sort(
        "source_id", "line", maintain_order=True, nulls_last=True
    )
    if rows.is_empty():
        return []
    # Keyed on a copy of k: the sums add a most common k of their own.
    rows = rows.with_columns(pl.col("k").alias("side_k"))
    sums = weighted_acceptance(rows, ["run_id", "side_k"])
    out = []
    for key, part in rows.group_by("run_id", "side_k", maintain_order=True):
        run_id, k = str(key[0]), key[1]
        agg = _agg(sums, run_id, k, part, stated)
        out.append(
            Side(
                run_id=run_id,
                source=str(part["source"][0]),
                k=int(k) if k is not None else None,
                split=False,
                lines=(_int(part["line"].min()), _int(part["end_line"].max())),
                agg=agg,
                printed=_printed(part["per_position_rate"]),
                labels=_labels(part["extra"]) if "extra" in part.columns else [],
                formats=frozenset(part["format"].drop_nulls().to_list()),
                **(_point(part["extra"]) if "extra" in part.columns else {}),
            )
        )
    return _shaped(out)


def _candidates(store: Store, spec: pl.LazyFrame, run_ids: list[str] | None) -> list[str]:
    """The sources that may hold two sides: two runs with records, or a run of two k, and
    few enough records. From the runs and their rollups where those cover the rows (a
    fleet's store is not scanned for a paste's question), else from the rows."""
    if store.sums_cover_rows():
        runs = store.runs.select("run_id", "source_id", "spec_records")
        ks = store.run_sums.select("run_id", "k_values")
        if run_ids is not None:
            runs, ks = (t.filter(pl.col("run_id").is_in(run_ids)) for t in (runs, ks))
        multi_k = (
            ks.explode("k_values")
            .drop_nulls("k_values")
            .group_by("run_id")
            .agg(pl.col("k_values").n_unique().alias("ks"))
        )
        per_run = runs.filter(pl.col("spec_records") > 0).join(multi_k, on="run_id", how="left")
        found = (
            per_run.group_by("source_id")
            .agg(
                pl.len().alias("runs"),
                pl.col("ks").fill_null(1).max().alias("ks"),
                pl.col("spec_records").sum().alias("rows"),
            )
            .filter(((pl.col("runs") >= 2) | (pl.col("ks") >= 2)) & (pl.col("rows") <= MAX_ROWS))
            .collect()
        )
    else:
        found = (
            spec.group_by("source_id", "run_id", "k")
            .len()
            .group_by("source_id")
            .agg(pl.len().alias("sides"), pl.col("len").sum().alias("rows"))
            .filter(pl.col("sides").is_between(2, MAX_SIDES) & (pl.col("rows") <= MAX_ROWS))
            .collect()
        )
    return [str(s) for s in found["source_id"].to_list()]


def _agg(
    sums: pl.DataFrame, run_id: str, k: Any, part: pl.DataFrame, stated_formats: Sequence[str]
) -> dict[str, Any]:
    row = sums.filter(
        (pl.col("run_id") == run_id) & (pl.col("k").is_null() if k is None else pl.col("k") == k)
    ).to_dicts()[0]
    stated = part["format"].is_in(list(stated_formats))
    reported = part.filter(stated)["reported_rate"].drop_nulls()
    printed = part.filter(~stated).select(
        pl.coalesce("acceptance_rate", pl.col("per_position_rate").list.mean())
    )
    row["stated_rate"] = reported.mean() if reported.len() else None
    row["printed_rate"] = printed.to_series().drop_nulls().mean() if printed.height else None
    return row


def _shaped(sides: list[Side]) -> list[Side]:
    """Each run as one side, except a run whose records change k in turns (never back and
    forth, which is k varying by design: per batch size, dynamic drafting): a side per k.
    Records of no k in such a run go with no side."""
    by_run: dict[str, list[Side]] = {}
    for s in sides:
        by_run.setdefault(s.run_id, []).append(s)
    out = []
    for run_id, parts in by_run.items():
        known = [s for s in parts if s.k is not None]
        if len(known) >= 2 and _in_turns(known):
            for s in known:
                s.split = True
            out.extend(known)
        elif len(parts) == 1:
            out.append(parts[0])
        else:
            out.append(_whole(run_id, parts))
    # Sources left with one side have nothing to compare.
    per_source: dict[str, int] = {}
    for s in out:
        per_source[s.source] = per_source.get(s.source, 0) + 1
    return [s for s in out if per_source[s.source] >= 2]


def _in_turns(parts: list[Side]) -> bool:
    spans = sorted((s.lines[0] or 0, s.lines[1] or 0) for s in parts)
    return all(a[1] < b[0] for a, b in pairwise(spans))


def _whole(run_id: str, parts: list[Side]) -> Side:
    """A run whose k groups are not turns: one side, its counts summed again."""
    agg: dict[str, Any] = {"run_id": run_id}
    for key in ("records", "drafts", "draft_tokens", "accepted_tokens"):
        values = [p.agg.get(key) for p in parts if p.agg.get(key) is not None]
        agg[key] = sum(values) if values else None
    ks = [p.k for p in parts if p.k is not None]
    agg["k"] = max(set(ks), key=ks.count) if ks else None
    drafts, accepted = agg["drafts"], agg["accepted_tokens"]
    agg["mean_acceptance_length"] = (
        1 + accepted / drafts if drafts and accepted is not None else None
    )
    first = min((p.lines[0] for p in parts if p.lines[0] is not None), default=None)
    last = max((p.lines[1] for p in parts if p.lines[1] is not None), default=None)
    formats = frozenset().union(*(p.formats for p in parts))
    return Side(run_id, parts[0].source, agg["k"], False, (first, last), agg, formats=formats)


def _printed(rates: pl.Series) -> list[float] | None:
    lists = [r for r in rates.to_list() if r]
    if not lists or len({len(r) for r in lists}) != 1 or any(x is None for r in lists for x in r):
        return None
    return [sum(col) / len(lists) for col in zip(*lists, strict=True)]


def _labels(extra: pl.Series) -> list[str]:
    found: list[str] = []
    for text in extra.drop_nulls().to_list():
        try:
            value = json.loads(text)
        except ValueError:
            continue
        if not isinstance(value, dict):
            continue
        for key in _LABEL_KEYS:
            label = value.get(key)
            if isinstance(label, str) and label.strip() and label.strip() not in found:
                found.append(label.strip())
    return found


def _point(extra: pl.Series) -> dict[str, Any]:
    """Where a side lies along a dimension its table states, if it does (one record)."""
    texts = extra.drop_nulls().to_list()
    if len(texts) != 1:
        return {}
    try:
        value = json.loads(texts[0])
    except ValueError:
        return {}
    if not isinstance(value, dict) or not isinstance(value.get("dimension"), str):
        return {}
    at, spread = value.get("at"), value.get("range")
    return {
        "along": value["dimension"],
        "at": float(at) if isinstance(at, int | float) else None,
        "spread": (float(spread[0]), float(spread[1]))
        if isinstance(spread, list) and len(spread) == 2
        else None,
    }


def _int(value: object) -> int | None:
    return int(value) if isinstance(value, int | float) else None


__all__ = ["MAX_ROWS", "MAX_SIDES", "Side", "side_rows"]
