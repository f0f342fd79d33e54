"""What a definition's ``derive`` names: the few semantics a label map cannot say.

Record derivations take the values read from one record and return them completed;
config derivations take what a config line said and the run's config so far, and return
the columns to set.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping
from itertools import pairwise
from typing import Any

import polars as pl
import regex as re

from specscope.logs.pyrepr import literal, parse_key_values, parse_python_dict
from specscope.vocabulary import DRAFTER_KINDS, normalise_method, quantization_from_model_name

Row = dict[str, Any]
_DRAFT_TOKENS = pl.col("draft_tokens")
_K = pl.col("k")


# --- records ---------------------------------------------------------------------------
# A rule that both readers apply has its row form (the line parser) and its frame form
# (the bulk reader, assemble) side by side here, so that the two cannot drift apart.


def drafts_from_tokens(draft_tokens: int, k: int) -> int:
    """Every draft proposes k tokens: drafts = draft tokens / k, rounded half to even (the
    counts are printed whole; a dynamic k makes the quotient fractional)."""
    return round(draft_tokens / k)


def drafts_from_tokens_column(draft_tokens: pl.Expr = _DRAFT_TOKENS, k: pl.Expr = _K) -> pl.Expr:
    """``drafts_from_tokens`` over columns (polars rounds half to even, as Python does)."""
    return (draft_tokens / k).round(0).cast(pl.Int64)


def vllm_v1_spec_decode(row: Row) -> Row:
    """k is the length of the per-position list, drafts = draft tokens / k, and the
    per-position counts are the printed rates times drafts (the printed rates are
    unconditional: the share of drafts whose position i was accepted)."""
    rates = row.get("per_position_rate")
    if rates:
        row["k"] = len(rates)
    fill_drafts(row)
    return row


def fill_drafts(row: Row) -> None:
    k, draft_tokens = row.get("k"), row.get("draft_tokens")
    if k and draft_tokens is not None and row.get("drafts") is None:
        row["drafts"] = drafts_from_tokens(draft_tokens, k)
    rates, drafts = row.get("per_position_rate"), row.get("drafts")
    if rates and drafts is not None and row.get("accepted_per_pos") is None:
        row["accepted_per_pos"] = [
            round(r * drafts) if r is not None and math.isfinite(r * drafts) else None
            for r in rates
        ]


def vllm_v0_spec_decode(row: Row) -> Row:
    """V0 drafts k tokens per sequence and step: drafts = draft tokens / k. The rate and
    mean length are the interval's, from the (delta) counts; the printed rate is since
    the engine started and is not kept."""
    row.pop("printed_cumulative_rate", None)
    fill_drafts(row)
    accepted, draft_tokens, drafts = (
        row.get("accepted_tokens"),
        row.get("draft_tokens"),
        row.get("drafts"),
    )
    if accepted is not None and draft_tokens:
        row["acceptance_rate"] = accepted / draft_tokens
    if accepted is not None and drafts:
        row["mean_acceptance_length"] = 1 + accepted / drafts
    return row


def spec_from_drafts(row: Row) -> Row:
    """Blocks that print drafts and a per-position list (bench, offline example): k is the
    list's length, the per-position counts are rate times drafts."""
    rates = row.get("per_position_rate")
    if rates:
        row["k"] = len(rates)
        # The list can be longer than what was drafted: the offline example of a k = 3 run
        # has printed six positions, the last three at 0.00 (vllm-ascend#7290). Where every
        # step drafted the same number (drafted tokens a whole multiple of drafts), that
        # number is k, and positions past it were never drafted: they are no evidence of a
        # dead tail. A nonzero rate past it means the steps drafted unequal numbers.
        drafts, draft_tokens = row.get("drafts"), row.get("draft_tokens")
        if drafts and draft_tokens and draft_tokens % drafts == 0:
            drafted = draft_tokens // drafts
            if 0 < drafted < len(rates) and not any(rates[drafted:]):
                row["per_position_rate"] = rates[:drafted]
                row["k"] = drafted
    fill_drafts(row)
    accepted, draft_tokens = row.get("accepted_tokens"), row.get("draft_tokens")
    if row.get("acceptance_rate") is None and accepted is not None and draft_tokens:
        row["acceptance_rate"] = accepted / draft_tokens
    return row


