"""Every detector, run over one body of evidence: findings worst first.

One module per family of question: ``acceptance`` (zero, low, too few drafts),
``positions`` (cliff, k too large), ``load`` (concurrency, KV cache), ``speedup``
(benchmarks, stated comparisons, launches without speculation),
``prefix_cache``, ``drift`` and ``events``. Each detector takes an ``Evidence`` and returns
its findings; none reads a log or a server.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from datetime import timedelta
from typing import Any

from specscope.analysis.detectors.acceptance import insufficient, low, zero
from specscope.analysis.detectors.drift import drift
from specscope.analysis.detectors.events import errors
from specscope.analysis.detectors.load import concurrency, kv_saturation
from specscope.analysis.detectors.positions import cliff, k_too_large
from specscope.analysis.detectors.prefix_cache import prefix_cache
from specscope.analysis.detectors.speedup import no_speedup
from specscope.analysis.evidence import Evidence, gather
from specscope.analysis.findings import KINDS, Finding, Severity
from specscope.store.reading import Store
from specscope.thresholds import Config

DETECTORS: tuple[Callable[[Evidence], list[Finding]], ...] = (
    zero,
    low,
    cliff,
    k_too_large,
    concurrency,
    prefix_cache,
    no_speedup,
    kv_saturation,
    drift,
    errors,
)


def detect(
    store: Store,
    *,
    run_ids: Iterable[str] | None = None,
    since: timedelta | None = None,
    config: Config | None = None,
    reference: list[dict[str, Any]] | None = None,
) -> list[Finding]:
    """Every finding about the store's runs, worst first."""
    return findings_of(
        gather(store, run_ids=run_ids, since=since, config=config, reference=reference)
    )


def findings_of(ev: Evidence) -> list[Finding]:
    findings = [f for detector in DETECTORS for f in detector(ev)]
    # insufficient_data only for a run that no detector could say anything about.
    judged = {
        f.run_id
        for f in findings
        if f.run_id and not (f.kind == "error_signature" and f.severity == Severity.INFO)
    }
    findings += insufficient(ev, judged)
    findings.sort(key=lambda f: (-f.severity, KINDS.index(f.kind), f.run_id or ""))
    return findings
