"""`specscope ingest` and `specscope runs` end to end, on real seed excerpts."""

from __future__ import annotations

import gzip
import json
import os
import shutil
from pathlib import Path

import duckdb
import polars as pl

import specscope
from specscope.errors import ExitStatus
from specscope.logs.parser import parse_text

from .helpers import SEEDS

INT4 = SEEDS / "003_83783f5568908b19.txt"  # MTP on INT4: 0.0%, then BF16
DFLASH = SEEDS / "002_2dcac71f91935498.txt"  # DFlash: 9 log records (wrapped, glued), 2 bench
PROSE = SEEDS / "000_cd87a0961b7b2059.txt"  # a forum thread with no telemetry


def test_ingest_summary_names_counts_runs_and_acceptance(cli, tmp_path):
    r = cli("ingest", INT4, "--store", tmp_path / "s", "--year", "2026")
    assert r.status == ExitStatus.SUCCESS, r.err
    assert "found 21 spec-decode records, 22 engine-stats records" in r.out
    assert "3 runs" in r.out
    # the INT4 run: 13 intervals, nothing accepted, τ = 1
    assert "13 spec-decode records: 4,869 drafts, 19,476 draft tokens, 0 accepted" in r.out
    assert "acceptance rate 0.0%, mean acceptance length 1.00" in r.out
    # the BF16 run, weighted: 3623 / 7175 = 50.5%, not the mean of the interval rates
    assert "acceptance rate 50.5%" in r.out
    assert "2026-04-07 17:29:14 -> 17:30:34" in r.out


def test_ingest_json_matches_the_store(cli, tmp_path):
    store = tmp_path / "s"
    r = cli("ingest", INT4, "--store", store, "--json", "--year", "2026")
    assert r.status == 0
    data = json.loads(r.out)
    (source,) = data["sources"]
    assert source["status"] == "new"
    assert source["found"]["spec_decode"] == 21
    runs = {run["run_id"]: run for run in source["runs"]}
    spec = specscope.open_store(store).spec_decode.collect()
    for run_id, run in runs.items():
        rows = spec.filter(pl.col("run_id") == run_id)
        assert run["spec_records"] == rows.height
        if rows.height:
            assert run["accepted_tokens"] == rows["accepted_tokens"].sum()
            assert run["draft_tokens"] == rows["draft_tokens"].sum()


def test_store_reads_back_in_polars_and_duckdb(tmp_path):
    store = tmp_path / "s"
    specscope.ingest([INT4, DFLASH], store=store, year=2026).raise_for_errors()
    lazy = pl.scan_parquet(f"{store}/spec_decode/**/*.parquet", hive_partitioning=True)
    frame = lazy.collect()
    assert frame.height == 21 + 16
    assert set(frame["source_id"].unique()) == {
        s for s in specscope.open_store(store).sources.collect()["source_id"]
    }
    con = duckdb.connect()
    rows = con.execute(
        f"select source_id, count(*), sum(accepted_tokens), sum(draft_tokens) "
        f"from read_parquet('{store}/spec_decode/**/*.parquet', hive_partitioning=true) "
        "group by 1 order by 2"
    ).fetchall()
    assert [r[1] for r in rows] == [16, 21]
    assert rows[1][2:] == (3623, 19476 + 7175)
    # list columns survive the round trip
    per_pos = con.execute(
        f"select accepted_per_pos from read_parquet('{store}/spec_decode/**/*.parquet') "
        "where accepted_tokens = 506"
    ).fetchall()
    assert per_pos == [([114, 106, 102, 97, 87],)]


def test_same_file_twice_adds_nothing(cli, tmp_path):
    store = tmp_path / "s"
    assert cli("ingest", INT4, "--store", store).status == 0
    before = sorted(p.relative_to(store) for p in store.rglob("*.parquet"))
    again = cli("ingest", INT4, "--store", store)
    assert again.status == 0
    assert "unchanged" in again.out and "nothing added" in again.out
    assert sorted(p.relative_to(store) for p in store.rglob("*.parquet")) == before
    assert specscope.open_store(store).spec_decode.collect().height == 21


