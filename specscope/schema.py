"""The tables of a store, column by column (README "Data model" documents the same).

Every data table is hive-partitioned by ``source_id`` (the directory ``source_id=<id>``),
so the column lives in the path, not in the files. Bump ``SCHEMA_VERSION`` whenever a
column changes meaning or type; adding a nullable column at the end is compatible.
"""

from __future__ import annotations

import polars as pl
import pyarrow as pa

SCHEMA_VERSION = 1

# ``ts`` is the clock as the source printed it: the server's local time in a log (vLLM
# prints no zone), UTC in a pull or a scrape. ``ts_utc`` is the same instant in UTC where
# it is known: always for pulls and scrapes, for a log whose lines a container runtime
# stamped with a zone (``logs.zone``), else null. Added at the end: older files read it
# as null.
_TS_UTC = pa.field("ts_utc", pa.timestamp("ms", tz="UTC"))

_where = [
    pa.field("source", pa.string()),  # the path as given to ingest
    pa.field("line", pa.int64()),  # 1-based line where the record starts
]

SPEC_DECODE = pa.schema(
    [
        *_where,
        pa.field("end_line", pa.int64()),  # last line of a wrapped record
        pa.field("ts", pa.timestamp("ms")),  # as the source printed it (see _TS_UTC); may be null
        pa.field("run_id", pa.string()),
        pa.field("engine", pa.int32()),  # data-parallel engine index; null when not known
        pa.field("format", pa.string()),  # the definition that read the record
        pa.field("k", pa.int32()),  # speculative tokens per draft
        pa.field("drafts", pa.int64()),  # drafts (verification steps) in the interval
        pa.field("draft_tokens", pa.int64()),
        pa.field("accepted_tokens", pa.int64()),
        pa.field("accepted_per_pos", pa.list_(pa.int64())),  # drafts whose position i was accepted
        pa.field("per_position_rate", pa.list_(pa.float64())),  # as printed
        pa.field("mean_acceptance_length", pa.float64()),  # as printed (1 + accepted / drafts)
        pa.field("acceptance_rate", pa.float64()),  # as printed, a fraction 0-1
        pa.field("accepted_throughput", pa.float64()),  # tokens/s as printed
        pa.field("drafted_throughput", pa.float64()),
        pa.field("emitted_tokens", pa.int64()),  # V0 only
        pa.field("system_efficiency", pa.float64()),  # V0 only
        pa.field("counts", pa.string()),  # 'interval' (reset each record) or how deltas were made
        pa.field("reported_rate", pa.float64()),  # a rate whose meaning varies (SGLang)
        pa.field("partial", pa.bool_()),  # a fragment: some fields were missing or unreadable
        pa.field("stats_line", pa.int64()),  # line of the engine_stats record it follows
        pa.field("problems", pa.string()),  # fields that did not read, and why
        pa.field("extra", pa.string()),  # JSON of fields no definition knows (fork additions)
        # Drafts that reached position i, where an engine counts them (TensorRT-LLM, vLLM's
        # per-position drafted counter): the per-position denominators when k varies.
        pa.field("drafted_per_pos", pa.list_(pa.int64())),
        _TS_UTC,
    ]
)

ENGINE_STATS = pa.schema(
    [
        *_where,
        pa.field("end_line", pa.int64()),
        pa.field("ts", pa.timestamp("ms")),
        pa.field("run_id", pa.string()),
        pa.field("engine", pa.int32()),
        pa.field("engines_aggregated", pa.int32()),  # 'N Engines Aggregated' lines
        pa.field("format", pa.string()),
        pa.field("prompt_throughput", pa.float64()),  # tokens/s
        pa.field("generation_throughput", pa.float64()),
        pa.field("running_reqs", pa.int64()),
        pa.field("waiting_reqs", pa.int64()),
        pa.field("deferred_reqs", pa.int64()),
        pa.field("swapped_reqs", pa.int64()),  # V0
        pa.field("preemptions", pa.int64()),
        pa.field("corrupted_reqs", pa.int64()),
        pa.field("kv_cache_usage", pa.float64()),  # fraction 0-1
        pa.field("kv_cache_device", pa.string()),  # GPU, XPU, ...
        pa.field("cpu_kv_cache_usage", pa.float64()),  # V0
        pa.field("prefix_cache_hit_rate", pa.float64()),  # fraction 0-1
        pa.field("cpu_prefix_cache_hit_rate", pa.float64()),  # V0
        pa.field("external_prefix_cache_hit_rate", pa.float64()),
        pa.field("mm_cache_hit_rate", pa.float64()),
        pa.field("mean_ttft_ms", pa.float64()),  # pulls: the interval's mean time to first token
        pa.field("mean_itl_ms", pa.float64()),  # pulls: the interval's mean inter-token latency
        pa.field("problems", pa.string()),
        pa.field("extra", pa.string()),
        _TS_UTC,
    ]
)

