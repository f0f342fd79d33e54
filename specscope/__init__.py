"""specscope: speculative-decoding telemetry from vLLM and SGLang, into Parquet and answers.

import specscope
report = specscope.ingest("server.log", store="specscope-data")
store = specscope.open_store("specscope-data")
store.spec_decode.collect()          # polars LazyFrame per table
specscope.weighted_acceptance(store.spec_decode, by=["run_id"])
"""

import os
from typing import TYPE_CHECKING, Any

# polars' allocator (jemalloc) keeps freed pages for 10 s by default: reading a big log
# block by block, that is 40 MB of RSS for nothing. It reads this once, when polars loads.
os.environ.setdefault("_RJEM_MALLOC_CONF", "dirty_decay_ms:200,muzzy_decay_ms:0")

from specscope.acceptance import weighted_acceptance
from specscope.analysis.advise import Advice, advise
from specscope.analysis.compare import Comparison, compare
from specscope.analysis.detectors import detect
from specscope.analysis.findings import Finding, Severity
from specscope.analysis.runs import runs_overview
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
    UsageError,
)
from specscope.logs.ingest import IngestReport, RunSummary, SourceReport, ingest
from specscope.logs.parser import parse_lines, parse_text
from specscope.logs.results import ParseResult
from specscope.prometheus.pull import PullReport, pull
from specscope.prometheus.rules import rules_yaml
from specscope.schema import SCHEMA_VERSION
from specscope.store.reading import Store, open_store

__version__ = "0.1.0"

if TYPE_CHECKING:
    from specscope.report.build import Report, build_report
    from specscope.report.write import write_report

# The report draws with Altair: imported when first asked for, so that ingest and detect
# do not pay for it.
_LAZY = {"Report", "build_report", "write_report"}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        from specscope.report import build, write

        return getattr(write if name == "write_report" else build, name)
    raise AttributeError(f"module 'specscope' has no attribute {name!r}")


__all__ = [
    "SCHEMA_VERSION",
    "Advice",
    "Comparison",
    "ExitStatus",
    "Finding",
    "IngestReport",
    "InputBinaryError",
    "InputEmptyError",
    "InputMissingError",
    "InputNotAFileError",
    "InputUnreadableError",
    "NoTelemetryError",
    "ParseResult",
    "PullReport",
    "Report",
    "RunSummary",
    "Severity",
    "SourceReport",
    "SpecscopeError",
    "Store",
    "StoreError",
    "UsageError",
    "advise",
    "build_report",
    "compare",
    "detect",
    "ingest",
    "open_store",
    "parse_lines",
    "parse_text",
    "pull",
    "rules_yaml",
    "runs_overview",
    "weighted_acceptance",
    "write_report",
]
