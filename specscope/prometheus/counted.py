"""TensorRT-LLM's and SGLang's spec-decode counters as interval rows: read one interval at
a time through the definition pasted text is read with (``specscope.exposition``), since
their totals come from per-position denominators or from verify steps and generated
tokens rather than vLLM's three counters, which ``intervals`` reads in bulk."""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import polars as pl

from specscope.exposition import GAUGE_ROLES, Totals, spec_row
from specscope.prometheus.names import COUNTED, COUNTED_BY

Row = dict[str, Any]


def counted_rows(
    samples: pl.DataFrame,
    series: pl.DataFrame,
    after: float | None,
    not_stored: dict[str, int],
    max_k: int,
) -> pl.DataFrame:
    """TensorRT-LLM's and SGLang's spec-decode counters, one interval at a time through the
    one definition (``specscope.exposition.spec_row``, as pasted text is read): for each
    sample of a target's defining counter (TensorRT-LLM's drafted tokens per position,
    SGLang's verify steps), the change of each of its counters since the sample before
    and its gauges' values then.

    Both engines create a series at its first count (prometheus_client makes a labelled
    child on first use): a series that first shows after its target's first scrape
    counted from 0 at the scrape before, which keeps the interval it appears in exact.

    ``samples`` (``sid``, ``t``, ``v``) and ``series`` (``sid``, ``name``, ``tid``,
    ``position``) are a batch's, as ``intervals`` gathers them; rows carry ``tid`` and ``t``."""
    roles = {n: (engine, role) for engine, m in COUNTED.items() for n, role in m.items()}
    chosen = series.filter(pl.col("name").is_in(list(roles)))
    if chosen.is_empty():
        return pl.DataFrame()
    defining = {
        tid
        for name, tid in chosen.select("name", "tid").iter_rows()
        if roles[name][1] == COUNTED_BY[roles[name][0]]
    }
    # Each target's scrape times and each chosen series' samples, split once (not a
    # filter of every sample per series: a fleet's pull holds millions).
    points = samples.join(
        series.filter(pl.col("tid").is_in(list(defining))).select("sid", "tid"), on="sid"
    )
    times_of = {
        key[0]: np.unique(part["t"].to_numpy())
        for key, part in points.partition_by("tid", as_dict=True).items()
    }
    samples_of = {
        key[0]: part
        for key, part in points.filter(pl.col("sid").is_in(chosen["sid"].implode()))
        .partition_by("sid", as_dict=True)
        .items()
    }
    rows: list[Row] = []
    why: dict[str, int] = {}
    for tid in sorted(defining):
        times = times_of[tid]
        mine = chosen.filter(pl.col("tid") == tid)
        engine = roles[mine["name"][0]][0]
        changes: dict[float, list[tuple[str, int | None, float, float, bool]]] = {}
        gauges: dict[float, dict[str, float]] = {}
        for sid, name, position in mine.select("sid", "name", "position").iter_rows():
            if roles[name][0] != engine:
                continue
            role = roles[name][1]
            part = samples_of.get(sid)
            if part is None:
                continue
            t, v = part["t"].to_numpy(), part["v"].to_numpy()
            if role in GAUGE_ROLES:
                for ti, vi in zip(t.tolist(), v.tolist(), strict=True):
                    gauges.setdefault(ti, {})[role] = vi
                continue
            born = times[times < t[0]] if len(t) else times[:0]
            if len(born):  # created at its first count: 0 at the scrape before
                t, v = np.concatenate(([born[-1]], t)), np.concatenate(([0.0], v))
            for i in range(1, len(t)):
                restarted = bool(v[i] < v[i - 1])
                d = float(v[i] if restarted else v[i] - v[i - 1])
                changes.setdefault(float(t[i]), []).append(
                    (role, position, d, float(t[i - 1]), restarted)
                )
        for t_end in sorted(changes):
            if after is not None and t_end <= after:
                continue
            totals = Totals()
            t0, restarted, defined = t_end, False, False
            for role, position, d, before, reset in changes[t_end]:
                restarted |= reset
                if role == COUNTED_BY[engine]:
                    defined, t0 = True, min(t0, before) if defined else before
                if position is None:
                    totals.counters[role] = totals.counters.get(role, 0.0) + d
                else:
                    totals.positions.setdefault(role, {})[position] = d
            if not defined:
                continue
            totals.gauges = dict(gauges.get(t_end, {}))
            row, reason = spec_row(totals, max_k)
            if row is None or not row.get("drafts"):
                if row is None and not reason.startswith("speculative decoding never ran"):
                    why[reason] = why.get(reason, 0) + 1
                continue  # no drafting in the interval: logs print none either
            extra = row.pop("extra", None)
            rows.append(
                {
                    **row,
                    "tid": tid,
                    "t": t_end,
                    "interval_s": t_end - t0,
                    "format": "prometheus_sglang" if engine == "sglang" else "prometheus",
                    "counts": "since_restart" if restarted else "delta",
                    "extra": json.dumps(extra, sort_keys=True) if extra else None,
                }
            )
    for reason, n in why.items():  # counted here, said once by the caller over its batches
        not_stored[reason] = not_stored.get(reason, 0) + n
    if not rows:
        return pl.DataFrame()
    schema = pl.Schema(
        {
            "tid": pl.Int64(),
            "t": pl.Float64(),
            "interval_s": pl.Float64(),
            "format": pl.String(),
            "counts": pl.String(),
            "k": pl.Int64(),
            "drafts": pl.Int64(),
            "draft_tokens": pl.Int64(),
            "accepted_tokens": pl.Int64(),
            "accepted_per_pos": pl.List(pl.Int64()),
            "drafted_per_pos": pl.List(pl.Int64()),
            "per_position_rate": pl.List(pl.Float64()),
            "mean_acceptance_length": pl.Float64(),
            "acceptance_rate": pl.Float64(),
            "reported_rate": pl.Float64(),
            "partial": pl.Boolean(),
            "extra": pl.String(),
        }
    )
    columns = {c: [r.get(c) for r in rows] for c in schema}
    return pl.DataFrame(
        [pl.Series(c, values, dtype=schema[c], strict=False) for c, values in columns.items()]
    )


__all__ = ["counted_rows"]
