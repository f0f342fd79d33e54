"""`specscope report` and `compare`: real renders (PNG decoded, HTML in headless Chromium),
redaction, and text from logs staying text."""

from __future__ import annotations

import itertools
import json
import re
import shutil
import struct
import subprocess
from pathlib import Path

import pytest

import specscope
from specscope.analysis.compare import compare
from specscope.logs.parser import parse_text
from specscope.report.build import build_report
from specscope.report.markdown import GITHUB_COMMENT_LIMIT, md, render_markdown
from specscope.report.redact import Redactor

from .helpers import SEEDS
from .loglines import spec, start, stats

SECRETS = ("hf_AbCdEfGhIjKlMnOpQrSt", "sk-live-0123456789abcdef", "zqalice")
INJECTION = '<script>document.title="PWNED"</script><img src=x onerror=alert(1)>'


def _planted_log(tmp_path):
    """A broken DFlash run (acceptance collapsing with two requests) and a healthy one, with
    an API key, an HF token and a home path in the startup args, and a hostile model name."""
    lines = [
        start(
            21,
            "/home/zqalice/models/Qwen3.5-27B-FP8" + INJECTION,
            "dflash",
            8,
            api_key=[SECRETS[1]],
            hf_token=SECRETS[0],
            served_model_name=[INJECTION],
        )
    ]
    for i in range(1, 8):
        lines += [
            stats(i, running=1, pid=21),
            spec(i, 120, [100, 80, 60, 40, 30, 20, 10, 5], pid=21),
        ]
    for i in range(8, 15):
        lines += [stats(i, running=2, pid=21), spec(i, 120, [20, 10, 5, 2, 1, 0, 0, 0], pid=21)]
    lines += [start(22, "Qwen/Qwen3.5-27B", "dflash", 8)]
    for i in range(20, 28):
        lines += [
            stats(i, running=1, pid=22),
            spec(i, 120, [110, 95, 80, 65, 50, 40, 30, 25], pid=22),
        ]
    path = tmp_path / "server.log"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


@pytest.fixture
def planted(tmp_path):
    store = tmp_path / "store"
    specscope.ingest(_planted_log(tmp_path), store=store, year=2026).raise_for_errors()
    return specscope.open_store(store)


def _png_size(data: bytes) -> tuple[int, int]:
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = struct.unpack(">II", data[16:24])
    return width, height


def test_markdown_fits_a_comment_links_real_images_and_leaks_nothing(planted, tmp_path):
    out = tmp_path / "out" / "report.md"
    report = build_report(planted)
    text = render_markdown(report, out)
    out.write_text(text)
    assert len(text) <= GITHUB_COMMENT_LIMIT
    links = re.findall(r"!\[[^\]]*\]\(([^)]+)\)", text)
    assert len(links) >= 4
    for link in links:
        image = out.parent / link
        assert image.is_file()
        width, height = _png_size(image.read_bytes())
        assert width > 300 and height > 150
    for secret in SECRETS:
        assert secret not in text
    assert "<script>" not in text and "<img" not in text
    assert "concurrency_collapse" in text or "concurrency\\_collapse" in text
    assert "Redacted" in text


