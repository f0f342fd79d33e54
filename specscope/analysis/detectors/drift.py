"""Acceptance that changes level within a run."""

from __future__ import annotations

import numpy as np
import polars as pl

from specscope.analysis.evidence import (
    Evidence,
    finding_for,
)
from specscope.analysis.findings import Confidence, Finding, Severity
from specscope.stats import coverage, drift_split


def drift(ev: Evidence) -> list[Finding]:
    out = []
    for run_id in ev.runs:
        rows = ev.spec_of(run_id).filter(
            pl.col("drafts").is_not_null()
            & (pl.col("draft_tokens") > 0)
            & pl.col("accepted_tokens").is_not_null()
        )
        if rows.height < 4:
            continue
        # A data-parallel run's engines are series of their own: taken together in time
        # order, one engine's level against another's reads as a change mid-run.
        parts = _engine_series(rows)
        for engine, part in parts:
            found = _drift_of(ev, run_id, _in_time_order(part), engine if len(parts) > 1 else None)
            if found is not None:
                out.append(found)
    return out


def _engine_series(rows: pl.DataFrame) -> list[tuple[int | None, pl.DataFrame]]:
    """The run's rows by engine (data parallel), or all of them as one series."""
    if "engine" not in rows.columns or rows["engine"].drop_nulls().n_unique() <= 1:
        return [(None, rows)]
    return [
        (key[0] if isinstance(key[0], int) else None, part)
        for key, part in rows.group_by("engine", maintain_order=True)
        if part.height >= 4
    ]


def _drift_of(ev: Evidence, run_id: str, rows: pl.DataFrame, engine: int | None) -> Finding | None:
    cfg = ev.config["acceptance_drift"]
    need = ev.config["evidence"]["min_drafts_per_side"]
    z = ev.config["evidence"]["z"]
    # One polars call, not six: over thousands of drifting runs each call counts.
    drafts, tokens, accepted = np.cumsum(
        rows.select(
            pl.col(c).fill_null(0) for c in ("drafts", "draft_tokens", "accepted_tokens")
        ).to_numpy(),
        axis=0,
    ).T
    best = drift_split(drafts, tokens, accepted, need, cfg["min_change"], z)
    if best is None:
        return None
    certain = drift_split(
        drafts, tokens, accepted, need, cfg["min_change"], ev.config["evidence"]["z_certain"]
    )
    r1, r2, i = best
    total_d = int(drafts[-1])
    when = rows[i]["ts"][0] or rows[i]["line"][0]
    of = f" of engine {engine}" if engine is not None else ""
    return finding_for(
        ev,
        "acceptance_drift",
        Severity.WARNING if r2 < r1 else Severity.INFO,
        run_id,
        rows,
        explanation=f"Acceptance{of} changes level within the run: {r1:.1%} before "
        f"{when}, {r2:.1%} after. Something changed mid-run: the workload, the load, "
        "or the server.",
        next_step="compare the engine stats and events around that point; if the "
        "workload changed there, the two parts are two workloads: ingest each part of "
        "the log on its own and compare them (specscope compare RUN_A RUN_B)",
        measured={
            "rate_before": r1,
            "rate_after": r2,
            "change_at": str(when),
            **({"engine": engine} if engine is not None else {}),
        },
        expected={"change below": cfg["min_change"]},
        sample={
            "drafts_before": int(drafts[i - 1]),
            "drafts_after": total_d - int(drafts[i - 1]),
        },
        confidence=Confidence(
            "certain" if certain is not None else "likely",
            "the two parts' "
            f"{coverage(ev.config['evidence']['z_certain'] if certain else z)}"
            " intervals do not overlap",
            {"drafts": total_d},
        ),
    )


def _in_time_order(rows: pl.DataFrame) -> pl.DataFrame:
    """A run's rows by time, then line; rows read from a log mostly are already."""
    keys = [c for c in ("ts", "line") if rows[c].null_count() < rows.height] or ["line"]
    if all(rows[c].null_count() == 0 and rows[c].is_sorted() for c in keys):
        return rows  # each key in order: so is the pair
    return rows.sort(keys, maintain_order=True)