def test_a_file_that_grew_adds_only_new_records(tmp_path):
    lines = INT4.read_text(encoding="utf-8").splitlines(keepends=True)
    log = tmp_path / "server.log"
    log.write_text("".join(lines[:40]), encoding="utf-8")
    store = tmp_path / "s"
    first = specscope.ingest(log, store=store, year=2026)
    first.raise_for_errors()
    n_first = first.sources[0].added["spec_decode"]
    assert 0 < n_first < 21
    log.write_text("".join(lines), encoding="utf-8")
    second = specscope.ingest(log, store=store, year=2026)
    second.raise_for_errors()
    assert second.sources[0].status == "grown"
    assert second.sources[0].added["spec_decode"] == 21 - n_first
    spec = specscope.open_store(store).spec_decode.collect()
    assert spec.height == 21
    assert spec.select(pl.struct("source_id", "line").n_unique()).item() == 21
    fresh = specscope.ingest(INT4, store=tmp_path / "fresh", year=2026)
    fresh.raise_for_errors()
    want = specscope.open_store(tmp_path / "fresh").spec_decode.collect()
    columns = ["line", "accepted_tokens", "draft_tokens", "run_id"]
    assert (
        spec.sort("line")["accepted_tokens"].to_list()
        == want.sort("line")["accepted_tokens"].to_list()
    )
    assert spec.select(columns[:-1]).sort("line").equals(want.select(columns[:-1]).sort("line"))
    assert specscope.open_store(store).runs.collect().height == 3


def test_gzip_and_stdin(cli, tmp_path, monkeypatch):
    gz = tmp_path / "server.log.gz"
    gz.write_bytes(gzip.compress(DFLASH.read_bytes()))
    r = cli("ingest", gz, "--store", tmp_path / "a")
    assert r.status == 0, r.err
    assert "found 16 spec-decode records" in r.out  # 4 rates and a length stated in prose
    import io
    import sys

    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(INT4.read_bytes())))
    r = cli("ingest", "-", "--store", tmp_path / "b")
    assert r.status == 0, r.err
    assert "<stdin>: new" in r.out
    assert "found 21 spec-decode records" in r.out


def test_set_and_label_reach_the_runs(cli, tmp_path):
    store = tmp_path / "s"
    r = cli(
        "ingest",
        INT4,
        "--store",
        store,
        "--set",
        "quantization=int4-awq",
        "--set",
        "hardware=RTX 3090",
        "--set",
        "enable_prefix_caching=off",
        "--label",
        "polarquant",
    )
    assert r.status == 0, r.err
    runs = specscope.open_store(store).runs.collect()
    assert set(runs["quantization"]) == {"int4-awq"}
    assert set(runs["quantization_source"]) == {"user"}
    assert set(runs["hardware"]) == {"RTX 3090"}
    assert set(runs["enable_prefix_caching"]) == {False}
    assert set(runs["label"]) == {"polarquant"}
    bad = cli("ingest", INT4, "--store", tmp_path / "t", "--set", "colour=blue")
    assert bad.status == ExitStatus.USAGE
    assert "unknown field" in bad.err and "\n" not in bad.err.strip()


def test_runs_lists_runs_with_weighted_acceptance(cli, tmp_path):
    store = tmp_path / "s"
    assert cli("ingest", INT4, DFLASH, "--store", store).status == 0
    r = cli("runs", "--store", store)
    assert r.status == 0
    assert "50.5%" in r.out and "3.52" in r.out
    rows = json.loads(cli("runs", "--store", store, "--json").out)
    # Seed 002: 7 runs of the server's lines and one for each rate or length its author
    # states in prose (lines 22, 210, 211, 213), a run of its own (records.Records.keep):
    # the server's lines after them are not theirs.
    said = (SEEDS / "002_2dcac71f91935498.txt").read_text(encoding="utf-8")
    stated = [
        r for r in parse_text(said).tables["spec_decode"] if r["format"] == "stated_acceptance"
    ]
    assert {r["line"] for r in stated} == {22, 210, 211, 213}
    assert len(rows) == 3 + 7 + len(stated)
    own = [r for r in rows if "002_" in r["source"] and r["first_line"] in (22, 210, 211, 213)]
    assert len(own) == len(stated) and all(r["last_line"] == r["first_line"] for r in own)
    bf16 = next(row for row in rows if row["accepted_tokens"] == 3623)
    assert bf16["k"] == 5
    assert abs(bf16["mean_acceptance_length"] - (1 + 3623 / 1435)) < 1e-12


def test_store_from_environment(cli, tmp_path):
    store = tmp_path / "env-store"
    r = cli("ingest", INT4, env={"SPECSCOPE_STORE": str(store)})
    assert r.status == 0
    assert (store / "specscope.json").is_file()
    assert "s54e95cd2ea-3" in cli("runs", env={"SPECSCOPE_STORE": str(store)}).out


