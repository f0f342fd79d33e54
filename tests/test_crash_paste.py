"""A paste of a crash alone (the server died, no telemetry printed) is stored and judged:
`error_signature`, critical, at the crash's line. A paste of warnings alone is still
refused with what it held, and a crash beside telemetry changes nothing of the rows."""

from __future__ import annotations

import json

import specscope
from specscope.errors import ExitStatus

from .helpers import FIXTURES

# vllm#40756: an MTP server dying of an illegal memory access, as pasted (world case 65).
CRASH = FIXTURES / "world" / "65_mtp_illegal_memory_engine_dead.log"
WARNING = (
    "(APIServer pid=1) WARNING 10-03 20:30:02 [speculative.py:200] method `qwen3_next_mtp` "
    "is deprecated and replaced with mtp.\n"
)


def test_a_crash_alone_is_stored_and_found(cli, tmp_path):
    r = cli("ingest", CRASH, "--store", tmp_path / "s", "--json")
    assert r.status == 0, r.err
    (source,) = json.loads(r.out)["sources"]
    assert any("the server died (engine_dead at line 3)" in n for n in source["notes"])
    findings = specscope.detect(specscope.open_store(tmp_path / "s"))
    assert [(f.kind, f.severity, f.lines) for f in findings] == [
        ("error_signature", specscope.Severity.CRITICAL, (3, 3))
    ]


def test_triage_of_a_crash_names_it(cli):
    r = cli("triage", CRASH, "--json")
    assert r.status == 0, r.err
    kinds = {f["kind"] for f in json.loads(r.out)["findings"]}
    assert kinds == {"error_signature"}


def test_a_crash_named_in_prose_is_found(cli, tmp_path):
    """Seed 000: a user's prose quoting the crash of a draft model whose hidden size is
    not the target's; the verdict an expert gives is that crash."""
    r = cli("triage", FIXTURES / "seeds" / "000_cd87a0961b7b2059.txt", "--json")
    assert r.status == 0, r.err
    (finding,) = json.loads(r.out)["findings"]
    assert finding["kind"] == "error_signature" and finding["measured"]["code"] == (
        "tensor_size_mismatch"
    )


def test_warnings_alone_are_still_no_telemetry(cli, tmp_path):
    paste = tmp_path / "warning.log"
    paste.write_text(WARNING, encoding="utf-8")
    r = cli("ingest", paste, "--store", tmp_path / "s")
    assert r.status == ExitStatus.NO_TELEMETRY
    assert "no speculative-decoding telemetry found" in r.err and "method_deprecated" in r.err
    assert not (tmp_path / "s" / "specscope.json").exists()


def test_an_sglang_child_failure_alone_is_a_crash(cli, tmp_path):
    """SGLang's parent logs this when a child process died (entrypoints/engine.py's SIGQUIT
    handler); pasted alone, as from a docker log, it is the verdict, not 'no telemetry'."""
    paste = tmp_path / "sglang.log"
    paste.write_text(
        "2026-09-22T06:50:07.810311167Z [2026-09-22 06:50:07] Received sigquit from a child "
        "process. It usually means the child failed.\n",
        encoding="utf-8",
    )
    r = cli("triage", paste, "--json")
    assert r.status == 0, r.err
    (finding,) = json.loads(r.out)["findings"]
    assert (finding["kind"], finding["measured"]["code"]) == (
        "error_signature",
        "sglang_child_failed",
    )


def test_sglang_prose_about_an_exception_is_no_crash(cli, tmp_path):
    paste = tmp_path / "prose.log"
    paste.write_text("If it hit an exception: check the scheduler first.\n", encoding="utf-8")
    r = cli("ingest", paste, "--store", tmp_path / "s")
    assert r.status == ExitStatus.NO_TELEMETRY
