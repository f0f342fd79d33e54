"""``detect``: findings about the runs in a store, worst first.

Every rate comes from summed counts; every comparison carries a Wilson interval (drafts as
trials) and fires only when the intervals say the difference is real. Thresholds live in
``specscope/data/detect.toml`` and can be overridden with ``--config``; what methods usually
reach lives in ``specscope/data/reference.toml`` and can be extended with ``--reference``.
"""

from __future__ import annotations

import math
import tomllib
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from importlib import resources
from pathlib import Path
from statistics import median
from typing import Any

import numpy as np
import polars as pl

from specscope.acceptance import weighted_acceptance
from specscope.analysis.findings import KINDS, Finding, Severity, wilson, wilson_arrays
from specscope.errors import UsageError
from specscope.logs.derive import DRAFTER_KINDS
from specscope.store import rollup
from specscope.store.reading import Store

Config = dict[str, Any]
_QUANTIZED = (
    "int4",
    "awq",
    "gptq",
    "nvfp4",
    "fp4",
    "w4a16",
    "4bit",
    "autoround",
    "marlin",
    "int8",
    "w8a8",
    "bnb",
    "gguf",
    "exl2",
)


def _data(name: str) -> Config:
    text = (resources.files("specscope") / "data" / name).read_text(encoding="utf-8")
    return tomllib.loads(text)


def load_config(path: str | Path | None = None) -> Config:
    """The default thresholds, with those of ``path`` (a TOML file) laid over them."""
    config = _data("detect.toml")
    if path is not None:
        try:
            user = tomllib.loads(Path(path).read_text(encoding="utf-8"))
        except (OSError, tomllib.TOMLDecodeError) as exc:
            raise UsageError(f"cannot read the config ({exc})", path=str(path)) from exc
        for section, values in user.items():
            if not isinstance(values, dict) or section not in config:
                raise UsageError(f"unknown section [{section}]", path=str(path))
            config[section].update(values)
    return config


def load_reference(path: str | Path | None = None) -> list[dict[str, Any]]:
    entries = list(_data("reference.toml").get("entry", []))
    if path is not None:
        try:
            entries += tomllib.loads(Path(path).read_text(encoding="utf-8")).get("entry", [])
        except (OSError, tomllib.TOMLDecodeError) as exc:
            raise UsageError(f"cannot read the reference ({exc})", path=str(path)) from exc
    return entries


@dataclass
class Evidence:
    """The store's tables for the runs under study, joined the way detectors need them."""

    spec: pl.DataFrame  # spec_decode rows with the adjacent engine stats' running_reqs etc.
    stats: pl.DataFrame
    runs: dict[str, dict[str, Any]]
    events: pl.DataFrame
    bench: pl.DataFrame
    per_run: dict[str, dict[str, Any]]  # weighted acceptance per run
    config: Config
    reference: list[dict[str, Any]]
    # Detectors look at one run at a time. The frames are sorted by run (stably, so each
    # run keeps its order), so a run's rows are a zero-copy slice: no filter per run
    # (quadratic in runs) and no second copy of the table (partition_by).
    _spans: dict[str, dict[str, tuple[int, int]]] = field(default_factory=dict, repr=False)
    _slim: dict[str, pl.DataFrame] = field(default_factory=dict, repr=False)

    def _rows(self, table: str, run_ids: tuple[str, ...]) -> pl.DataFrame:
        # Detectors filter a run's rows again and again: without the lists and strings
        # that only the per-run sums read, a filter copies a third as much.
        if table not in self._slim:
            self._slim[table] = getattr(self, table).drop(_READ_ONCE, strict=False)
        frame = self._slim[table]
        if table not in self._spans:
            counts = frame.group_by("run_id", maintain_order=True).len()
            spans, offset = {}, 0
            for run_id, n in counts.iter_rows():
                spans[run_id] = (offset, n)
                offset += n
            self._spans[table] = spans
        parts = [frame.slice(*self._spans[table][r]) for r in run_ids if r in self._spans[table]]
        if len(parts) == 1:
            return parts[0]
        return pl.concat(parts) if parts else frame.clear()

    def spec_of(self, *run_ids: str) -> pl.DataFrame:
        """The spec rows (joined with their engine stats) of these runs."""
        return self._rows("spec", run_ids)

    def stats_of(self, *run_ids: str) -> pl.DataFrame:
        """The engine-stats rows of these runs."""
        return self._rows("stats", run_ids)


# Columns that no detector or report reads: not loaded (a store of 10 M rows is big).
_NOT_READ = (
    "format",
    "per_position_rate",
    "accepted_throughput",
    "drafted_throughput",
    "problems",
    "extra",
    "prompt_throughput",
    "generation_throughput",
    "external_prefix_cache_hit_rate",
    "mm_cache_hit_rate",
    "cpu_prefix_cache_hit_rate",
    "cpu_kv_cache_usage",
    "emitted_tokens",
    "system_efficiency",
    "counts",
    "reported_rate",
    "partial",
    "engines_aggregated",
    "deferred_reqs",
    "swapped_reqs",
    "preemptions",
    "corrupted_reqs",
    "kv_cache_device",
    "mean_ttft_ms",
    "mean_itl_ms",
    "source",  # the run's, in ``runs``
    "acceptance_rate",  # summed from the counts
)


# Read by the per-run sums only, which ``gather`` streams from the files.
_SUMMED = ("accepted_per_pos", "mean_acceptance_length")
# Not in the rows detectors filter run by run (``watch`` passes frames with every column):
# what the per-run sums and the stats join read, once.
_READ_ONCE = (*_SUMMED, *_NOT_READ, "source_id", "stats_line")


