"""specscope: speculative-decoding telemetry from vLLM and SGLang, into Parquet and answers.

import specscope
report = specscope.ingest("server.log", store="specscope-data")
store = specscope.open_store("specscope-data")
store.spec_decode.collect()          # polars LazyFrame per table
specscope.weighted_acceptance(store.spec_decode, by=["run_id"])
"""

import importlib
import os
from typing import TYPE_CHECKING, Any

# polars' allocator (jemalloc) keeps freed pages for 10 s by default: reading a big log
# block by block, that is 40 MB of RSS for nothing. It reads this once, when polars loads.
os.environ.setdefault("_RJEM_MALLOC_CONF", "dirty_decay_ms:200,muzzy_decay_ms:0")

__version__ = "0.1.0"

# Each public name and the module that holds it, imported when first asked for: the CLI's
# --help and a script that needs one function do not pay for polars, pyarrow and Altair.
_WHERE = {
    "weighted_acceptance": "specscope.acceptance",
    "Advice": "specscope.analysis.advise",
    "advise": "specscope.analysis.advise",
    "Comparison": "specscope.analysis.compare",
    "compare": "specscope.analysis.compare",
    "detect": "specscope.analysis.detectors",
    "Finding": "specscope.analysis.findings",
    "Severity": "specscope.analysis.findings",
    "runs_overview": "specscope.analysis.runs",
    "ExitStatus": "specscope.errors",
    "InputBinaryError": "specscope.errors",
    "InputEmptyError": "specscope.errors",
    "InputMissingError": "specscope.errors",
    "InputNotAFileError": "specscope.errors",
    "InputUnreadableError": "specscope.errors",
    "NoTelemetryError": "specscope.errors",
    "SpecscopeError": "specscope.errors",
    "StoreError": "specscope.errors",
    "UsageError": "specscope.errors",
    "IngestReport": "specscope.logs.ingest",
    "RunSummary": "specscope.logs.ingest",
    "SourceReport": "specscope.logs.ingest",
    "ingest": "specscope.logs.ingest",
    "parse_lines": "specscope.logs.parser",
    "parse_text": "specscope.logs.parser",
    "ParseResult": "specscope.logs.results",
    "PullReport": "specscope.prometheus.pull",
    "pull": "specscope.prometheus.pull",
    "rules_yaml": "specscope.prometheus.rules",
    "SCHEMA_VERSION": "specscope.schema",
    "Store": "specscope.store.reading",
    "open_store": "specscope.store.reading",
    "Report": "specscope.report.build",
    "build_report": "specscope.report.build",
    "write_report": "specscope.report.write",
}

if TYPE_CHECKING:
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
    from specscope.report.build import Report, build_report
    from specscope.report.write import write_report
    from specscope.schema import SCHEMA_VERSION
    from specscope.store.reading import Store, open_store


def __getattr__(name: str) -> Any:
    where = _WHERE.get(name)
    if where is None:
        raise AttributeError(f"module 'specscope' has no attribute {name!r}")
    value = getattr(importlib.import_module(where), name)
    globals()[name] = value  # asked once
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_WHERE})


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
