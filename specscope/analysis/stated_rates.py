"""The rates an author states, or lines print, for runs without counts: what the detectors
judge of a paste that says '40%' or 'close to 0%' and counts nothing."""

from __future__ import annotations

import polars as pl

from specscope.analysis.printed_sample import counted_k, curve_drafts, printed_k

# The formats whose ``reported_rate`` is a share of draft tokens an author states, in prose,
# as a bullet of its own, under a heading or in a table's cell without counts (SGLang's
# changed meaning between releases and comes with a mean length that is judged instead).
STATED_RATE_FORMATS = (
    "stated_acceptance",
    "stated_acceptance_bullets",
    "stated_acceptance_heading",
    "stated_acceptance_positions",  # no rate: the rates' mean is a value nobody stated
    "stated_claims_acceptance",  # a rate in words ('close to 0%'): parsers/stated_claims*.toml
    "spec_decode_table",
)
# The format of acceptance an author calls low in words without a rate ('the acceptance rate
# is very low'): its row holds neither a rate nor a length, only the words in `extra`.
STATED_WORDS_FORMAT = "stated_claims_acceptance"
CLIFF_WORDS = r'"claim":\s*"cliff"'  # its `extra` when the words say a later position breaks


def with_stated_rates(spec: pl.LazyFrame, per_run: pl.DataFrame) -> pl.DataFrame:
    """``_with_stated`` (below), and what the printed figures of runs without draft counts
    prove of their sample (``printed_sample``): for runs without draft tokens, the k their
    printed mean length and rate imply (``printed_k``, ``printed_k_said``) and the drafts
    their printed per-position lists need at least (``curve_drafts``,
    ``curve_drafts_said``); for runs with draft tokens but neither drafts nor k, the k
    their tokens and printed mean length imply (``counted_k``, ``counted_k_said``)."""
    out = _with_stated(spec, per_run)
    uncounted = out.filter(pl.col("draft_tokens").is_null())["run_id"].cast(pl.String).to_list()
    # (a run's sums without a drafts or k column count neither)
    none = [pl.col(c).is_null() for c in ("drafts", "k") if c in out.columns]
    undrafted = out.filter(pl.col("draft_tokens").is_not_null(), *none)["run_id"].cast(pl.String)
    for extra in (
        printed_k(spec, uncounted),
        _references(spec, uncounted),
        curve_drafts(spec, uncounted),
        counted_k(spec, undrafted.to_list()),
    ):
        out = out.join(
            extra.with_columns(pl.col("run_id").cast(out.schema["run_id"])),
            on="run_id",
            how="left",
            maintain_order="left",
        )
    return out


def _references(spec: pl.LazyFrame, runs: list[str]) -> pl.DataFrame:
    """The reference an author states beside the rate or mean length of a run without counts
    ('34% vs the reported 74%': `extra`'s "reference", parsers/stated_acceptance.toml):
    ``reference_rate`` or ``reference_length``, the first of the run's (one statement
    starts a run of its own)."""
    # (a store of telemetry has counts in every run: nothing to look up, no column read)
    if not runs or "extra" not in spec.collect_schema().names():
        return pl.DataFrame(
            schema={
                "run_id": pl.String,
                "reference_rate": pl.Float64,
                "reference_length": pl.Float64,
            }
        )
    ref = pl.col("extra").cast(pl.String).str.json_path_match("$.reference").cast(pl.Float64)
    return (
        spec.filter(
            pl.col("run_id").cast(pl.String).is_in(runs)
            & pl.col("format").is_in(STATED_RATE_FORMATS)
            & pl.col("extra").cast(pl.String).str.contains('"reference"', literal=True)
        )
        .select(
            pl.col("run_id").cast(pl.String),
            pl.when(pl.col("reported_rate").is_not_null()).then(ref).alias("reference_rate"),
            pl.when(pl.col("mean_acceptance_length").is_not_null())
            .then(ref)
            .alias("reference_length"),
        )
        .group_by("run_id", maintain_order=True)
        .agg(
            pl.col("reference_rate").drop_nulls().first(),
            pl.col("reference_length").drop_nulls().first(),
        )
        .collect()
    )