def gather(
    store: Store,
    *,
    run_ids: Iterable[str] | None = None,
    since: timedelta | None = None,
    now: datetime | None = None,
    config: Config | None = None,
    reference: list[dict[str, Any]] | None = None,
) -> Evidence:
    now = now or datetime.now()
    run_ids = list(run_ids) if run_ids is not None else None
    # The per-run sums come from the rollups written with the rows, or else stream from
    # the rows' files: the per-position lists are then not held with the rows the
    # detectors filter.
    if since is None and store.sums_cover_rows():
        per_run = rollup.per_run(store.run_sums)
        if run_ids:
            per_run = per_run.filter(pl.col("run_id").is_in(run_ids))
    else:
        scope = pl.lit(True)
        if run_ids:
            scope = scope & pl.col("run_id").is_in(run_ids)
        if since is not None:
            scope = scope & (pl.col("ts") >= now - since)
        per_run = weighted_acceptance(store.spec_decode.filter(scope), ["run_id"])
    # One chunk per column: a store's files come in many row groups, and polars filters
    # a frame of many chunks (or of columns chunked differently) far slower than one.
    # The run as a category: a string per row costs more to copy than all else together.
    as_category = pl.col("run_id").cast(pl.Categorical)
    return evidence_from(
        store.spec_decode.select(pl.exclude(*_NOT_READ, *_SUMMED))
        .with_columns(as_category)
        .collect()
        .rechunk(),
        store.engine_stats.select(pl.exclude(_NOT_READ))
        .with_columns(as_category)
        .collect()
        .rechunk(),
        store.runs.collect(),
        store.events.collect(),
        store.bench.collect(),
        run_ids=run_ids,
        since=since,
        now=now,
        config=config,
        reference=reference,
        per_run=per_run,
    )


def evidence_from(
    spec: pl.DataFrame,
    stats: pl.DataFrame,
    runs: pl.DataFrame,
    events: pl.DataFrame,
    bench: pl.DataFrame,
    *,
    run_ids: Iterable[str] | None = None,
    since: timedelta | None = None,
    now: datetime | None = None,
    config: Config | None = None,
    reference: list[dict[str, Any]] | None = None,
    per_run: pl.DataFrame | None = None,
) -> Evidence:
    """Evidence from frames of the store's tables (a store, or what `watch` holds).
    ``per_run``: ``weighted_acceptance`` by run of the same rows, when made already."""
    wanted = set(run_ids or ())
    if wanted:
        unknown = wanted - set(runs["run_id"].to_list())
        if unknown:
            raise UsageError(f"no run {sorted(unknown)[0]} in the store (`specscope runs`)")
        spec, stats, runs, events, bench = (
            t.filter(pl.col("run_id").is_in(wanted)) for t in (spec, stats, runs, events, bench)
        )
    if since is not None:
        cutoff = (now or datetime.now()) - since
        spec, stats = (t.filter(pl.col("ts") >= cutoff) for t in (spec, stats))
    joined = _by_run(_join_stats(spec, stats))
    stats = _by_run(stats)
    if per_run is None:
        per_run = weighted_acceptance(joined, ["run_id"])
    sums = {r["run_id"]: r for r in per_run.to_dicts()}
    # In the order the runs' rows come (findings and reports list runs in it).
    order = joined["run_id"].unique(maintain_order=True).to_list()
    sums = {r: sums[r] for r in order if r in sums} | sums
    return Evidence(
        spec=joined,
        stats=stats,
        runs={r["run_id"]: r for r in runs.to_dicts()},
        events=events,
        bench=bench,
        per_run=sums,
        config=config or load_config(),
        reference=reference if reference is not None else load_reference(),
    )


def _by_run(frame: pl.DataFrame) -> pl.DataFrame:
    """Each run's rows together (so that a run is a slice). A store read from logs has them
    so already, in log order; rows from several pulls of one target need the sort."""
    if frame.is_empty():
        return frame
    together = frame.select(
        pl.col("run_id").rle_id().max() + 1 == pl.col("run_id").n_unique()
    ).item()
    return frame if together else frame.sort("run_id", maintain_order=True, nulls_last=True)


def _join_stats(spec: pl.DataFrame, stats: pl.DataFrame) -> pl.DataFrame:
    """Each spec record with the engine stats of its interval: the stats line just before it
    in a log, the scrape with the same timestamp in a pull."""
    wanted = ["running_reqs", "waiting_reqs", "prefix_cache_hit_rate", "kv_cache_usage"]
    # A search in the sorted (source, line) keys of the stats, not a hash join: over
    # millions of rows it is several times faster and builds no table of gigabytes.
    codes: dict[str, int] = {}
    logs = stats.select("source_id", "line", *wanted).filter(pl.col("line").is_not_null())
    have = _source_codes(logs, codes) * (1 << 40) + logs["line"].to_numpy()
    order = np.argsort(have, kind="stable")
    have = have[order]
    stats_line = spec["stats_line"].fill_null(-1).to_numpy()
    want_np = np.where(stats_line < 0, -1, _source_codes(spec, codes) * (1 << 40) + stats_line)
    at = np.minimum(np.searchsorted(have, want_np), max(len(have) - 1, 0))
    found = (want_np >= 0) & (have[at] == want_np) if len(have) else np.zeros(len(want_np), bool)
    index = pl.Series(np.where(found, order[at] if len(have) else 0, 0), dtype=pl.UInt32)
    index = index.set(pl.Series(~found), None) if (~found).any() else index  # type: ignore[arg-type]
    # The columns gathered together: a frame's gather runs over its columns side by side.
    out = spec.hstack(logs.select(wanted)[index].get_columns())
    from_pulls = stats.filter(pl.col("line").is_null())
    if from_pulls.is_empty():
        return out
    # Joins keep the left order: a group's rows, and groups, in the order of the input.
    out = out.join(
        from_pulls.select("run_id", "engine", "ts", *[pl.col(c).alias(f"{c}_p") for c in wanted]),
        on=["run_id", "engine", "ts"],
        how="left",
        nulls_equal=True,
        maintain_order="left",
    )
    return out.with_columns(pl.coalesce(c, f"{c}_p").alias(c) for c in wanted).drop(
        [f"{c}_p" for c in wanted]
    )