_PAIR = re.compile(r"(\d+)\s*/\s*(\d+)")


def spec_from_position_pairs(row: Row) -> Row:
    """Records that print each position's accepted and drafted counts as pairs in one value
    (oMLX's ``depth[d1=155/200,d2=115/150,d3=82/104]``): ``accepted_per_pos`` and
    ``drafted_per_pos``, the positions never drafted at the tail left out. Kept only where
    they are the record's own counts (they sum to its accepted and drafted tokens, and no
    position accepts more than it drafted or than the one before): anything else is no
    per-position evidence. Then as ``spec_from_drafts``."""
    pairs = [(int(a), int(n)) for a, n in _PAIR.findall(str(row.pop("position_pairs", "")))]
    while pairs and pairs[-1][1] == 0:
        pairs.pop()
    accepted, drafted = [a for a, _ in pairs], [n for _, n in pairs]
    if (
        pairs
        and sum(accepted) == row.get("accepted_tokens")
        and sum(drafted) == row.get("draft_tokens")
        and all(a <= n for a, n in pairs)
        and all(x >= y for x, y in pairwise(accepted))
    ):
        row["accepted_per_pos"], row["drafted_per_pos"] = accepted, drafted
    return spec_from_drafts(row)


def vllm_engine_stats(row: Row) -> Row:
    for column in ("engine", "engines_aggregated"):
        if row.get(column) is not None:
            row[column] = int(row[column])
    return row


def to_deltas(
    totals: dict[Any, dict[str, Any]], state: Any, columns: tuple[str, ...], row: Row
) -> None:
    """Counts printed since the engine started become counts since the last record (of
    the same ``state``: run, process and format; ``totals`` keeps the last of each).
    The first record of an engine keeps its totals (``counts = since_engine_start``);
    a total that drops means the engine restarted (``since_restart``)."""
    now = {c: row.get(c) for c in columns}
    before = totals.get(state)
    totals[state] = now
    if before is None:
        row["counts"] = "since_engine_start"
    elif any(now[c] is not None and before.get(c) is not None and now[c] < before[c] for c in now):
        row["counts"] = "since_restart"
    else:
        row["counts"] = "delta"
        for c, value in now.items():
            if value is not None and before.get(c) is not None:
                row[c] = value - before[c]


# --- what an author states -------------------------------------------------------------
# A comparison an author states (stated_speedup, stated_speedup_table) is kept in `bench` as
# the author's measurement, never as telemetry: its speculative side in the column of its
# measure, the baseline, unit and quoted words in `extra` under "stated".

# What a unit measures and the bench column it goes to; seconds are for the same work,
# so less is faster.
_MEASURES = (
    # ('tg': llama-bench's token generation, a column of tokens/s)
    (r"(?:tok(?:en)?s?|t)\s*(?:/|per)\s*s(?:ec(?:ond)?s?)?|tps|tok/sec|tg\d*", "output_throughput"),
    (r"req(?:uest)?s?\s*(?:/|per)\s*s(?:ec(?:ond)?)?", "request_throughput"),
    (r"s|secs?|seconds?", "duration_s"),
    (r"ms\s*(?:/|per)\s*tok(?:en)?", "mean_tpot_ms"),
)
# Milliseconds measure decode only as the time of a token (TPOT, ITL), which the words
# beside them say; a time to first token or a request's latency is no decode speed.
_PER_TOKEN = re.compile(r"tpot|itl|tbt|inter[\s-]?token|per[\s-]?token|time\s+per\s+output", re.I)
# The author's word for the direction of the change ('slower', 'lost 32%', '劣化').
_FASTER_WORD = re.compile(r"faster|quicker|better|improv|gain|speed-?up|提升|加速|更快", re.I)


def stated_measure(unit: str | None, what: str | None = None) -> str | None:
    """The bench column a stated value of this unit belongs in (``what``: the measure's
    name the author gave, 'TPOT'); None for no known unit."""
    if not unit:
        return None
    text = " ".join(unit.lower().strip("()").split())  # a header's '(s)'
    if text == "ms":
        return "mean_tpot_ms" if what and _PER_TOKEN.search(what) else None
    for pattern, column in _MEASURES:
        if re.fullmatch(pattern, text):
            return column
    return None