def test_default_store_is_in_the_working_directory(cli, tmp_path):
    r = cli("ingest", INT4)
    assert r.status == 0
    assert (tmp_path / "specscope-data" / "specscope.json").is_file()


def test_installed_copy_of_a_seed_is_the_seed():
    shared = SEEDS.parent.parent.parent / "shared" / "seeds" / INT4.name
    if shared.exists():
        assert shared.read_bytes() == INT4.read_bytes()
    assert os.path.getsize(INT4) > 1000
    assert shutil.which("specscope") is not None


def test_summary_of_many_runs_shows_the_busiest(cli, tmp_path):
    from specscope.cli import render as summary

    from .loglines import spec, stats

    lines = []
    for pid in range(1, 16):  # 15 runs; run 7 has the most records
        for i in range(1, 3 + (10 if pid == 7 else 0)):
            lines += [stats(i + 100 * pid, pid=pid), spec(i + 100 * pid, 100, [50, 25], pid=pid)]
    log = tmp_path / "many.log"
    log.write_text("\n".join(lines) + "\n")
    r = cli("ingest", log, "--store", tmp_path / "s", "--year", "2026")
    assert r.status == ExitStatus.SUCCESS, r.err
    shown = [line for line in r.out.splitlines() if line.startswith("  run ")]
    assert len(shown) == summary.MAX_RUNS_SHOWN
    assert any("12 spec-decode records" in line for line in r.out.splitlines())
    assert f"... {15 - summary.MAX_RUNS_SHOWN} more runs" in r.out


def test_weighted_acceptance_keeps_the_order_groups_first_appear_in():
    """Reports list runs in this order: it must not change from one call to the next."""
    names = [f"run-{i:03d}" for i in range(300, 0, -1)]  # not sorted, many groups
    frame = pl.DataFrame(
        {
            "run_id": [n for n in names for _ in range(20)],
            "drafts": [10] * (20 * len(names)),
            "draft_tokens": [30] * (20 * len(names)),
            "accepted_tokens": [12] * (20 * len(names)),
            "k": [3] * (20 * len(names)),
            "ts": [None] * (20 * len(names)),
            "mean_acceptance_length": [None] * (20 * len(names)),
            "accepted_per_pos": [[6, 4, 2]] * (20 * len(names)),
        },
        schema_overrides={"ts": pl.Datetime, "mean_acceptance_length": pl.Float64},
    )
    for _ in range(5):
        assert specscope.weighted_acceptance(frame)["run_id"].to_list() == names


def test_a_big_log_shows_a_progress_bar_on_a_terminal(tmp_path: Path) -> None:
    """Standard error a terminal and the log over the threshold: a bar with the file's
    name and sizes; standard error a pipe: none (issue 7)."""
    import os
    import pty
    import select
    import subprocess
    import sys

    log = tmp_path / "server.log"
    log.write_bytes((SEEDS / "003_83783f5568908b19.txt").read_bytes() * 40)
    env = {
        **os.environ,
        "SPECSCOPE_PROGRESS_BYTES": "1000",
        "COLUMNS": "120",
        "TERM": "xterm",
        "PYTHONPATH": os.pathsep.join(sys.path),
    }
    cmd = [sys.executable, "-m", "specscope", "ingest", str(log), "--store", str(tmp_path / "s")]
    main, child = pty.openpty()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=child, env=env)
    os.close(child)
    seen = b""
    while True:
        ready, _, _ = select.select([main], [], [], 30)
        if not ready:
            break
        try:
            chunk = os.read(main, 65536)
        except OSError:
            break
        if not chunk:
            break
        seen += chunk
    assert proc.wait(timeout=60) == 0
    shown = seen.decode("utf-8", errors="replace")
    assert "server.log" in shown and "kB" in shown, shown[-500:]
    piped = subprocess.run(cmd, capture_output=True, env=env, text=True)
    assert piped.returncode == 0 and piped.stderr == ""


def test_weighted_acceptance_k_is_the_most_common_the_first_seen_among_equals():
    """As ingest's run summary counts it, and the same from one call to the next."""
    ks = [5, 4, 4, 5, None, 3, 3, 3, 4]  # 3 and 4 three times each: 4 came first
    frame = pl.DataFrame(
        {
            "run_id": ["r"] * len(ks),
            "drafts": [10] * len(ks),
            "draft_tokens": [30] * len(ks),
            "accepted_tokens": [12] * len(ks),
            "k": ks,
            "ts": [None] * len(ks),
            "mean_acceptance_length": [None] * len(ks),
            "accepted_per_pos": [[6, 4, 2]] * len(ks),
        },
        schema_overrides={"ts": pl.Datetime, "mean_acceptance_length": pl.Float64, "k": pl.Int32},
    )
    for _ in range(5):
        assert specscope.weighted_acceptance(frame)["k"].to_list() == [4]