def _source_codes(frame: pl.DataFrame, codes: dict[str, int]) -> np.ndarray:
    """Each row's source as a number (the same in every frame given ``codes``). A store's
    rows come a source at a time, so the runs of equal values are few: no hash per row."""
    runs = frame.select(pl.col("source_id").rle()).unnest("source_id")
    numbers = [codes.setdefault(v, len(codes)) for v in runs["value"].to_list()]
    return np.repeat(np.asarray(numbers, dtype=np.int64), runs["len"].to_numpy())


# -- helpers ---------------------------------------------------------------------------------


def _rows_of(ev: Evidence, run_id: str) -> pl.DataFrame:
    return ev.spec_of(run_id)


def _lines(rows: pl.DataFrame) -> tuple[int | None, int | None]:
    if rows.is_empty() or rows["line"].null_count() == rows.height:
        return (None, None)
    return (rows["line"].min(), rows["end_line"].max() or rows["line"].max())


def _window(rows: pl.DataFrame) -> tuple[datetime | None, datetime | None]:
    if rows.is_empty() or rows["ts"].null_count() == rows.height:
        return (None, None)
    return (rows["ts"].min(), rows["ts"].max())


def _finding(
    ev: Evidence,
    kind: str,
    severity: Severity,
    run_id: str | None,
    rows: pl.DataFrame | None,
    **kw: Any,
) -> Finding:
    run = ev.runs.get(run_id or "", {})
    source = run.get("source") if run else None
    if rows is not None and not rows.is_empty():
        source = ev.runs.get(rows["run_id"][0], {}).get("source", source)
    return Finding(
        kind=kind,
        severity=severity,
        run_id=run_id,
        source=source,
        lines=_lines(rows) if rows is not None else (None, None),
        window=_window(rows) if rows is not None else (None, None),
        **kw,
    )


def _drafts(agg: Mapping[str, Any]) -> int:
    return int(agg.get("drafts") or 0)


def _method(run: Mapping[str, Any]) -> str | None:
    method = run.get("spec_method")
    if method is None and run.get("drafter_loader") == "MTP":
        method = "mtp"
    return method


def _rate_interval(accepted: float, drafts: float, k: float, z: float) -> tuple[float, float]:
    """Wilson bounds of the acceptance rate, with drafts as trials (a draft's k tokens are
    not independent): the per-draft mean acceptance over k, bounded like a proportion."""
    if drafts <= 0 or k <= 0:
        return (0.0, 1.0)
    return wilson(accepted / k, drafts, z)


# -- detectors -------------------------------------------------------------------------------


def _insufficient(ev: Evidence) -> list[Finding]:
    out = []
    need = ev.config["evidence"]["min_drafts"]
    for run_id, agg in ev.per_run.items():
        drafts = _drafts(agg)
        if agg.get("draft_tokens") is not None and drafts < need:
            rows = _rows_of(ev, run_id)
            out.append(
                _finding(
                    ev,
                    "insufficient_data",
                    Severity.INFO,
                    run_id,
                    rows,
                    explanation=f"{drafts} drafts are too few to judge this run: a rate on so few "
                    f"drafts says little (a 100% on 66 tokens says nothing).",
                    next_step="collect more intervals (a longer log, a longer pull) before judging",
                    measured={"drafts": drafts, "acceptance_rate": agg.get("acceptance_rate")},
                    expected={"drafts at least": need},
                    sample={"records": agg["records"]},
                )
            )
    return out


def _enough(ev: Evidence, agg: Mapping[str, Any]) -> bool:
    return _drafts(agg) >= ev.config["evidence"]["min_drafts"]


def _zero(ev: Evidence) -> list[Finding]:
    out = []
    limit = ev.config["zero_acceptance"]["max_rate"]
    for run_id, agg in ev.per_run.items():
        rate = agg.get("acceptance_rate")
        if rate is None or not _enough(ev, agg) or rate > limit:
            continue
        run = ev.runs.get(run_id, {})
        explanation, step = _why_zero(ev, run_id, run)
        rows = _rows_of(ev, run_id)
        out.append(
            _finding(
                ev,
                "zero_acceptance",
                Severity.CRITICAL,
                run_id,
                rows,
                explanation=explanation,
                next_step=step,
                measured={
                    "acceptance_rate": rate,
                    "accepted_tokens": agg["accepted_tokens"],
                    "draft_tokens": agg["draft_tokens"],
                    "mean_acceptance_length": agg.get("mean_acceptance_length"),
                },
                expected={"acceptance_rate above": limit},
                sample={"drafts": _drafts(agg), "records": agg["records"]},
            )
        )
    return out