def _stated_number(raw: Any) -> float | None:
    if isinstance(raw, int | float):
        return float(raw)
    if not isinstance(raw, str):
        return None
    try:
        value = float(raw.replace(",", ""))
    except ValueError:
        return None
    return value if math.isfinite(value) and value > 0 else None


# Measures where less is faster: seconds for the same work, milliseconds a token.
TIMES = frozenset({"duration_s", "mean_tpot_ms"})


def _faster(measure: str | None, spec: float, base: float) -> bool:
    return spec < base if measure in TIMES else spec > base


_TIME_WORD = re.compile(r"wall|time|latency|tpot|itl", re.I)


def _says_faster(claim: str) -> bool:
    return bool(_FASTER_WORD.search(claim))


def stated_comparison(row: Row) -> Row:
    """Speculation on against off as an author states it: the two values, with a unit of
    one kind (a rate of tokens or requests, or seconds for the same work) or, for a table
    whose author gave no unit, a rate checked against the author's own change column."""
    quote = " ".join(str(row.pop("stated", "") or "").split())
    spec = _stated_number(row.pop("stated_spec", None))
    base = _stated_number(row.pop("stated_base", None))
    units = [u for u in (row.pop("stated_unit", None), row.pop("stated_unit2", None)) if u]
    rows = row.pop("stated_rows", None)
    direction = row.pop("stated_direction", None)
    offset = row.pop("stated_offset", None)
    what, claim = row.pop("stated_what", None), row.pop("stated_claim", None)
    ratio = _stated_number(row.pop("stated_ratio", None))
    # A rate given in percent: a share of the baseline's ('70% of without it') or a cut
    # from it ('decode -22.9%', '20% slower'); either is the speculative rate's multiple.
    share = _stated_number(row.pop("stated_share", None))
    cut = _stated_number(row.pop("stated_cut", None))
    # The run without speculation the faster one ('MTP off is ~23% faster', 'spec off 2x
    # faster'): speculation's rate is the baseline's over one plus the gain, or the multiple.
    gain = _stated_number(row.pop("stated_gain", None))
    times = _stated_number(row.pop("stated_times", None))
    off_faster = gain is not None or times is not None
    if ratio is None and share is not None:
        ratio = share / 100
    elif ratio is None and cut is not None and cut < 100:
        ratio = 1 - cut / 100
    elif ratio is None and gain is not None:
        ratio = 1 / (1 + gain / 100)
    elif ratio is None and times is not None:
        ratio = 1 / times
    measures = {stated_measure(u, what) for u in units}
    if not units and direction == "rate":
        measures = {"output_throughput"}  # a rate the table's change column vouches for
    row["speculative"] = True
    # The quoted words, and how many lines after the record's first they are.
    extra: dict[str, Any] = {"stated": quote} | ({"offset": offset} if offset else {})
    if (
        spec is None
        and base is None
        and not units
        and claim
        and (off_faster or not _says_faster(claim))
    ):
        extra["claim"] = "slower"  # the author's word alone: no numbers, none made up
        if ratio is not None:  # a multiple of the baseline's time (or rate) the author gave
            speedup = 1.0 / ratio if what and _TIME_WORD.search(what) else ratio
            extra["speedup"] = round(speedup, 4)
    elif (
        spec is None
        and base is None
        and rows
        and len(measures) == 1
        and None not in measures
        and all(r.get("k") and "baseline" not in r for r in rows)
    ):
        # Depths of one drafter side by side, no run without drafting (tables.
        # _swept_alone): speeds compared with each other, none against the baseline.
        extra |= {"unit": units[0], "measure": measures.pop(), "sweep": True}
    elif len(measures) != 1 or None in measures or spec is None or base is None:
        said = ", ".join(units) or "no unit"
        row["problems"] = f"a stated comparison whose values do not compare ({said})"
    elif claim and _says_faster(claim) != _faster(measures.copy().pop(), spec, base):
        # The words say one way and the numbers the other: the sides are not what the
        # shape took them for (a change of something else), so nothing is compared.
        row["problems"] = f"a stated comparison whose words ({claim!r}) and numbers disagree"
    else:
        measure = measures.pop()
        assert measure is not None  # (None was ruled out above)
        row[measure] = spec
        extra |= {"baseline": base, "unit": units[0] if units else None, "measure": measure}
    if rows:
        extra["rows"] = rows
    row["extra"] = json.dumps(extra, ensure_ascii=False)
    return row