def _tables(store: Path) -> dict[str, pl.DataFrame]:
    opened = specscope.open_store(store)
    volatile = ["ingest_id", "ingested_at"]
    return {
        t: getattr(opened, t).collect().drop(volatile, strict=False)
        for t in ("spec_decode", "engine_stats", "runs", "sources", "events", "bench")
    }


def test_jobs_read_logs_side_by_side_into_the_same_tables(cli, tmp_path, monkeypatch):
    """Two processes, one ingest: the store holds what reading one after the other gives,
    and the summary lists the logs in the order given."""
    import importlib

    ingest_module = importlib.import_module("specscope.logs.ingest")
    calls = []
    real = ingest_module._side_by_side
    monkeypatch.setattr(
        ingest_module, "_side_by_side", lambda *a, **k: calls.append(a[0]) or real(*a, **k)
    )
    one, two = tmp_path / "one", tmp_path / "two"
    r1 = cli("ingest", INT4, DFLASH, "--store", one, "--year", "2026", "--json")
    r2 = cli("ingest", INT4, DFLASH, "--store", two, "--year", "2026", "--json", "--jobs", "2")
    assert r1.status == r2.status == 0, r2.err
    assert calls == [[str(INT4), str(DFLASH)]]  # the second, and only it, side by side
    paths = [s["path"] for s in json.loads(r2.out)["sources"]]
    assert paths == [str(INT4), str(DFLASH)]
    first, second = _tables(one), _tables(two)
    for table, frame in first.items():
        assert frame.equals(second[table]), table
    assert first["spec_decode"].height > 20
    (committed,) = json.loads((two / "specscope.json").read_text())["ingests"]
    assert len(committed["sources"]) == 2  # one ingest, both sources


def test_jobs_read_logs_with_the_same_text_one_after_the_other(cli, tmp_path):
    copy = tmp_path / "copy.log"
    shutil.copy(INT4, copy)
    r = cli("ingest", INT4, copy, "--store", tmp_path / "s", "--json", "--jobs", "2")
    assert r.status == 0, r.err
    assert [s["status"] for s in json.loads(r.out)["sources"]] == ["new", "unchanged"]


def test_jobs_a_log_that_fails_is_reported_and_the_others_kept(cli, tmp_path):
    store = tmp_path / "s"
    r = cli("ingest", INT4, tmp_path / "missing.log", DFLASH, "--store", store, "--jobs", "2")
    assert r.status == ExitStatus.INPUT_MISSING
    assert "missing.log" in r.err and "Traceback" not in r.err + r.out
    sources = specscope.open_store(store).sources.collect()
    assert sorted(Path(p).name for p in sources["path"]) == sorted([INT4.name, DFLASH.name])


def test_ingest_does_not_load_the_http_client(tmp_path):
    # requests and prometheus_api_client cost every process 6 MB of the 300 an ingest has.
    import subprocess
    import sys

    log = Path(__file__).resolve().parent.parent / "fixtures" / "seeds" / "003_83783f5568908b19.txt"
    code = (
        "import sys, specscope.cli.app, specscope\n"
        f"specscope.ingest([{str(log)!r}], store={str(tmp_path / 's')!r})\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in "
        "('requests', 'prometheus_api_client', 'urllib3', 'prometheus_client')))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_errors_print_once_on_stderr_and_leave_no_empty_store(cli, tmp_path):
    """A first ingest that stores nothing says each error once, on stderr only, and does not
    leave a store folder behind that looks like a store."""
    prose = tmp_path / "prose.log"
    prose.write_text("hello\nworld\n", encoding="utf-8")
    store = tmp_path / "new-store"
    r = cli("ingest", prose, tmp_path / "missing.log", "--store", store)
    assert r.status != 0
    assert r.out.strip() == ""
    errors = r.err.strip().splitlines()
    assert len(errors) == 2 and all(e.startswith("specscope: error: ") for e in errors)
    assert sum("prose.log" in e for e in errors) == 1
    assert not store.exists()
    # a store that exists is left as it is
    store.mkdir()
    (store / "mine.txt").write_text("x", encoding="utf-8")
    assert cli("ingest", prose, "--store", store).status != 0
    assert sorted(p.name for p in store.iterdir()) == ["mine.txt"]