def _why_zero(ev: Evidence, run_id: str, run: Mapping[str, Any]) -> tuple[str, str]:
    method = _method(run) or _method_before(ev, run)
    quant = (run.get("quantization") or "").lower()
    quantized = any(q in quant for q in _QUANTIZED)
    codes = set(ev.events.filter(pl.col("run_id") == run_id)["code"].to_list()) | set(
        ev.events.filter(pl.col("source_id") == run.get("source_id", ""))["code"].to_list()
    )
    if quantized and method in (None, "mtp"):
        head = "an MTP head" if method == "mtp" else "a draft head (MTP?)"
        return (
            f"Drafting happens but nothing is accepted, on a quantized target ({quant}) with "
            f"{head}: the known INT4 breakage. The head predicts from the full-precision "
            "model's hidden states; the quantized target's logits differ enough that its "
            "drafts never match (seed 003: 0.0% on every INT4 quant, 85.8% on BF16).",
            "serve the BF16 or FP8 checkpoint (or a quantization that keeps the MTP layer in "
            "high precision), or turn speculation off for this model",
        )
    draft = (run.get("draft_model") or "").lower()
    target = (run.get("model") or "").lower()
    if method == "draft_model" or "tensor_size_mismatch" in codes:
        family = _family(draft) != _family(target) if draft and target else None
        detail = f" ({run.get('draft_model')} for {run.get('model')})" if family else ""
        return (
            "Drafting happens but nothing is accepted, with a separate draft model"
            f"{detail}: a draft from another family or size does not share the target's "
            "tokenizer or architecture, so its tokens never match (a hidden-size mismatch "
            "like 'size of tensor a (5120) must match ... (4096)' is the same fault).",
            "use a draft model of the target's own family and tokenizer (for Qwen2.5-32B, "
            "Qwen2.5-0.5B), or the model's MTP head if it has one",
        )
    if quant == "" and method == "mtp":
        return (
            "Drafting happens but nothing is accepted, with an MTP head (the run, or the "
            "launch before it in this log, loaded one). On an INT4-quantized target (AWQ, "
            "GPTQ, NVFP4, AutoRound) this is the known breakage: the head's drafts never match "
            "the quantized model (seed 003: 0.0% on every quant, 85.8% on BF16). The log "
            "does not say the quantization.",
            "if the target is quantized, serve the BF16 or FP8 checkpoint; re-ingest with "
            "--set quantization=... to record it; otherwise check the MTP weights are loaded",
        )
    if quant == "" and method is None:
        return (
            "Drafting happens but nothing is accepted. The log does not say the method or the "
            "quantization: with an MTP head on an INT4 target this is the known breakage; with "
            "a draft model, a tokenizer mismatch; otherwise an unloaded head.",
            "re-ingest with --set quantization=... --set spec_method=..., or check the startup "
            "log for 'Detected MTP model' and the speculative config",
        )
    return (
        "Drafting happens but nothing is accepted: the draft head is probably not loaded or "
        "is randomly initialised (a checkpoint without its MTP/EAGLE weights, a wrong "
        "speculative model path).",
        "check the startup log for the drafter's weights being loaded, and that the "
        "speculative config points at the head trained for this exact target",
    )


def _method_before(ev: Evidence, run: Mapping[str, Any]) -> str | None:
    """The method of the nearest earlier run of the same source that states one: a paste
    shows the startup of one launch and the metrics of the next, of the same setup."""
    before = [
        r
        for r in ev.runs.values()
        if r.get("source_id") == run.get("source_id")
        and (r.get("ordinal") or 0) < (run.get("ordinal") or 0)
        and _method(r)
    ]
    return _method(max(before, key=lambda r: r["ordinal"])) if before else None


def _family(name: str) -> str:
    base = name.rsplit("/", 1)[-1].lower()
    for sep in ("-", "_", "."):
        base = base.replace(sep, " ")
    words = base.split()
    return words[0] if words else ""


def _low(ev: Evidence) -> list[Finding]:
    out = []
    cfg = ev.config["low_acceptance"]
    z = ev.config["evidence"]["z"]
    zero = ev.config["zero_acceptance"]["max_rate"]
    for run_id, agg in ev.per_run.items():
        run = ev.runs.get(run_id, {})
        method = _method(run)
        curve = agg.get("per_position") or []
        if method is None or not curve or not _enough(ev, agg):
            continue
        if (agg.get("acceptance_rate") or 0) <= zero:
            continue  # zero_acceptance speaks for it
        entry = _reference_for(ev.reference, method, run.get("model"), agg.get("k"))
        if entry is None or entry.get("a1") is None:
            continue
        counts = agg.get("accepted_per_pos") or []
        a1, drafts = curve[0], _drafts(agg)
        low, high = wilson(counts[0], drafts, z) if counts else (a1, a1)
        ref = float(entry["a1"])
        if high >= cfg["fraction_of_reference"] * ref:
            continue
        severity = Severity.CRITICAL if high < cfg["critical_fraction"] * ref else Severity.WARNING
        rows = _rows_of(ev, run_id)
        out.append(
            _finding(
                ev,
                "low_acceptance",
                severity,
                run_id,
                rows,
                explanation=f"The first draft position is accepted {a1:.0%} of the time; {method} "
                f"usually reaches about {ref:.0%} there ({entry.get('workload', '')}). "
                f"Source: {entry.get('source', 'reference table')}.",
                next_step="compare with a run on the unquantized target and with prefix "
                "caching off; check that the drafter was trained for this exact target and "
                "chat template",
                measured={
                    "a1": a1,
                    "a1_interval": [low, high],
                    "mean_acceptance_length": agg.get("mean_acceptance_length"),
                },
                expected={"a1": ref, "method": method},
                sample={"drafts": drafts},
            )
        )
    return out


def _reference_for(
    entries: list[dict[str, Any]], method: str, model: str | None, k: int | None
) -> dict[str, Any] | None:
    best = None
    for e in entries:
        if e.get("method") != method:
            continue
        if e.get("model") and (not model or e["model"].lower() not in model.lower()):
            continue
        score = (1 if e.get("model") else 0) + (1 if e.get("k") == k else 0)
        if best is None or score > best[0]:
            best = (score, e)
    return best[1] if best else None