EVENTS = pa.schema(
    [
        *_where,
        pa.field("ts", pa.timestamp("ms")),
        pa.field("run_id", pa.string()),
        pa.field("level", pa.string()),
        pa.field("code", pa.string()),  # stable short code detectors key on
        pa.field("message", pa.string()),
        pa.field("detail", pa.string()),  # JSON of what the pattern captured
        _TS_UTC,
    ]
)

BENCH = pa.schema(
    [
        *_where,
        pa.field("end_line", pa.int64()),
        pa.field("run_id", pa.string()),
        pa.field("format", pa.string()),
        pa.field("backend", pa.string()),
        pa.field("model", pa.string()),
        pa.field("successful_requests", pa.int64()),
        pa.field("failed_requests", pa.int64()),
        pa.field("max_concurrency", pa.float64()),
        pa.field("request_rate", pa.float64()),  # configured, requests/s (inf: all at once)
        pa.field("duration_s", pa.float64()),
        pa.field("total_input_tokens", pa.int64()),
        pa.field("total_generated_tokens", pa.int64()),
        pa.field("request_throughput", pa.float64()),  # req/s
        pa.field("output_throughput", pa.float64()),  # tok/s
        pa.field("peak_output_throughput", pa.float64()),
        pa.field("peak_concurrent_requests", pa.float64()),
        pa.field("total_token_throughput", pa.float64()),
        *[
            pa.field(f"{stat}_{metric}_ms", pa.float64())
            for metric in ("ttft", "tpot", "itl", "e2el")
            for stat in ("mean", "median", "p99")
        ],
        pa.field("speculative", pa.bool_()),  # the block had a spec-decode section
        pa.field("acceptance_length", pa.float64()),  # as printed (SGLang's "Accept length")
        pa.field("problems", pa.string()),
        pa.field("extra", pa.string()),
    ]
)

# Run configuration columns, all nullable: null means "the log does not say".
RUN_CONFIG = [
    pa.field("vllm_version", pa.string()),
    pa.field("model", pa.string()),
    pa.field("served_model_name", pa.string()),
    pa.field("spec_method", pa.string()),  # normalised: mtp, eagle, eagle3, draft_model, ...
    pa.field("spec_method_raw", pa.string()),  # as configured (qwen3_next_mtp, ...)
    pa.field("drafter_kind", pa.string()),  # chain, block or lookup
    pa.field("draft_model", pa.string()),
    pa.field("k", pa.int32()),  # num_speculative_tokens
    pa.field("quantization", pa.string()),
    pa.field("quantization_source", pa.string()),  # config, model_name or user
    pa.field("kv_cache_dtype", pa.string()),
    pa.field("enable_prefix_caching", pa.bool_()),  # null: not stated (not "off")
    pa.field("tensor_parallel_size", pa.int32()),
    pa.field("pipeline_parallel_size", pa.int32()),
    pa.field("data_parallel_size", pa.int32()),
    pa.field("max_model_len", pa.int64()),
    pa.field("max_num_seqs", pa.int64()),
    pa.field("max_num_batched_tokens", pa.int64()),
    pa.field("dtype", pa.string()),
    pa.field("target_architecture", pa.string()),
    pa.field("draft_architecture", pa.string()),
    pa.field("drafter_loader", pa.string()),
    pa.field("attention_backend", pa.string()),
    pa.field("hardware", pa.string()),  # only from --set
    pa.field("label", pa.string()),  # only from --label
]

RUNS = pa.schema(
    [
        pa.field("run_id", pa.string()),
        pa.field("source", pa.string()),
        pa.field("ordinal", pa.int32()),  # 1-based within the source
        pa.field("first_line", pa.int64()),
        pa.field("last_line", pa.int64()),
        pa.field("first_ts", pa.timestamp("ms")),
        pa.field("last_ts", pa.timestamp("ms")),
        pa.field("server", pa.string()),  # vllm or sglang
        *RUN_CONFIG,
        pa.field("pids", pa.string()),  # JSON {process name: pid, or [pids] side by side}
        pa.field("spec_records", pa.int64()),
        pa.field("stats_records", pa.int64()),
        pa.field("events", pa.int64()),
        pa.field("config", pa.string()),  # JSON of every config value read, with its lines
        pa.field("overrides", pa.string()),  # JSON of what --set / --label supplied
    ]
)

