"""``compare``: two runs side by side, the difference of each measure and its interval."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from specscope.analysis.evidence import gather
from specscope.analysis.forced import forced
from specscope.errors import UsageError
from specscope.schema import CONFIG_COLUMNS
from specscope.stats import newcombe, wilson
from specscope.store.reading import Store


@dataclass
class Comparison:
    run_a: str
    run_b: str
    config: list[dict[str, Any]]  # the configuration values that differ
    measures: list[dict[str, Any]]  # name, a, b, difference, interval
    notes: list[str] = field(default_factory=list)  # why a difference may not be the drafter's

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


def compare(store: Store, run_a: str, run_b: str) -> Comparison:
    ev = gather(store, run_ids=[run_a, run_b])
    aggs = [ev.per_run.get(run_a), ev.per_run.get(run_b)]
    for run_id, agg in zip((run_a, run_b), aggs, strict=True):
        if not agg or not agg.get("draft_tokens") or not agg.get("drafts"):
            raise UsageError(f"run {run_id} has no spec-decode counts to compare")
    a, b = aggs[0], aggs[1]
    assert a is not None and b is not None
    config = [
        {"field": c, "a": ev.runs[run_a].get(c), "b": ev.runs[run_b].get(c)}
        # The engine first: runs of two engines compare on the one definition of acceptance.
        for c in ("server", *CONFIG_COLUMNS)
        if ev.runs[run_a].get(c) != ev.runs[run_b].get(c)
    ]
    z = ev.config["evidence"]["z"]
    low, high = newcombe(a, b, z)
    measures = [
        {
            "name": "drafts",
            "a": a["drafts"],
            "b": b["drafts"],
            "difference": b["drafts"] - a["drafts"],
            "interval": None,
        },
        {
            "name": "acceptance_rate",
            "a": a["acceptance_rate"],
            "b": b["acceptance_rate"],
            "difference": b["acceptance_rate"] - a["acceptance_rate"],
            "interval": [low, high],
        },
        {
            "name": "mean_acceptance_length",
            "a": a["mean_acceptance_length"],
            "b": b["mean_acceptance_length"],
            "difference": (b["mean_acceptance_length"] or 0) - (a["mean_acceptance_length"] or 0),
            "interval": None,
        },
    ]
    pa, pb = a.get("accepted_per_pos") or [], b.get("accepted_per_pos") or []
    for i in range(min(len(pa), len(pb))):
        if pa[i] is None or pb[i] is None:
            continue
        ra, rb = pa[i] / a["drafts"], pb[i] / b["drafts"]
        la, ua = wilson(pa[i], a["drafts"], z)
        lb, ub = wilson(pb[i], b["drafts"], z)
        d = rb - ra
        measures.append(
            {
                "name": f"a_{i + 1}",
                "a": ra,
                "b": rb,
                "difference": d,
                "interval": [
                    d - ((rb - lb) ** 2 + (ua - ra) ** 2) ** 0.5,
                    d + ((ub - rb) ** 2 + (ra - la) ** 2) ** 0.5,
                ],
            }
        )
    notes = [
        f"run {run_id}: {said[0]}; its acceptance is the setting's, not the drafter's"
        for run_id in (run_a, run_b)
        if (said := forced(ev.runs[run_id])) is not None
    ]
    return Comparison(run_a, run_b, config, measures, notes)


def comparison_text(c: Comparison) -> str:
    lines = [f"A = {c.run_a}   B = {c.run_b}", *(f"  note: {n}" for n in c.notes)]
    for item in c.config:
        lines.append(f"  {item['field']}: {item['a']} -> {item['b']}")
    lines.append(f"  {'measure':24} {'A':>10} {'B':>10} {'B - A':>10}  interval (95%)")
    for m in c.measures:

        def fmt(v: Any) -> str:
            return f"{v:,.0f}" if isinstance(v, int) else f"{v:.3f}"

        interval = f"[{m['interval'][0]:+.3f}, {m['interval'][1]:+.3f}]" if m["interval"] else ""
        lines.append(
            f"  {m['name']:24} {fmt(m['a']):>10} {fmt(m['b']):>10} "
            f"{m['difference']:>+10.3f}  {interval}"
        )
    return "\n".join(lines)


__all__ = ["Comparison", "compare", "comparison_text"]