def _cliff(ev: Evidence) -> list[Finding]:
    out = []
    cfg = ev.config["position_cliff"]
    for run_id, agg in ev.per_run.items():
        a = [x for x in (agg.get("per_position") or []) if x is not None]
        if len(a) < 2 or not _enough(ev, agg):
            continue
        conditional = [a[0]] + [
            a[i] / a[i - 1] if a[i - 1] > 0 else math.nan for i in range(1, len(a))
        ]
        for i in range(1, len(a)):
            if a[i - 1] < cfg["min_previous"] or math.isnan(conditional[i]):
                continue
            others = [c for j, c in enumerate(conditional) if j != i and not math.isnan(c)]
            typical = median(others) if others else 1.0
            if conditional[i] < cfg["max_conditional_ratio"] * typical:
                rows = _rows_of(ev, run_id)
                out.append(
                    _finding(
                        ev,
                        "position_cliff",
                        Severity.WARNING,
                        run_id,
                        rows,
                        explanation=f"Position {i} is accepted {a[i]:.0%} of the time while "
                        f"position {i - 1} is at {a[i - 1]:.0%}: given position {i - 1} was "
                        "accepted, "
                        f"position {i} is only {conditional[i]:.0%} likely, against "
                        f"{typical:.0%} typically. Positions from {i} on are broken, not weaker.",
                        next_step="check the drafter's multi-step support (MTP heads forwarded "
                        "several times, a k above what the head was trained for), or use k="
                        f"{i}",
                        measured={
                            "position": i,
                            "a_previous": a[i - 1],
                            "a_position": a[i],
                            "conditional": conditional[i],
                        },
                        expected={"conditional about": typical},
                        sample={"drafts": _drafts(agg)},
                    )
                )
                break
    return out


def cost_ratio(
    config: Config, method: str | None, override: float | None = None
) -> tuple[float, str]:
    if override is not None:
        return override, "--cost-ratio"
    table = config["cost_ratio"]
    if method in table:
        return float(table[method]), f"default for {method}"
    return float(table["default"]), "default (method unknown)"


def k_curve(a: list[float], c: float, block: bool) -> list[dict[str, float]]:
    """tau(k') and the expected speedup S(k') for k' = 1..k (Leviathan et al. 2023):
    chain drafters pay per position, S = tau/(1 + c k'); block drafters pay one pass,
    S = tau/(1 + c)."""
    out = []
    tau = 1.0
    for kk, ai in enumerate(a, start=1):
        tau += ai
        out.append({"k": kk, "tau": tau, "speedup": tau / (1 + (c if block else c * kk))})
    return out


def _k_too_large(ev: Evidence) -> list[Finding]:
    out = []
    cfg = ev.config["k_too_large"]
    for run_id, agg in ev.per_run.items():
        a = [x for x in (agg.get("per_position") or []) if x is not None]
        k = len(a)
        if k < 2 or not _enough(ev, agg) or (agg.get("acceptance_rate") or 0) <= 0.01:
            continue
        run = ev.runs.get(run_id, {})
        method = _method(run)
        block = DRAFTER_KINDS.get(method or "") == "block"
        c, _ = cost_ratio(ev.config, method)
        curve = k_curve(a, c, block)
        # The marginal rule needs the drafter's cost: only for a known chain drafter. Block
        # drafters pay one pass for any k, and an unknown method gets the floor alone.
        chain = DRAFTER_KINDS.get(method or "") == "chain"
        best = max(curve, key=lambda p: p["speedup"])["k"] if chain else k
        floor_k = k
        while floor_k > 1 and a[floor_k - 1] < cfg["floor"]:
            floor_k -= 1
        suggested = int(min(best, floor_k))
        saving = (k - suggested) / k
        if saving < cfg["min_saving"]:
            continue
        rows = _rows_of(ev, run_id)
        estimate = (
            " For a block drafter (DFlash) the mean length at a smaller k is an "
            "estimate: the block is drafted at once and is not a prefix of itself."
            if block or method is None
            else ""
        )
        out.append(
            _finding(
                ev,
                "k_too_large",
                Severity.WARNING if saving >= 0.4 else Severity.INFO,
                run_id,
                rows,
                explanation=f"Positions {suggested + 1}-{k} accept "
                f"{', '.join(f'{x:.1%}' for x in a[suggested:][:6])}"
                f"{' ...' if k - suggested > 6 else ''}: too little to pay for drafting and "
                f"verifying them (marginal rule a(k+1) > c*S(k), c={c}, or the {cfg['floor']:.0%} "
                f"floor).{estimate}",
                next_step=f"use num_speculative_tokens={suggested}: mean acceptance length "
                f"{curve[suggested - 1]['tau']:.2f} instead of {curve[-1]['tau']:.2f}, with "
                f"{saving:.0%} less draft work (see `specscope advise --run {run_id}`)",
                measured={"k": k, "tail": a[suggested:], "tau_k": curve[-1]["tau"]},
                expected={
                    "k": suggested,
                    "tau": curve[suggested - 1]["tau"],
                    "draft_work_saved": saving,
                },
                sample={"drafts": _drafts(agg)},
            )
        )
    return out


def _setups(ev: Evidence) -> dict[tuple[Any, ...], list[str]]:
    """Runs of one source with the same configuration: one setup measured at different
    loads (a user restarting the same server to change concurrency)."""
    keys = ("spec_method", "k", "model", "quantization", "tensor_parallel_size", "hardware")
    groups: dict[tuple[Any, ...], list[str]] = {}
    for run_id, run in ev.runs.items():
        groups.setdefault((run.get("source_id"), *(run.get(k) for k in keys)), []).append(run_id)
    return groups


def _side(rows: pl.DataFrame) -> dict[str, Any]:
    drafts = rows["drafts"].sum() if rows.height else 0
    accepted = rows["accepted_tokens"].sum() if rows.height else 0
    tokens = rows["draft_tokens"].sum() if rows.height else 0
    k = tokens / drafts if drafts else 0
    return {
        "drafts": int(drafts or 0),
        "accepted": int(accepted or 0),
        "draft_tokens": int(tokens or 0),
        "k": k,
        "rate": accepted / tokens if tokens else None,
    }


