"""Every detector, run over one body of evidence: findings worst first.

One module per family of question: ``acceptance`` (zero, low, too few drafts),
``positions`` (cliff, k too large), ``load`` (concurrency, KV cache), ``speedup``
(benchmarks, stated comparisons, launches without speculation),
``prefix_cache``, ``drift``, ``requests`` (acceptance request by request) and
``events``. Each detector takes an ``Evidence`` and returns its findings; none reads a log
or a server.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from datetime import timedelta
from typing import Any

import polars as pl

import specscope.analysis.detectors.screens as screens
from specscope.analysis.detectors.acceptance import insufficient, low, zero
from specscope.analysis.detectors.along import along
from specscope.analysis.detectors.depth_words import deeper_in_words
from specscope.analysis.detectors.drift import drift
from specscope.analysis.detectors.events import errors
from specscope.analysis.detectors.load import concurrency, kv_saturation, queued
from specscope.analysis.detectors.needed import gather_needed
from specscope.analysis.detectors.positions import cliff, k_too_large
from specscope.analysis.detectors.prefix_cache import prefix_cache
from specscope.analysis.detectors.requests import request_distribution
from specscope.analysis.detectors.screens import Screen, narrowed
from specscope.analysis.detectors.siblings import siblings
from specscope.analysis.detectors.speedup import no_speedup
from specscope.analysis.evidence import Evidence, gather
from specscope.analysis.findings import KINDS, Finding, Severity
from specscope.analysis.forced import set_apart
from specscope.store.reading import Store
from specscope.thresholds import Config

DETECTORS: tuple[Callable[[Evidence], list[Finding]], ...] = (
    zero,
    low,
    cliff,
    k_too_large,
    deeper_in_words,
    siblings,
    concurrency,
    prefix_cache,
    no_speedup,
    kv_saturation,
    queued,
    drift,
    along,
    request_distribution,
    errors,
)


# The detectors that read each run's rows, with the runs they need (``screens``): over
# thousands of runs, a polars call or two per run and detector is most of the time.
# (``drift`` splits every run's series in one pass: its screen would cost what it saves;
# ``needed`` still uses it to choose the rows to read.)
SCREENS: dict[Callable[[Evidence], list[Finding]], Screen] = {
    concurrency: screens.concurrency,
    kv_saturation: screens.kv_saturation,
    prefix_cache: screens.prefix_cache,
    no_speedup: screens.no_speedup,
}


def detect(
    store: Store,
    *,
    run_ids: Iterable[str] | None = None,
    since: timedelta | None = None,
    config: Config | None = None,
    reference: list[dict[str, Any]] | None = None,
) -> list[Finding]:
    """Every finding about the store's runs, worst first. From the rollups, reading the
    rows of the runs a detector needs only (``needed``), where they cover every row."""
    if since is None and store.sums_cover_rows() and _rows(store) > NEEDED_OVER_ROWS:
        return findings_of(
            gather_needed(store, run_ids=run_ids, config=config, reference=reference)
        )
    return findings_of(
        gather(store, run_ids=run_ids, since=since, config=config, reference=reference)
    )


# Over this many spec-decode rows, detect reads the rows of the runs it needs only: below,
# reading them all costs less than finding out which (most runs of a small store have a
# finding, whose lines and window come from its rows).
NEEDED_OVER_ROWS = 1_000_000


def _rows(store: Store) -> int:
    return int(store.spec_decode.select(pl.len()).collect().item())


def findings_of(ev: Evidence, *, screened: bool = True) -> list[Finding]:
    """Every finding about the evidence's runs, worst first. ``screened``: each detector
    that reads rows run by run looks only at the runs its screen lets through (the same
    findings, in far less time over many runs)."""
    findings = [f for detector in DETECTORS for f in _run(detector, ev, screened)]
    findings = set_apart(ev, findings)  # a run whose acceptance a setting forces
    # insufficient_data only for a run that no detector could say anything about (the
    # requests' distribution describes, it judges nothing).
    judged = {
        f.run_id
        for f in findings
        if f.run_id
        and not (
            f.severity == Severity.INFO and f.kind in ("error_signature", "request_acceptance")
        )
    }
    findings += insufficient(ev, judged)
    findings.sort(key=lambda f: (-f.severity, KINDS.index(f.kind), f.run_id or ""))
    return findings


def _run(
    detector: Callable[[Evidence], list[Finding]], ev: Evidence, screened: bool
) -> list[Finding]:
    screen = SCREENS.get(detector) if screened else None
    keep = screen(ev) if screen is not None else None
    if keep is None:
        return detector(ev)
    return detector(narrowed(ev, keep)) if keep else []