def _stated_count(raw: Any) -> int | None:
    if isinstance(raw, int):
        return raw
    return int(raw.replace(",", "")) if isinstance(raw, str) and raw else None


def stated_acceptance(row: Row) -> Row:
    """Acceptance an author states: the accepted and drafted tokens as counted (a whole
    record), or a rate alone (a percentage or a fraction), kept as printed and partial: it
    has no counts and none is made up for it. The quoted words go to ``extra``."""
    quote = " ".join(str(row.pop("stated", "") or "").split())
    accepted = _stated_count(row.pop("stated_accepted", None))
    drafted = _stated_count(row.pop("stated_drafted", None))
    rate = row.pop("stated_rate", None)
    percent = row.pop("stated_pct", None)
    length = row.pop("stated_length", None)
    low = row.pop("stated_low", None)  # a range's other end ('0-2%'): kept, never judged on
    # '3.20 of 7 drafted tokens accepted per round': a mean of accepted tokens a draft and
    # the k it drafts, so a mean acceptance length (the bonus token added) and no counts
    per_draft, depth = row.pop("stated_per_draft", None), row.pop("stated_k", None)
    if per_draft is not None and depth is not None:
        length, row["k"] = 1 + float(per_draft), int(depth)
    if length is not None:  # a mean acceptance length as stated: no counts either
        row["mean_acceptance_length"] = float(length)
        row["partial"] = True
    elif accepted is not None and drafted is not None:
        row["accepted_tokens"], row["draft_tokens"] = accepted, drafted
        if drafted:
            row["acceptance_rate"] = accepted / drafted
    elif rate is not None:
        row["reported_rate"] = round(float(rate) / (100 if percent else 1), 12)
        row["partial"] = True
    said: dict[str, Any] = {"stated": quote}
    # The two levels of one change ('accept length 从 1.804 提升到 2.738'): the arms of a
    # comparison, named as the author orders them (their sides are set against each other).
    before, after = row.pop("stated_before", None), row.pop("stated_after", None)
    if before is not None or after is not None:
        said["label"] = "before" if before is not None else "after"
    if low is not None and "reported_rate" in row:
        said["range"] = [round(float(low) / (100 if percent else 1), 12), row["reported_rate"]]
    elif low is not None and "mean_acceptance_length" in row:  # ('only around 2–3')
        said["range"] = [float(low), row["mean_acceptance_length"]]
    reference = _stated_reference(
        row, row.pop("stated_reference", None), row.pop("reference_pct", None), bool(percent)
    )
    if reference is not None:
        said["reference"] = reference
    row["extra"] = json.dumps(said, ensure_ascii=False)
    return row


def _stated_reference(row: Row, raw: Any, pct: Any, percent: bool) -> float | None:
    """The author's reference for the value stated ('34% vs the reported 74%', 'a mean
    length of 1.9 while the model card says 3.2'), in the value's measure, or None where it
    cannot be one: a length is a plain number from 1 to 17 (k + 1 at most), a rate a share
    (a percentage, or a fraction where the value was one too)."""
    if raw is None:
        return None
    value = float(raw)
    if "mean_acceptance_length" in row:
        return value if not pct and 1.0 < value <= 17.0 else None
    if "reported_rate" not in row:
        return None  # (counts: the sample itself is judged)
    if pct or (percent and value > 1):
        value /= 100
    return round(value, 12) if 0.0 < value <= 1.0 else None


# --- configuration ---------------------------------------------------------------------


def _first(value: Any) -> Any:
    if isinstance(value, list | tuple):
        return value[0] if value else None
    return value


def _spec_config(value: Any) -> dict[str, Any]:
    if isinstance(value, dict):
        return value
    if not isinstance(value, str):
        return {}
    text = value.strip()
    if text.startswith("SpeculativeConfig("):
        return parse_key_values(text)
    if text.startswith("{"):
        return parse_python_dict(text)
    return {}