def _concurrency(ev: Evidence) -> list[Finding]:
    out = []
    cfg = ev.config["concurrency_collapse"]
    need = ev.config["evidence"]["min_drafts_per_side"]
    z = ev.config["evidence"]["z"]
    usable = (
        pl.col("drafts").is_not_null()
        & pl.col("running_reqs").is_not_null()
        & (pl.col("running_reqs") >= 1)
    )
    groups = [[r] for r in ev.runs] + [g for g in _setups(ev).values() if len(g) > 1]
    reported: set[str] = set()
    for group in groups:
        rows = ev.spec_of(*group).filter(usable)
        one, many = (
            _side(rows.filter(pl.col("running_reqs") == 1)),
            _side(rows.filter(pl.col("running_reqs") >= 2)),
        )
        if one["drafts"] < need or many["drafts"] < need or one["rate"] is None:
            continue
        if many["rate"] is None or many["rate"] >= cfg["max_ratio"] * one["rate"]:
            continue
        lo1, _ = _rate_interval(one["accepted"], one["drafts"], one["k"], z)
        _, hi2 = _rate_interval(many["accepted"], many["drafts"], many["k"], z)
        if hi2 >= lo1 or reported & set(group):
            continue
        reported |= set(group)
        run_id = group[0] if len(group) == 1 else ",".join(group)
        out.append(
            _finding(
                ev,
                "concurrency_collapse",
                Severity.CRITICAL,
                run_id,
                rows,
                explanation=f"Acceptance is {one['rate']:.1%} with one request running and "
                f"{many['rate']:.1%} with two or more"
                f"{'' if len(group) == 1 else ' (runs of one setup at different loads)'}: "
                "drafts stop matching as soon as requests share a batch. That points at batched "
                "drafting (per-request state, attention metadata, padding) rather than the model.",
                next_step="reproduce with --max-num-seqs 1 against 2, try another attention "
                "backend, and report it upstream with this evidence",
                measured={"rate_one_running": one["rate"], "rate_two_or_more": many["rate"]},
                expected={"rate_two_or_more above": cfg["max_ratio"] * one["rate"]},
                sample={"drafts_one": one["drafts"], "drafts_two_or_more": many["drafts"]},
            )
        )
    return out


def _prefix_cache(ev: Evidence) -> list[Finding]:
    out = []
    cfg = ev.config["prefix_cache_penalty"]
    need = ev.config["evidence"]["min_drafts_per_side"]
    z = ev.config["evidence"]["z"]
    by_setup: dict[tuple[Any, Any], dict[bool, list[str]]] = {}
    for run_id, run in ev.runs.items():
        caching = run.get("enable_prefix_caching")
        if caching is None or _method(run) is None:
            continue
        by_setup.setdefault((run.get("model"), _method(run)), {}).setdefault(caching, []).append(
            run_id
        )
    for (model, method), sides in by_setup.items():
        if True not in sides or False not in sides:
            continue
        rows_on = ev.spec_of(*sides[True])
        rows_off = ev.spec_of(*sides[False])
        on, off = _side(rows_on), _side(rows_off)
        if on["drafts"] < need or off["drafts"] < need or on["rate"] is None or off["rate"] is None:
            continue
        _, hi_on = _rate_interval(on["accepted"], on["drafts"], on["k"], z)
        lo_off, _ = _rate_interval(off["accepted"], off["drafts"], off["k"], z)
        if off["rate"] - on["rate"] >= cfg["min_drop"] and hi_on < lo_off:
            out.append(
                _finding(
                    ev,
                    "prefix_cache_penalty",
                    Severity.WARNING,
                    ",".join(sides[True]),
                    rows_on,
                    explanation=f"With prefix caching on, {method} on {model} accepts "
                    f"{on['rate']:.1%}; with it off, {off['rate']:.1%}. Cached prefixes feed "
                    "the drafter hidden states it did not compute itself (seed 002: turning "
                    "caching off lifted DFlash from 20% to 30-35%).",
                    next_step="serve with --no-enable-prefix-caching while this is open, and "
                    "report the pair of runs upstream",
                    measured={"rate_caching_on": on["rate"], "rate_caching_off": off["rate"]},
                    expected={"difference below": cfg["min_drop"]},
                    sample={"drafts_on": on["drafts"], "drafts_off": off["drafts"]},
                )
            )
    # Within a run: acceptance against the hit rate of the same interval.
    for run_id in ev.runs:
        rows = ev.spec_of(run_id).filter(
            pl.col("prefix_cache_hit_rate").is_not_null() & pl.col("drafts").is_not_null()
        )
        if rows.height < 6:
            continue
        middle = rows["prefix_cache_hit_rate"].median()
        low, high = (
            _side(rows.filter(pl.col("prefix_cache_hit_rate") <= middle)),
            _side(rows.filter(pl.col("prefix_cache_hit_rate") > middle)),
        )
        if (
            low["drafts"] < need
            or high["drafts"] < need
            or low["rate"] is None
            or high["rate"] is None
        ):
            continue
        spread = (
            rows.filter(pl.col("prefix_cache_hit_rate") > middle)["prefix_cache_hit_rate"].mean()
            - rows.filter(pl.col("prefix_cache_hit_rate") <= middle)["prefix_cache_hit_rate"].mean()
        )
        if not spread or spread <= 0:
            continue
        slope = (high["rate"] - low["rate"]) / spread
        _, hi_high = _rate_interval(high["accepted"], high["drafts"], high["k"], z)
        lo_low, _ = _rate_interval(low["accepted"], low["drafts"], low["k"], z)
        if slope <= -cfg["min_slope"] and hi_high < lo_low:
            out.append(
                _finding(
                    ev,
                    "prefix_cache_penalty",
                    Severity.WARNING,
                    run_id,
                    rows,
                    explanation="Within this run, intervals with more prefix-cache hits accept "
                    f"less: {low['rate']:.1%} at lower hit rates, {high['rate']:.1%} at higher "
                    "ones.",
                    next_step="compare a run with --no-enable-prefix-caching on the same workload",
                    measured={
                        "rate_low_hit_rate": low["rate"],
                        "rate_high_hit_rate": high["rate"],
                        "slope_per_hit_rate": slope,
                    },
                    expected={"slope above": -cfg["min_slope"]},
                    sample={"drafts_low": low["drafts"], "drafts_high": high["drafts"]},
                )
            )
    return out