SOURCES = pa.schema(
    [
        pa.field("source_id", pa.string()),
        pa.field("path", pa.string()),  # a file, or a Prometheus URL (never with credentials)
        pa.field("kind", pa.string()),  # log, prometheus or scrape
        pa.field("size", pa.int64()),  # bytes read (compressed size for .gz)
        pa.field("sha256", pa.string()),  # of the file as it is (compressed for .gz)
        pa.field("content_sha256", pa.string()),  # of the text: a rotated copy is the same log
        pa.field("content_size", pa.int64()),
        pa.field("head_sha256", pa.string()),  # of the text's first 64 KiB
        pa.field("mtime", pa.timestamp("ms")),
        pa.field("lines", pa.int64()),
        pa.field("year", pa.int32()),  # year given to the first timestamp
        pa.field("year_basis", pa.string()),  # log, --year, mtime
        pa.field("spec_records", pa.int64()),
        pa.field("stats_records", pa.int64()),
        pa.field("runs", pa.int64()),
        pa.field("events", pa.int64()),
        pa.field("bench_records", pa.int64()),
        pa.field("skipped_lines", pa.int64()),
        pa.field("watermark", pa.timestamp("ms")),  # pulls: the oldest target watermark (UTC)
        pa.field("watermarks", pa.string()),  # pulls: JSON {target: unix seconds} stored up to
        pa.field("ingest_id", pa.string()),  # the last ingest that wrote this source
        pa.field("ingested_at", pa.timestamp("ms")),
    ]
)

RUN_SUMS = pa.schema(
    [
        pa.field("run_id", pa.string()),
        # acceptance.sums of the spec_decode rows the same ingest wrote for the source
        pa.field("records", pa.int64()),
        pa.field("draft_tokens", pa.int64()),
        pa.field("draft_tokens_n", pa.int64()),
        pa.field("accepted_tokens", pa.int64()),
        pa.field("accepted_tokens_n", pa.int64()),
        pa.field("drafts", pa.int64()),
        pa.field("drafts_n", pa.int64()),
        pa.field("acc_with_drafts", pa.int64()),
        pa.field("tau_sum", pa.float64()),
        pa.field("tau_n", pa.int64()),
        pa.field("first_ts", pa.timestamp("ms")),
        pa.field("last_ts", pa.timestamp("ms")),
        pa.field("position_counts", pa.list_(pa.int64())),  # by position from 0
        pa.field("position_drafts", pa.list_(pa.int64())),
        pa.field("k_values", pa.list_(pa.int32())),  # in the order they first appear
        pa.field("k_records", pa.list_(pa.int64())),
    ]
)

TABLES: dict[str, pa.Schema] = {
    "spec_decode": SPEC_DECODE,
    "engine_stats": ENGINE_STATS,
    "runs": RUNS,
    "events": EVENTS,
    "bench": BENCH,
    "sources": SOURCES,
    "run_sums": RUN_SUMS,
}


def polars_schema(table: str) -> pl.Schema:
    """``table``'s columns as polars types (a copy: callers may change theirs)."""
    return pl.Schema(_POLARS[table])


PARTITIONED = ("spec_decode", "engine_stats", "runs", "events", "bench", "run_sums")
CONFIG_COLUMNS = tuple(f.name for f in RUN_CONFIG)


def empty_table(schema: pa.Schema) -> pa.Table:
    """A table of ``schema`` with no rows. Not ``Schema.empty_table()``: that imports pandas
    where it is installed (some 50 MB more in every process, for nothing)."""
    return pa.Table.from_batches([], schema=schema)


_POLARS = {name: pl.DataFrame(empty_table(schema)).schema for name, schema in TABLES.items()}

__all__ = [
    "BENCH",
    "CONFIG_COLUMNS",
    "ENGINE_STATS",
    "EVENTS",
    "PARTITIONED",
    "RUNS",
    "RUN_SUMS",
    "SCHEMA_VERSION",
    "SOURCES",
    "SPEC_DECODE",
    "TABLES",
    "empty_table",
    "polars_schema",
]


def store_columns(frame: pl.DataFrame, table: str) -> pl.DataFrame:
    """The rows as the store holds them: the table's columns (null where the frame has
    none), without the internal ones."""
    want, have = _POLARS[table], frame.schema
    if all(have.get(c) == t for c, t in want.items()):
        # Rows finished by ingest have them all: choosing them is no work, a cast a
        # column cost 0.6 ms a part (0.04 CPU s per 100 MB of server log).
        return frame.select(want.names())
    return frame.select(
        (pl.col(c).cast(t) if c in frame.columns else pl.lit(None, t)).alias(c)
        for c, t in polars_schema(table).items()
    )