def test_cli_writes_html_that_chromium_draws_without_running_injected_script(
    planted, tmp_path, cli
):
    chromium = shutil.which("chromium")
    if chromium is None:
        pytest.skip("needs Debian's chromium (.ci/run installs it)")
    out = tmp_path / "report.html"
    r = cli("report", "--store", planted.path, "--out", out)
    assert r.status == 0, r.err
    page = out.read_text()
    for secret in SECRETS:
        assert secret not in page
    assert "http://" not in page.split("<script>", 1)[0].lower().replace("http://www.w3.org", "")
    charts = page.count('class="chart"')
    assert charts >= 4
    dom = subprocess.run(
        [
            chromium,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--no-first-run",
            f"--user-data-dir={tmp_path / 'chrome'}",
            "--virtual-time-budget=15000",
            "--dump-dom",
            out.as_uri(),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    ).stdout
    assert dom.count('data-rendered="yes"') == charts  # every chart drew
    assert dom.count("<svg") >= charts
    assert "<title>Speculative decoding triage</title>" in dom  # the injection did not run
    assert "PWNED" not in dom.split("</title>")[0]
    assert "&lt;script&gt;document.title" in dom  # the hostile name shows as text


def test_report_json_and_no_redact(planted, cli):
    data = json.loads(cli("report", "--store", planted.path, "--json").out)
    assert {"verdict", "runs", "findings", "what_moves_acceptance"} <= set(data)
    assert SECRETS[0] not in json.dumps(data)
    raw = json.loads(cli("report", "--store", planted.path, "--json", "--no-redact").out)
    assert "/home/zqalice" in json.dumps(raw)
    assert "Redaction was off" in raw["redaction"]


def test_verdict_and_tables_on_the_seeds(tmp_path):
    store = tmp_path / "s"
    specscope.ingest(
        [SEEDS / "003_83783f5568908b19.txt", SEEDS / "002_2dcac71f91935498.txt"],
        store=store,
        year=2026,
    ).raise_for_errors()
    report = build_report(specscope.open_store(store), with_charts=False)
    # 8 runs of the servers' lines, and each rate or length seed 002's author states in
    # prose a run of its own (parsers/stated_acceptance)
    said = (SEEDS / "002_2dcac71f91935498.txt").read_text(encoding="utf-8")
    stated = [
        r for r in parse_text(said).tables["spec_decode"] if r["format"] == "stated_acceptance"
    ]
    assert len(stated) >= 4
    assert report.verdict.startswith(
        f"{8 + len(stated)} runs with speculative decoding, 51,301 drafts. 2 critical findings "
        "(concurrency_collapse, zero_acceptance)."
    )
    # Launches without records are folded into one line, not rows of dashes; a column no
    # run filled is named once instead of shown empty; every finding says how sure it is.
    # (seed 003's launch and seed 002's DFlash launch: the rate its author states after it
    # is a run of its own, not the launch's)
    assert len(report.quiet) == 2 and all("003_" in q or "002_" in q for q in report.quiet)
    shown = [key for _, key in report.columns]
    for r in report.runs:
        assert any(r.get(k) is not None for k in shown if k not in ("run", "run_id"))
    for key in shown:
        assert any(r.get(key) is not None for r in report.runs), key
    assert "model" in report.not_in_log
    assert all(
        f["confidence"]["level"] in ("certain", "likely", "suggestive") for f in report.findings
    )
    rows = {r["run_id"]: r for r in report.runs}
    assert rows["s54e95cd2ea-2"][
        "run"
    ] == "fixtures/seeds/003_83783f5568908b19.txt:19-44 k=4" or rows["s54e95cd2ea-2"][
        "run"
    ].startswith("003_83783f5568908b19.txt:19-44")
    assert rows["s54e95cd2ea-3"]["acceptance_rate"] == pytest.approx(3623 / 7175)
    assert rows["s09b4732cdd-2"]["mean_acceptance_length"] == pytest.approx(8.086, abs=1e-3)
    kinds = [f["kind"] for f in report.findings]
    assert kinds[:2] == ["zero_acceptance", "concurrency_collapse"]
    zero = report.findings[0]
    assert zero["evidence"][0].startswith("(APIServer pid=4741) INFO 04-07 17:19:49")


def test_what_moves_acceptance_matched_pair_and_confounding(tmp_path):
    model = "Qwen/Qwen3.5-27B"
    lines = [start(31, model, "dflash", 3, enable_prefix_caching=True, quantization="gptq")]
    lines += [
        x for i in range(1, 6) for x in (stats(i, pid=31), spec(i, 100, [40, 20, 10], pid=31))
    ]
    lines += [start(32, model, "dflash", 3, enable_prefix_caching=False, quantization="gptq")]
    lines += [
        x for i in range(10, 15) for x in (stats(i, pid=32), spec(i, 100, [80, 60, 40], pid=32))
    ]
    lines += [
        start(
            33,
            model,
            "dflash",
            3,
            enable_prefix_caching=False,
            quantization="fp8",
            kv_cache_dtype="fp8",
        )
    ]
    lines += [
        x for i in range(20, 25) for x in (stats(i, pid=33), spec(i, 100, [70, 50, 30], pid=33))
    ]
    log = tmp_path / "moves.log"
    log.write_text("\n".join(lines) + "\n")
    specscope.ingest(log, store=tmp_path / "s", year=2026).raise_for_errors()
    report = build_report(specscope.open_store(tmp_path / "s"), with_charts=False)
    by_factor = {m["factor"]: m for m in report.moves}
    caching = by_factor["enable_prefix_caching"]
    (pair,) = caching["matched_pairs"]
    # Pairs run from the value that sorts first (off) to the other, so effects compare.
    assert pair["value_a"] is False and pair["value_b"] is True
    assert pair["difference"] == pytest.approx(70 / 300 - 180 / 300)
    assert pair["interval"][1] < 0  # caching on accepts less, and the interval says so
    quant = by_factor["quantization"]  # fp8 weights came with an fp8 KV cache
    assert quant["matched_pairs"] == []
    assert "kv_cache_dtype" in quant["confounded_with"]


def test_compare_two_runs(planted):
    runs = sorted(planted.runs.collect()["run_id"])
    result = compare(planted, runs[0], runs[1])
    names = [m["name"] for m in result.measures]
    assert names[:3] == ["drafts", "acceptance_rate", "mean_acceptance_length"]
    rate = result.measures[1]
    low, high = rate["interval"]
    assert low < rate["difference"] < high
    assert rate["difference"] > 0  # the healthy run accepts more
    assert any(c["field"] == "model" for c in result.config)


def test_cli_compare(planted, cli):
    runs = sorted(planted.runs.collect()["run_id"])
    r = cli("compare", runs[0], runs[1], "--store", planted.path)
    assert r.status == 0 and "acceptance_rate" in r.out
    bad = cli("compare", runs[0], "nope", "--store", planted.path)
    assert bad.status != 0 and "no run nope" in bad.err


def test_redactor():
    red = Redactor()
    text = red(
        "args: {'api_key': ['sk-abcdefghijkl'], 'hf_token': 'hf_abcdefghijkl'} "
        "Authorization: Bearer abc.def.ghi /home/bob/x http://u:p@h:1/"
    )
    assert "sk-abc" not in text and "hf_abc" not in text and "abc.def" not in text
    assert "/home/bob" not in text and "u:p@" not in text
    assert red.counts["token"] >= 3 and red.counts["path"] == 1
    hosts = Redactor(hosts=True)
    assert (
        hosts("see 10.1.2.3 and http://prom.internal:9090/x")
        == "see x.x.x.x and http://host:9090/x"
    )
    assert Redactor(enabled=False)("hf_abcdefghijkl") == "hf_abcdefghijkl"


def test_markdown_text_is_text():
    assert md("<script>alert(1)</script>") == "&lt;script&gt;alert(1)&lt;/script&gt;"
    assert md("a|b*c_d`e[f]") == "a\\|b\\*c\\_d\\`e\\[f\\]"


def test_chart_specs_are_valid_vega_lite(planted):
    """The report builds its specs as plain dicts (Altair costs a report as much CPU as its
    charts); this checks them against Vega-Lite's schema."""
    import altair as alt

    report = build_report(planted)
    assert {name for name, _, _ in report.charts} >= {"per_position", "over_time"}
    for name, _, spec_dict in report.charts:
        kind = alt.LayerChart if "layer" in spec_dict else alt.Chart
        kind.from_dict(spec_dict, validate=True)
        assert spec_dict["$schema"].startswith("https://vega.github.io/schema/vega-lite/"), name


def test_over_time_buckets_long_logs_summing_counts(tmp_path):
    from datetime import datetime, timedelta

    import polars as pl

    from specscope.report import charts

    # 40 s buckets of four 10 s intervals, a point a pixel across
    n = (charts.WIDTH - 1) * 4 + 1
    t0 = datetime(2026, 4, 7)
    spec_rows = pl.DataFrame(
        {
            "ts": [t0 + timedelta(seconds=10 * i) for i in range(n)],
            # alternating 10/100 and 90/100: a mean of ratios and a ratio of sums agree here,
            # so make the weights differ too
            "accepted_tokens": [10 if i % 2 else 180 for i in range(n)],
            "draft_tokens": [100 if i % 2 else 200 for i in range(n)],
            "running_reqs": [1] * n,
            "run_id": ["r-1"] * n,
        }
    )
    spec_dict = charts.over_time(spec_rows, lambda s: s)
    assert spec_dict is not None
    rows = spec_dict.get("data") or next(iter(spec_dict["datasets"].values()))
    rows = rows["values"] if isinstance(rows, dict) else rows
    assert 2 <= len(rows) <= charts.WIDTH
    full = rows[:-1]  # whole buckets hold two intervals of each kind
    assert all(abs(r["acceptance"] - 190 / 300) < 1e-9 for r in full), full[:3]


def test_over_time_keeps_each_interval_while_a_run_has_a_pixel_for_it():
    from datetime import datetime, timedelta

    import polars as pl

    from specscope.report import charts

    def drawn(n: int) -> list[dict[str, object]]:
        t0 = datetime(2026, 4, 7)
        rows = pl.DataFrame(
            {
                "ts": [t0 + timedelta(seconds=10 * i) for i in range(n)],
                "accepted_tokens": [i % 7 + 1 for i in range(n)],
                "draft_tokens": [10] * n,
                "running_reqs": [i % 3 for i in range(n)],
                "run_id": ["r-1"] * n,
            }
        )
        spec_dict = charts.over_time(rows, lambda s: s)
        assert spec_dict is not None
        return spec_dict["data"]["values"]

    whole = drawn(charts.WIDTH)
    assert [r["acceptance"] for r in whole] == [(i % 7 + 1) / 10 for i in range(charts.WIDTH)]
    assert [r["running_reqs"] for r in whole] == [i % 3 for i in range(charts.WIDTH)]
    assert len(drawn(charts.WIDTH + 1)) <= charts.WIDTH


def test_evidence_lines_point_at_each_findings_first_line(planted):
    report = build_report(planted)
    lines_of = {f["kind"]: f for f in report.findings}
    collapse = lines_of["concurrency_collapse"]
    assert collapse["evidence"], collapse
    assert "SpecDecoding metrics" in collapse["evidence"][0] or "Engine" in collapse["evidence"][0]


def test_the_vega_bundle_is_built_once_and_kept_whole(tmp_path, monkeypatch):
    import vl_convert

    from specscope.report.html import vega_bundle

    monkeypatch.setenv("SPECSCOPE_CACHE", str(tmp_path / "cache"))
    built = []
    real = vl_convert.javascript_bundle
    monkeypatch.setattr(vl_convert, "javascript_bundle", lambda: built.append(1) or real())
    first = vega_bundle()
    assert vega_bundle() == first and len(built) == 1 and "vegaEmbed" in first
    (cached,) = (tmp_path / "cache").iterdir()
    cached.write_text("truncated")  # not a bundle: built again, and kept
    assert vega_bundle() == first and len(built) == 2
    assert cached.read_text() == first
    monkeypatch.setenv("SPECSCOPE_CACHE", "/proc/no/such/dir")  # unwritable: built each time
    assert vega_bundle() == first and len(built) == 3


def _seeds_report(cli, tmp_path, name: str) -> Path:
    out = tmp_path / name
    seeds = [SEEDS / "003_83783f5568908b19.txt", SEEDS / "002_2dcac71f91935498.txt"]
    r = cli("triage", *seeds, "--out", out)
    assert r.status == 0, r.err
    return out


def test_markdown_renders_as_github_would(cli, tmp_path):
    """Rendered as GitHub renders a comment (CommonMark, tables, raw HTML allowed): the runs
    and the factors are tables, the sections are headings, and the only HTML is ours."""
    from markdown_it import MarkdownIt

    text = _seeds_report(cli, tmp_path, "triage.md").read_text(encoding="utf-8")
    page = MarkdownIt("commonmark", {"html": True}).enable("table").render(text)
    assert page.count("<table>") == 3  # runs, tau for every k′, what moves acceptance
    for heading in ("Runs", "Findings", "Charts", "What moves acceptance"):
        assert f"<h2>{heading}</h2>" in page
    raw = {m.lower() for m in re.findall(r"<(/?[a-zA-Z]+)", text)}
    assert raw <= {"details", "/details", "summary", "/summary", "sub", "/sub", "br"}
    assert "Confidence:" in page and "Not in the log:" in page
    # (seed 003's launch and seed 002's DFlash launch: the rate its author states after it
    # is a run of its own)
    assert "2 launches without spec-decode records" in page


def test_html_charts_draw_with_their_data_in_view(cli, tmp_path):
    """Every chart draws in a real Chromium, and acceptance over time fills its width: runs
    on different days are drawn each from its own start, not as slivers of six weeks."""
    chromium = shutil.which("chromium")
    if chromium is None:
        pytest.skip("needs Debian's chromium (.ci/run installs it)")
    out = _seeds_report(cli, tmp_path, "triage.html")
    page = out.read_text(encoding="utf-8")
    charts = page.count('class="chart"')
    assert charts >= 4 and page.count("<figcaption>") == charts
    specs = re.findall(r'<script type="application/json" id="spec-\d+">(.*?)</script>', page)
    over_time = next(json.loads(s) for s in specs if "over time" in s)
    layer = over_time["layer"][1]
    assert layer["encoding"]["x"]["field"] == "minutes"
    data = over_time.get("data") or next(iter(over_time["datasets"].values()))
    xs = sorted(row["minutes"] for row in (data["values"] if isinstance(data, dict) else data))
    gaps = [b - a for a, b in itertools.pairwise(xs)]
    assert max(gaps) < 0.5 * (xs[-1] - xs[0])  # no empty half of the chart
    dom = subprocess.run(
        [
            chromium,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--no-first-run",
            f"--user-data-dir={tmp_path / 'chrome'}",
            "--virtual-time-budget=15000",
            "--dump-dom",
            out.as_uri(),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    ).stdout
    assert dom.count('data-rendered="yes"') == charts
    assert dom.count("<svg") >= charts


def test_markdown_shows_a_curve_as_numbers_not_a_repr():
    """A measured curve (a k_too_large tail) reads as rounded values, as a scalar does."""
    from specscope.report.markdown import md

    assert md([0.006097560975609756, 0.0, None]) == "[0.006, 0.000, –]"
    assert md((1, 2.5)) == "[1, 2.500]"
    assert md(0.046494992846924176) == "0.046"


# -- over many runs (issue 23) ------------------------------------------------------------------


@pytest.fixture(scope="module")
def fleet(tmp_path_factory):
    """A synthetic fleet (``bench/fleet_store.py``): 42 servers of six setups for a day, a
    few sick each one way; about 120 runs, so the report groups them."""
    import sys

    from .helpers import ROOT

    sys.path.insert(0, str(ROOT / "bench"))
    from fleet_store import Fleet, write_fleet

    path = tmp_path_factory.mktemp("fleet") / "store"
    write_fleet(path, Fleet(servers=42, days=1, interval_s=60, sample=0.3, every_sickness=True))
    return specscope.open_store(path)


def test_a_report_over_many_runs_groups_them_and_counts_the_rest(fleet, tmp_path):
    from specscope.analysis.detectors import detect
    from specscope.report.setups import LIST_RUNS_UP_TO, MAX_FINDINGS

    report = build_report(fleet)
    found = detect(fleet)
    total_runs = fleet.runs.collect().height
    assert report.grouped and report.runs_total == total_runs > LIST_RUNS_UP_TO
    # Every run is in one setup, and the setups' sums are the runs' sums.
    assert sum(s["runs"] for s in report.setups) + report.setups_left.get("runs", 0) == total_runs
    drafts = sum(int(a["drafts"]) for a in fleet.run_sums.collect().to_dicts())
    assert sum(s["drafts"] for s in report.setups) + report.setups_left.get("drafts", 0) == drafts
    # The worst findings in full, the rest counted: nothing is lost.
    assert len(report.findings) <= MAX_FINDINGS
    assert len(report.findings) + sum(e["findings"] for e in report.findings_left) == len(found)
    assert report.findings[0]["kind"] == found[0].kind  # the worst comes first
    # Runs listed: those the findings shown name, and the outliers.
    named = {r for f in report.findings for r in f["run_id"].split(",")}
    assert {r["run_id"] for r in report.runs} >= named
    assert len(report.runs) + report.runs_left == total_runs
    # A server that accepts nothing is an outlier of its setup, and comes first.
    sick = {r["run_id"]: json.loads(r["config"])["sick"] for r in fleet.runs.collect().to_dicts()}
    assert report.outliers and sick[report.outliers[0]["run_id"]] in ("zero", "low")
    assert all(o["interval"][1] < o["setup_rest_rate"] for o in report.outliers)
    text = render_markdown(report, tmp_path / "fleet.md")
    assert len(text) <= GITHUB_COMMENT_LIMIT
    assert "## Setups" in text and "--per-run" in text and "more finding" in text
    # One line per setup in the charts, not one per run.
    per_position = next(s for n, _, s in report.charts if n == "per_position")
    data = per_position.get("data") or next(iter(per_position["datasets"].values()))
    values = data["values"] if isinstance(data, dict) else data
    assert len({v["run"] for v in values}) == len(report.per_position) <= 8


def test_per_run_lists_every_run(fleet):
    report = build_report(fleet, per_run=True, with_charts=False)
    assert not report.grouped and not report.setups
    assert len(report.runs) == fleet.runs.collect().height
    assert "setups" not in report.to_dict()


def test_the_grouped_html_report_draws_in_chromium(fleet, tmp_path, cli):
    chromium = shutil.which("chromium")
    if chromium is None:
        pytest.skip("needs Debian's chromium (.ci/run installs it)")
    out = tmp_path / "fleet.html"
    r = cli("report", "--store", fleet.path, "--out", out)
    assert r.status == 0, r.err
    page = out.read_text()
    assert "<h2>Setups</h2>" in page and "Outliers" in page
    charts = page.count('class="chart"')
    assert charts >= 4
    dom = subprocess.run(
        [
            chromium,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--no-first-run",
            f"--user-data-dir={tmp_path / 'chrome'}",
            "--virtual-time-budget=15000",
            "--dump-dom",
            out.as_uri(),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    ).stdout
    assert dom.count('data-rendered="yes"') == charts
    assert dom.count("<svg") >= charts
    full = cli("report", "--store", fleet.path, "--out", tmp_path / "all.md", "--per-run")
    assert full.status == 0, full.err
    assert "## Setups" not in (tmp_path / "all.md").read_text()