# speculative_config keys that change what acceptance means: forced (synthetic rejection
# sampling, at a set length or rates) or not comparable with standard rejection sampling
# (block, fly), and k varying by batch size.
MEANING_KEYS = (
    "rejection_sample_method",
    "synthetic_acceptance_length",
    "synthetic_acceptance_rates",
    "synthetic_acceptance_rate",
    "num_speculative_tokens_per_batch_size",
    "force_num_accepted_tokens",
)


def vllm_config(said: Mapping[str, Any], run: Mapping[str, Any]) -> Row:
    """Columns from a config line whose keys the definition already mapped to columns."""
    out: Row = {}
    for column, value in said.items():
        if column == "speculative_config":
            spec = _spec_config(value)
            method = spec.get("method")
            if method:
                out["spec_method_raw"] = str(method)
            draft = spec.get("model")
            if draft and str(draft) != "None":
                out["draft_model"] = str(draft)
            k = spec.get("num_speculative_tokens", spec.get("num_spec_tokens"))
            if isinstance(k, int):
                out["k"] = k
            # What changes what acceptance means (analysis.forced): kept in the run's config.
            for key in MEANING_KEYS:
                if spec.get(key) not in (None, "None", "standard"):
                    out[key] = spec[key]
            continue
        if column == "served_model_name":
            value = _first(value)
        if column == "dtype" and isinstance(value, str):
            value = value.removeprefix("torch.")
        if column == "quantization":
            value = "none" if value is None or value == "None" else str(value)
        if column == "enable_prefix_caching":
            value = literal(value) if isinstance(value, str) else value
            if not isinstance(value, bool):
                continue  # None: not stated
        if column in (
            "k",
            "tensor_parallel_size",
            "pipeline_parallel_size",
            "data_parallel_size",
            "max_model_len",
            "max_num_seqs",
            "max_num_batched_tokens",
        ):
            value = literal(value) if isinstance(value, str) else value
            if not isinstance(value, int) or isinstance(value, bool):
                continue
        if value is None or value == "None":
            continue
        out[column] = value
    if "draft_model" in out and "spec_method_raw" not in out and not run.get("spec_method_raw"):
        # --speculative-model without a method: "[ngram]" or a draft model
        out["spec_method_raw"] = "ngram" if "ngram" in str(out["draft_model"]) else "draft_model"
    if "spec_method_raw" in out:
        out["spec_method"] = normalise_method(out["spec_method_raw"])
    return out


def sglang_config(said: Mapping[str, Any], run: Mapping[str, Any]) -> Row:
    """SGLang's ServerArgs: the method is `speculative_algorithm`, k is the number of draft
    steps, and prefix caching is the radix cache unless disabled."""
    said = dict(said)
    algorithm = said.pop("speculative_algorithm", None)
    disable_radix = said.pop("disable_radix_cache", None)
    out = vllm_config(said, run)
    if algorithm not in (None, "None"):
        out["spec_method_raw"] = str(algorithm)
        out["spec_method"] = normalise_method(algorithm)
    if isinstance(disable_radix, bool):
        out["enable_prefix_caching"] = not disable_radix
    out["server"] = "sglang"
    return out


def vllm_model_startup(said: Mapping[str, Any], run: Mapping[str, Any]) -> Row:
    """The first 'Resolved architecture' and 'max model len' are the target's, the next the
    drafter's; 'Detected MTP model' names the method, 'Detected EAGLE model' only the loader
    (DFlash drafters load through it too)."""
    out: Row = {}
    arch = said.get("architecture")
    if arch:
        out[
            "target_architecture" if not run.get("target_architecture") else "draft_architecture"
        ] = arch
    model_len = said.get("model_len")
    if model_len:
        out["max_model_len" if not run.get("max_model_len") else "draft_max_model_len"] = int(
            model_len
        )
    loader = said.get("detected_drafter")
    if loader:
        out["drafter_loader"] = loader
        if loader == "MTP":
            out["spec_method"] = "mtp"
    backend = said.get("attention_backend")
    if backend:
        out["attention_backend"] = backend.strip().replace(" ", "_").upper()
    return out


