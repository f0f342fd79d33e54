"""specscope: speculative-decoding telemetry from vLLM and SGLang, into Parquet and answers.

import specscope
report = specscope.ingest("server.log", store="specscope-data")
store = specscope.open_store("specscope-data")
store.spec_decode.collect()          # polars LazyFrame per table
specscope.weighted_acceptance(store.spec_decode, by=["run_id"])
"""

from specscope.acceptance import weighted_acceptance
from specscope.errors import (
    ExitStatus,
    InputBinaryError,
    InputEmptyError,
    InputMissingError,
    InputNotAFileError,
    InputUnreadableError,
    NoTelemetryError,
    SpecscopeError,
    StoreError,
)
from specscope.ingest import IngestReport, RunSummary, SourceReport, ingest
from specscope.parse import ParseResult, parse_lines, parse_text
from specscope.runs import runs_overview
from specscope.schema import SCHEMA_VERSION
from specscope.store import Store, open_store

__version__ = "0.1.0"

__all__ = [
    "SCHEMA_VERSION",
    "ExitStatus",
    "IngestReport",
    "InputBinaryError",
    "InputEmptyError",
    "InputMissingError",
    "InputNotAFileError",
    "InputUnreadableError",
    "NoTelemetryError",
    "ParseResult",
    "RunSummary",
    "SourceReport",
    "SpecscopeError",
    "Store",
    "StoreError",
    "ingest",
    "open_store",
    "parse_lines",
    "parse_text",
    "runs_overview",
    "weighted_acceptance",
]