def _no_speedup(ev: Evidence) -> list[Finding]:
    out = []
    limit = ev.config["no_speedup"]["max_ratio"]
    bench = ev.bench.filter(pl.col("output_throughput").is_not_null())
    if bench.is_empty():
        return out
    spec_rows = bench.filter(pl.col("speculative").fill_null(False))
    base_rows = bench.filter(~pl.col("speculative").fill_null(False))
    for s in spec_rows.to_dicts():
        peers = base_rows.filter(
            (pl.col("max_concurrency") == s["max_concurrency"])
            if s["max_concurrency"] is not None
            else pl.col("max_concurrency").is_null()
        )
        if s.get("model"):
            same = peers.filter(pl.col("model") == s["model"])
            peers = same if same.height else peers
        if peers.is_empty():
            continue
        baseline = peers["output_throughput"].max()
        ratio = s["output_throughput"] / baseline if baseline else None
        if ratio is None or ratio > limit:
            continue
        out.append(
            Finding(
                kind="no_speedup",
                severity=Severity.WARNING,
                run_id=s["run_id"],
                source=s["source"],
                lines=(s["line"], s["end_line"]),
                window=(None, None),
                explanation="With speculation the benchmark produced "
                f"{s['output_throughput']:,.0f} tok/s against {baseline:,.0f} without, at "
                "concurrency "
                f"{s['max_concurrency'] or 'unlimited'}: {ratio:.2f}x. At high batch the target is "
                "no longer memory-bound, so verifying drafts costs more than it saves (seed 004: "
                "batch 8 prose at 0.7x).",
                next_step="keep speculation for low-concurrency traffic, lower k, or set "
                "--speculative-disable-by-batch-size (V0) / serve two pools",
                measured={"speedup": ratio, "output_throughput": s["output_throughput"]},
                expected={"speedup above": limit, "baseline_output_throughput": baseline},
                sample={"baseline_results": peers.height},
            )
        )
    return out


def _kv_saturation(ev: Evidence) -> list[Finding]:
    out = []
    cfg = ev.config["kv_cache_saturation"]
    for run_id in ev.runs:
        rows = ev.stats_of(run_id).filter(pl.col("kv_cache_usage").is_not_null())
        if rows.height < 5:
            continue
        full = rows.filter(
            (pl.col("kv_cache_usage") >= cfg["min_usage"])
            & (pl.col("waiting_reqs").fill_null(0) > 0)
        )
        share = full.height / rows.height
        if share >= cfg["min_share"]:
            out.append(
                _finding(
                    ev,
                    "kv_cache_saturation",
                    Severity.INFO,
                    run_id,
                    full,
                    explanation=f"In {share:.0%} of the intervals the KV cache is at least "
                    f"{cfg['min_usage']:.0%} full with requests waiting: the server is out of "
                    "memory for more sequences, so slowness here is not speculation's.",
                    next_step="lower --max-num-seqs or the context length, add memory "
                    "(--gpu-memory-utilization, more GPUs), or shorten k (drafts take KV space)",
                    measured={"share_saturated": share, "max_waiting": full["waiting_reqs"].max()},
                    expected={"share below": cfg["min_share"]},
                    sample={"intervals": rows.height},
                )
            )
    return out


def _drift(ev: Evidence) -> list[Finding]:
    out = []
    cfg = ev.config["acceptance_drift"]
    need = ev.config["evidence"]["min_drafts_per_side"]
    z = ev.config["evidence"]["z"]
    for run_id in ev.runs:
        rows = ev.spec_of(run_id).filter(
            pl.col("drafts").is_not_null()
            & (pl.col("draft_tokens") > 0)
            & pl.col("accepted_tokens").is_not_null()
        )
        if rows.height < 4:
            continue
        rows = _in_time_order(rows)
        drafts, tokens, accepted = (
            rows[c].fill_null(0).cum_sum().to_numpy()
            for c in ("drafts", "draft_tokens", "accepted_tokens")
        )
        best = drift_split(drafts, tokens, accepted, need, cfg["min_change"], z)
        if best is None:
            continue
        r1, r2, i = best
        total_d = int(drafts[-1])
        when = rows[i]["ts"][0] or rows[i]["line"][0]
        out.append(
            _finding(
                ev,
                "acceptance_drift",
                Severity.WARNING if r2 < r1 else Severity.INFO,
                run_id,
                rows,
                explanation=f"Acceptance changes level within the run: {r1:.1%} before "
                f"{when}, {r2:.1%} after. Something changed mid-run: the workload, the load, "
                "or the server.",
                next_step="compare the engine stats and events around that point; split the run "
                "with --set label=... if the workload changed",
                measured={"rate_before": r1, "rate_after": r2, "change_at": str(when)},
                expected={"change below": cfg["min_change"]},
                sample={
                    "drafts_before": int(drafts[i - 1]),
                    "drafts_after": total_d - int(drafts[i - 1]),
                },
            )
        )
    return out