def _with_stated(spec: pl.LazyFrame, per_run: pl.DataFrame) -> pl.DataFrame:
    """``per_run`` with the rates of runs that have neither counts nor a mean length:
    ``stated_rate``, the mean of the rates their author stated in prose
    (``stated_acceptance``), and ``printed_rate``, the mean of the rates their lines print
    without counts (a pasted 'Avg Draft acceptance rate: 0.0%' or per-position list, whose
    mean is the same share of draft tokens), and ``stated_words``, the `extra` of the first
    row whose author calls acceptance low with no rate at all (a claim, no value to judge),
    and ``stated_cliff``, that of the first whose author says it breaks past a position.
    Only such runs are looked up, so a store of telemetry is not read again."""
    silent = per_run.filter(
        pl.col("draft_tokens").is_null() & pl.col("mean_acceptance_length").is_null()
    )["run_id"]
    if silent.is_empty():
        return per_run.with_columns(
            pl.lit(None, pl.Float64).alias("stated_rate"),
            pl.lit(None, pl.Float64).alias("printed_rate"),
            pl.lit(None, pl.List(pl.Float64)).alias("stated_curve"),
            pl.lit(None, pl.String).alias("stated_words"),
            pl.lit(None, pl.String).alias("stated_cliff"),
        )
    stated = pl.col("format").is_in(STATED_RATE_FORMATS)
    extra = pl.col("extra") if "extra" in spec.collect_schema().names() else pl.lit(None)
    words = (pl.col("format") == STATED_WORDS_FORMAT) & pl.col("reported_rate").is_null()
    cliff = extra.cast(pl.String).str.contains(CLIFF_WORDS).fill_null(False)
    rates = (
        spec.filter(pl.col("run_id").is_in(silent.to_list()))
        .select(
            "run_id",
            pl.when(stated).then(pl.col("reported_rate")).alias("stated_rate"),
            pl.when(~stated)
            .then(pl.coalesce("acceptance_rate", pl.col("per_position_rate").list.mean()))
            .alias("printed_rate"),
            # (a silent run has no mean length: a row of the format without a rate is words)
            # (and one whose words say acceptance breaks past a position: a cliff, apart)
            pl.when(words & ~cliff).then(extra).cast(pl.String).alias("stated_words"),
            pl.when(words & cliff).then(extra).cast(pl.String).alias("stated_cliff"),
        )
        .filter(
            pl.col("stated_rate").is_not_null()
            | pl.col("printed_rate").is_not_null()
            | pl.col("stated_words").is_not_null()
            | pl.col("stated_cliff").is_not_null()
        )
        .group_by("run_id")
        .agg(
            pl.col("stated_rate").mean(),
            pl.col("printed_rate").mean(),
            pl.col("stated_words").drop_nulls().first(),
            pl.col("stated_cliff").drop_nulls().first(),
        )
        .collect()
    )
    # A per-position curve printed or stated without counts (``stated_curve``): the run's
    # one curve, as written (several different ones: none, no mean of them is printed).
    curves = (
        spec.filter(
            pl.col("run_id").is_in(silent.to_list()) & pl.col("per_position_rate").is_not_null()
        )
        .group_by("run_id")
        .agg(pl.col("per_position_rate").unique().alias("curves"))
        .filter(pl.col("curves").list.len() == 1)
        .select("run_id", pl.col("curves").list.first().cast(pl.List(pl.Float64)))
        .rename({"curves": "stated_curve"})
        .collect()
    )
    rates = rates.join(curves, on="run_id", how="full", coalesce=True)
    return per_run.join(
        rates.with_columns(pl.col("run_id").cast(per_run.schema["run_id"])),
        on="run_id",
        how="left",
        maintain_order="left",
    )


__all__ = ["CLIFF_WORDS", "STATED_RATE_FORMATS", "STATED_WORDS_FORMAT", "with_stated_rates"]