def request_histogram(row: Row) -> Row:
    """vLLM's per-request ``acceptance_histogram`` (index j: the verify steps that accepted
    exactly j draft tokens) as the request's accepted counts per position: a step accepted
    at position i when it accepted more than i, so position i's count is the steps of the
    bins past i. Kept only where it holds the request's own counts (its steps, its
    accepted tokens); the histogram stays in ``extra`` as printed."""
    try:
        extra = json.loads(row.get("extra") or "{}")
    except ValueError:
        return row
    hist = extra.get("acceptance_histogram")
    if not isinstance(hist, list) or len(hist) < 2:
        return row
    if not all(isinstance(x, int | float) and x >= 0 and float(x).is_integer() for x in hist):
        return row
    bins = [int(x) for x in hist]
    row["extra"] = json.dumps(extra | {"acceptance_histogram": bins}, ensure_ascii=False)
    per = [sum(bins[i + 1 :]) for i in range(len(bins) - 1)]
    if sum(bins) == row.get("drafts") and sum(per) == row.get("accepted_tokens"):
        row["accepted_per_pos"] = per
    else:
        row["problems"] = "; ".join(
            filter(None, [row.get("problems"), "an acceptance histogram that is not its counts'"])
        )
    return row


RECORD_DERIVATIONS: dict[str, Callable[[Row], Row]] = {
    "vllm_v1_spec_decode": vllm_v1_spec_decode,
    "vllm_v0_spec_decode": vllm_v0_spec_decode,
    "spec_from_drafts": spec_from_drafts,
    "spec_from_position_pairs": spec_from_position_pairs,
    "vllm_engine_stats": vllm_engine_stats,
    "stated_comparison": stated_comparison,
    "stated_acceptance": stated_acceptance,
    "request_histogram": request_histogram,
}


def llamacpp_config(said: Mapping[str, Any], run: Mapping[str, Any]) -> Row:
    """A llama-server command line: its --spec-type as the method (``draft-eagle3`` is the
    EAGLE-3 drafter), and the synthetic acceptance it forces as vLLM's keys name it, so
    one reading of forced runs covers both engines."""
    out: Row = {"server": "llama.cpp"}
    for column in ("model", "draft_model"):
        if said.get(column):
            out[column] = str(said[column])
    spec_type = said.get("spec_type")
    if spec_type:
        out["spec_method_raw"] = str(spec_type)
        out["spec_method"] = normalise_method(str(spec_type).removeprefix("draft-"))
    length = said.get("synthetic_acceptance_length")
    if length is not None:
        out["synthetic_acceptance_length"] = float(length)
    rates = said.get("synthetic_acceptance_rates")
    if rates is not None:
        out["synthetic_acceptance_rates"] = [float(r) for r in str(rates).split(",")]
    return out


def forced_acceptance_env(said: Mapping[str, Any], run: Mapping[str, Any]) -> Row:
    """An environment variable that forces acceptance (SGLang's SGLANG_SIMULATE_ACC_LEN, a
    mean acceptance length as vLLM's synthetic_acceptance_length is; TensorRT-LLM's
    TLLM_SPEC_DECODE_FORCE_NUM_ACCEPTED_TOKENS, draft tokens accepted a step): as a number,
    and not at all where it is 0, which leaves acceptance to the drafter. The variable is
    kept (``forced_by``): it names the engine, and what to unset."""
    said = dict(said)
    variable = str(said.pop("forced_by", ""))
    out: Row = {}
    for column, value in said.items():
        number = float(value)
        if number > 0:
            out[column] = number
    if out and variable:
        out["forced_by"] = variable
        out["server"] = "tensorrt-llm" if variable.startswith("TLLM_") else "sglang"
    return out


CONFIG_DERIVATIONS: dict[str, Callable[[Mapping[str, Any], Mapping[str, Any]], Row]] = {
    "forced_acceptance_env": forced_acceptance_env,
    "vllm_config": vllm_config,
    "vllm_model_startup": vllm_model_startup,
    "sglang_config": sglang_config,
    "llamacpp_config": llamacpp_config,
}

__all__ = [
    "CONFIG_DERIVATIONS",
    "DRAFTER_KINDS",
    "RECORD_DERIVATIONS",
    "fill_drafts",
    "normalise_method",
    "quantization_from_model_name",
    "stated_measure",
    "to_deltas",
]