def _in_time_order(rows: pl.DataFrame) -> pl.DataFrame:
    """A run's rows by time, then line; rows read from a log mostly are already."""
    keys = [c for c in ("ts", "line") if rows[c].null_count() < rows.height] or ["line"]
    if all(rows[c].null_count() == 0 and rows[c].is_sorted() for c in keys):
        return rows  # each key in order: so is the pair
    return rows.sort(keys, maintain_order=True)


SPLIT_POINTS = 100_000


def drift_split(
    drafts: Sequence[float] | np.ndarray,
    tokens: Sequence[float] | np.ndarray,
    accepted: Sequence[float] | np.ndarray,
    need: int,
    min_change: float,
    z: float,
) -> tuple[float, float, int] | None:
    """Where a run's acceptance changes level most, from cumulative counts: ``(rate before,
    rate after, index of the first interval after)`` for the split with the largest change
    whose two Wilson intervals do not overlap (each side with at least ``need`` drafts)."""
    d, t, a = (np.asarray(x, dtype=np.float64) for x in (drafts, tokens, accepted))
    # A split after each of the first n-1 intervals; a long run is tried at most
    # SPLIT_POINTS evenly spaced ones (a change of level does not hinge on one interval).
    after = np.arange(len(d) - 1)
    if len(after) > SPLIT_POINTS:
        spaced = np.linspace(0, len(d) - 2, SPLIT_POINTS).round().astype(np.int64)
        after = spaced[np.r_[True, spaced[1:] != spaced[:-1]]]  # in order: drop repeats
    d1, t1, a1 = d[after], t[after], a[after]
    d2, t2, a2 = d[-1] - d1, t[-1] - t1, a[-1] - a1
    ok = (d1 >= need) & (d2 >= need) & (t1 > 0) & (t2 > 0)
    if not ok.any():
        return None
    d1, t1, a1, d2, t2, a2 = (x[ok] for x in (d1, t1, a1, d2, t2, a2))
    at = after[ok] + 1
    r1, r2 = a1 / t1, a2 / t2
    # drafts as trials, like _rate_interval: successes = accepted / k, k = tokens / drafts
    lo1, hi1 = wilson_arrays(a1 / (t1 / d1), d1, z)
    lo2, hi2 = wilson_arrays(a2 / (t2 / d2), d2, z)
    change = np.abs(r2 - r1)
    good = (change >= min_change) & ((hi1 < lo2) | (hi2 < lo1))
    if not good.any():
        return None
    j = int(np.argmax(np.where(good, change, -1.0)))  # the first of equal changes
    return (float(r1[j]), float(r2[j]), int(at[j]))


_EVENT_SEVERITY = {
    "engine_core_fatal": Severity.CRITICAL,
    "engine_dead": Severity.CRITICAL,
    "tensor_size_mismatch": Severity.CRITICAL,
    "cuda_oom": Severity.CRITICAL,
    "v0_fallback": Severity.WARNING,
    "mtp_k_gt_1": Severity.WARNING,
    "nan_detected": Severity.WARNING,
    "method_deprecated": Severity.INFO,
    "draft_max_len_override": Severity.INFO,
}
_EVENT_TEXT = {
    "tensor_size_mismatch": (
        "a tensor size mismatch: a draft model whose hidden size differs "
        "from the target's (seed 000: 5120 against 4096)",
        "use a draft of the target's own family and size, or its MTP head",
    ),
    "v0_fallback": (
        "speculative decoding fell back to the V0 engine",
        "use a method the V1 engine supports, or a newer vLLM",
    ),
    "mtp_k_gt_1": (
        "the MTP layer is run several times per step for k > 1",
        "use k=1 for heads trained for one step, or a multi-step MTP checkpoint",
    ),
    "engine_core_fatal": ("the engine core died", "read the traceback after the event line"),
    "engine_dead": ("the engine core died", "read the traceback before this line"),
    "cuda_oom": (
        "CUDA ran out of memory",
        "lower --gpu-memory-utilization headroom use, k, or --max-num-seqs; drafts take memory too",
    ),
    "nan_detected": ("NaNs appeared in the model's outputs", "check the quantization and dtype"),
    "method_deprecated": ("a deprecated method name was used", "use the new name"),
    "draft_max_len_override": (
        "the draft model's max length was overridden",
        "check the draft model's context length",
    ),
}


def _errors(ev: Evidence) -> list[Finding]:
    out = []
    if ev.events.is_empty():
        return out
    for (run_id, code), group in ev.events.group_by(["run_id", "code"], maintain_order=True):
        what, step = _EVENT_TEXT.get(code, (code, "read the log around the event"))
        out.append(
            Finding(
                kind="error_signature",
                severity=_EVENT_SEVERITY.get(code, Severity.INFO),
                run_id=run_id,
                source=group["source"][0],
                lines=(group["line"].min(), group["line"].max()),
                window=(group["ts"].min(), group["ts"].max()),
                explanation=f"The log shows {what} ({code}, {group.height}x): "
                f"{group['message'][0][:160]}",
                next_step=step,
                measured={"code": code, "count": group.height},
            )
        )
    return out


DETECTORS: tuple[Callable[[Evidence], list[Finding]], ...] = (
    _zero,
    _low,
    _cliff,
    _k_too_large,
    _concurrency,
    _prefix_cache,
    _no_speedup,
    _kv_saturation,
    _drift,
    _insufficient,
    _errors,
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
    findings.sort(key=lambda f: (-f.severity, KINDS.index(f.kind), f.run_id or ""))
    return findings


__all__ = [
    "DETECTORS",
    "Evidence",
    "cost_ratio",
    "detect",
    "evidence_from",
    "findings_of",
    "gather",
    "k_curve",
    "load_config",
    "load_reference",
]
