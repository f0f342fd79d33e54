"""Safe to paste anywhere (issue 20): planted secrets reach no output, text from a log never
becomes live Markdown at any report size, and evidence is quoted only from the very file
that was ingested.

Every planted value is FAKE and carries a marker: ``FAKE00nn`` for secrets (hidden in every
output), ``hostqnn`` for hosts and ``settqnn`` for settings not on the allow-list (both
hidden in reports)."""

from __future__ import annotations

import json
import re
import tomllib
from pathlib import Path

import pytest

import specscope
from specscope.report import build
from specscope.report.build import LOG_CHANGED, Report, build_report
from specscope.report.markdown import GITHUB_COMMENT_LIMIT, md, render_markdown
from specscope.report.redact import ALLOWED_ARGS, Redactor, redact_json, strip_controls

from .helpers import ROOT
from .loglines import spec, stamp, start, stats

SECRETS = {
    "aws key id": "AKIAZ7FAKE0001EXAMPL",
    "aws session key id": "ASIAZ7FAKE0002EXAMPL",
    "aws secret key": "wJalrXUtnFEMI/K7MDENG/bPxRfiCYFAKE0003Ky",
    "github token": "ghp_FAKE0004aBcDeFgHiJkLmNoPqRsTuVwXyZ01",
    "github fine-grained token": "github_pat_11FAKE0005_aBcDeFgHiJkLmNoPqRsTuV",
    "gitlab token": "glpat-FAKE0006xYzAbCdEfGhI",
    "slack bot token": "xoxb-123456789012-1234567890123-FAKE0007AbCdEfGh",
    "slack user token": "xoxp-123456789012-FAKE0008-AbCdEfGhIjKl",
    "google api key": "AIzaSyFAKE0009aBcDeFgHiJkLmNoPqRsTuVwX",
    "openai key": "sk-proj-FAKE0010aBcDeFgHiJkLmNoPqRsT",
    "anthropic key": "sk-ant-api03-FAKE0011aBcDeFgHiJkLmN",
    "hugging face token": "hf_FAKE0012aBcDeFgHiJkLmNoPqRsTuVwXy",
    "jwt": "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiJGQUtFMDAxMyJ9.FAKE0013sIgNaTuRe",
    "bearer token": "FAKE0014opaqueBearerValue",
    "basic auth": "RkFLRTAwMTU6ZmFrZXBhc3N3b3Jk",  # FAKE0015:fakepassword
    "private key": "MIIEpAIBAAKCAQEAFAKE0016pRiVaTeKeYbOdYaBcDeFgHiJkLmNoPqRsTuVwXyZ",
    "first api_key of a list": "FAKE0017-first-api-key",
    "second api_key of a list": "FAKE0018-second-api-key",
    "db password": "FAKE0019-correct-horse",
    "service token": "FAKE0020-service-token",
    "client secret": "FAKE0021-client-secret",
    "password in a model url": "FAKE0022urlpass",
    "token in a query": "FAKE0023querytoken",
    "api key on a command line": "FAKE0024-cli-api-key",
    "e-mail address": "jane.fake0025@example-corp.com",
    "home folder": "/home/zqfake0026",
    "api_key list in json": "FAKE0027-json-key",
    "second of the json list": "FAKE0028-json-key",
    "password in a draft run's model url": "FAKE0029draftpw",
}
HOSTS = {
    "internal hostname": "gpu-hostq01.corp.internal",
    "bare hostname": "hostq02",
    "ip address": "10.27.28.29",
    "host in a url": "api.hostq03.example.com",
}
SETTINGS = {
    "lora module": "settq01-lora",
    "root path": "/srv/settq02",
    "library path": "/opt/settq03/lib",
    "ssl certificate": "/etc/settq04.pem",
}
SECRET_MARK = re.compile(r"(?i)fake00\d\d|zqfake")
REPORT_MARK = re.compile(r"(?i)fake00\d\d|zqfake|hostq\d\d|settq\d\d|10\.27\.28\.29")
BASIC_DECODED = "FAKE0015"  # what the basic-auth value says, base64-decoded


def _planted_log() -> str:
    """A draft-model run at zero acceptance (its explanation names both models, one a URL
    with a password), then an MTP run whose startup args, environment, command line and log
    messages hold every planted value."""
    s, h, t = SECRETS, HOSTS, SETTINGS
    draft_pw = s["password in a draft run's model url"]
    lines = [
        f"{stamp(0, 22)} [utils.py:233] non-default args: {{'model': 'https://ci:{draft_pw}@"
        f"{h['host in a url']}/Llama-3.1-8B', 'speculative_config': {{'method': 'draft_model', "
        "'model': 'Qwen/Qwen2.5-0.5B', 'num_speculative_tokens': 4}}"
    ]
    lines += [x for i in range(1, 12) for x in (stats(i, pid=22), spec(i, 100, [0] * 4, pid=22))]
    lines.append(
        start(
            21,
            f"https://deploy:{s['password in a model url']}@models.{h['internal hostname']}/qwen",
            "mtp",
            3,
            api_key=[s["first api_key of a list"], s["second api_key of a list"]],
            host=h["internal hostname"],
            client_secret=s["client secret"],
            lora_modules=[f"{t['lora module']}={s['home folder']}/loras/a"],
            root_path=t["root path"],
        )
    )
    lines += [stats(20, pid=21), spec(20, 100, [0, 0, 0], pid=21)]
    lines += [
        f"AWS_ACCESS_KEY_ID={s['aws key id']}",
        f"AWS_SECRET_ACCESS_KEY={s['aws secret key']}",
        f"export DB_PASSWORD={s['db password']}",
        f"MY_SERVICE_TOKEN={s['service token']}",
        f"HF_TOKEN={s['hugging face token']}",
        f"LD_LIBRARY_PATH={t['library path']}",
        f"HOSTNAME={h['bare hostname']}",
        f"CUDA_VISIBLE_DEVICES=0,1 vllm serve {s['home folder']}/models/Qwen3-8B "
        f"--api-key {s['api key on a command line']} --host {h['bare hostname']} --port 8000 "
        f"--ssl-certfile {t['ssl certificate']} --served-model-name qwen",
        f"{stamp(20, 21)} [api.py:10] POST https://{h['host in a url']}/v1?token="
        f"{s['token in a query']}&stream=1 from {h['ip address']} for {s['e-mail address']}",
        f"{stamp(20, 21)} [auth.py:20] Authorization: Bearer {s['bearer token']}",
        f"{stamp(20, 21)} [auth.py:21] proxy sent Authorization: Basic {s['basic auth']}",
        f"{stamp(20, 21)} [hub.py:30] tokens {s['github token']} "
        f"{s['github fine-grained token']} {s['gitlab token']} {s['slack bot token']} "
        f"{s['slack user token']}",
        f"{stamp(20, 21)} [keys.py:40] keys {s['google api key']}, {s['openai key']}, "
        f"{s['anthropic key']}, session {s['jwt']}",
        f"{stamp(20, 21)} [aws.py:50] aws {s['aws session key id']} with {s['aws secret key']}",
        "-----BEGIN RSA PRIVATE KEY-----",
        s["private key"],
        "-----END RSA PRIVATE KEY-----",
        f'{{"api_key": ["{s["api_key list in json"]}", "{s["second of the json list"]}"], '
        f'"client_secret": "{s["client secret"]}"}}',
        f"{stamp(20, 21)} [node.py:60] running on {h['internal hostname']} ({h['ip address']})",
    ]
    lines += [x for i in range(21, 32) for x in (stats(i, pid=21), spec(i, 100, [0] * 3, pid=21))]
    return "\n".join(lines) + "\n"


def _leaks(text: str, mark: re.Pattern[str]) -> list[str]:
    found = sorted(set(mark.findall(text)))
    if BASIC_DECODED in text:
        found.append(BASIC_DECODED)
    return found


@pytest.fixture
def planted(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The planted log, and every line from each finding's first to the end quoted as its
    evidence (so that every planted line is put to the redactor, not only three)."""
    monkeypatch.setattr(build, "EVIDENCE_LINES", 10_000)
    log = tmp_path / "server.log"
    log.write_text(_planted_log(), encoding="utf-8")
    return log


def test_the_corpus_is_what_it_says() -> None:
    """At least 20 secrets, each planted in the log, each with its marker."""
    text = _planted_log()
    assert len(SECRETS) >= 20
    for value in [*SECRETS.values(), *HOSTS.values(), *SETTINGS.values()]:
        assert value in text, value
    for name, value in SECRETS.items():
        assert SECRET_MARK.search(value) or name == "basic auth", name


@pytest.mark.parametrize("name", sorted(SECRETS))
def test_each_secret_is_hidden_by_the_secret_rules_alone(name: str) -> None:
    """Secrets fall to their shapes and names, not to the allow-list or the host rules:
    the lines that hold each are redacted with only those rules on."""
    red = Redactor(hosts=False, args=False)
    text = red.text(_planted_log())
    assert SECRETS[name] not in text
    assert _leaks(text, SECRET_MARK) == []


def test_hosts_and_unlisted_settings_fall_to_the_report_policy() -> None:
    text = _planted_log()
    secrets_only = Redactor(hosts=False, args=False).text(text)
    assert all(h in secrets_only for h in ("hostq02", "10.27.28.29"))
    assert SETTINGS["lora module"] in secrets_only
    report = Redactor().text(text)  # what a report uses by default
    assert _leaks(report, REPORT_MARK) == []
    kept = Redactor(hosts=False).text(text)  # --no-redact-hosts
    assert "10.27.28.29" in kept and _leaks(kept, SECRET_MARK) == []


@pytest.fixture
def ingested(cli, planted: Path, tmp_path: Path) -> Path:
    store = tmp_path / "store"
    r = cli("ingest", planted, "--store", store, "--year", "2026")
    assert r.status == 0, r.err
    return store


# (command, what must not appear): reports hide hosts and settings too; what a command
# prints for the user's own terminal hides secrets.
REPORTS = {
    "report --out x.md": ("report", "--out", "x.md", "--redact-hosts"),
    "report --out x.html": ("report", "--out", "x.html", "--redact-hosts"),
    "report --json": ("report", "--json", "--redact-hosts"),
    "triage --out t.md": ("triage", "server.log", "--out", "t.md"),
    "triage --out t.html": ("triage", "server.log", "--out", "t.html"),
}
# Until the CLI applies ``redact_json`` (and ``safe`` to triage's verdict, and the hosts
# default to ``report``), these print what they are given: remove the marker with that
# wiring (they then pass; strict, so they fail as a reminder).
TERMINAL = {
    "ingest": (("ingest", "server.log", "--store", "s2"), ()),
    "runs": (("runs",), ()),
    "detect": (("detect",), ()),
    "triage": (("triage", "server.log"), ()),
    "ingest --json": (("ingest", "server.log", "--store", "s3", "--json"), ()),
    "runs --json": (("runs", "--json"), ()),
    "detect --json": (("detect", "--json"), ()),
    "triage --json": (("triage", "server.log", "--json"), ()),
}


@pytest.mark.parametrize("kind", sorted(REPORTS))
def test_no_planted_secret_host_or_setting_reaches_a_report(cli, ingested, tmp_path, kind):
    args = list(REPORTS[kind])
    if args[0] == "report":
        args += ["--store", str(ingested)]
    r = cli(*args)
    assert r.status == 0, r.err
    out = next((a for a in args if a.endswith((".md", ".html"))), None)
    text = (tmp_path / out).read_text(encoding="utf-8") if out else r.out
    assert _leaks(text, REPORT_MARK) == []  # (triage's own stdout: the terminal test)
    assert "Redacted" in text and "\x1b" not in text
    if out is None:
        data = json.loads(r.out)
        findings = {f["run_id"]: f for f in data["findings"]}
        quoted = "\n".join(line for f in findings.values() for line in f["evidence"])
        # what a reader needs is still there: the config that sets speculation up
        assert "'speculative_config': {'method': 'mtp', 'num_speculative_tokens': 3}" in quoted
        assert "AWS_ACCESS_KEY_ID=AKIA***" in quoted and "CUDA_VISIBLE_DEVICES=0,1" in quoted


@pytest.mark.parametrize(
    "kind",
    [pytest.param(k, marks=marks) for k, (_, marks) in sorted(TERMINAL.items())],
)
def test_no_planted_secret_reaches_a_terminal(cli, ingested, tmp_path, kind):
    args, _ = TERMINAL[kind]
    args = [*args, "--store", str(ingested)] if args[0] in ("runs", "detect") else list(args)
    r = cli(*args)
    assert r.status in (0, 11), r.err
    assert _leaks(r.out + r.err, SECRET_MARK) == []
    if "--json" in args:
        json.loads(r.out)


@pytest.mark.parametrize("as_json", [False, True])
def test_compare_advise_and_errors_print_no_planted_secret(cli, ingested, tmp_path, as_json):
    """The commands that print what a run holds (its config, its model names) and the error
    lines that quote what the user gave go through the same policy."""
    flag = ["--json"] if as_json else []
    run_ids = [r["run_id"] for r in json.loads(cli("runs", "--store", ingested, "--json").out)]
    assert len(run_ids) >= 2
    printed = []
    for args in (
        ["compare", run_ids[0], run_ids[-1], "--store", str(ingested), *flag],
        ["advise", "--store", str(ingested), *flag],
    ):
        r = cli(*args)
        assert r.status == 0, r.err
        printed.append(r.out + r.err)
        if as_json:
            json.loads(r.out)
    missing = tmp_path / SECRETS["hugging face token"] / "server.log"
    r = cli("ingest", missing, "--store", tmp_path / "s9", *flag)
    assert r.status != 0 and "error" in r.err and r.err.count("\n") == 1
    printed.append(r.out + r.err)
    for text in printed:
        assert _leaks(text, SECRET_MARK) == [] and "\x1b" not in text


def test_nothing_in_the_cli_prints_but_its_output_module():
    """``cli/output.py`` is the choke point: no other CLI module calls a printing function
    itself (a renderer that forgot the policy could not reach the terminal)."""
    import ast

    import specscope.cli

    printers = {"echo", "secho", "print", "write", "writelines"}
    folder = Path(specscope.cli.__file__).parent
    offenders = []
    for path in sorted(folder.glob("*.py")):
        if path.name == "output.py":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.Call):
                continue
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
            owner = ast.unparse(func.value) if isinstance(func, ast.Attribute) else ""
            # rich's live console prints only what the safe renderers made
            if name in printers and owner not in ("live.console",):
                offenders.append(f"{path.name}:{node.lineno} {ast.unparse(func)}")
    assert offenders == []


def test_report_hides_hosts_by_default(cli, ingested, tmp_path):
    r = cli("report", "--store", ingested, "--out", "x.md")
    assert r.status == 0, r.err
    assert _leaks((tmp_path / "x.md").read_text(encoding="utf-8"), REPORT_MARK) == []


def test_the_library_report_hides_hosts_by_default(planted, tmp_path):
    store = tmp_path / "lib"
    specscope.ingest(planted, store=store, year=2026).raise_for_errors()
    report = build_report(specscope.open_store(store), with_charts=False)
    text = render_markdown(report, tmp_path / "r.md", images=False)
    assert _leaks(text + json.dumps(report.to_dict()), REPORT_MARK) == []
    assert "Host names and IP addresses were kept" not in text
    kept = build_report(
        specscope.open_store(store), with_charts=False, redactor=Redactor(hosts=False)
    )
    assert "hostq" in json.dumps(kept.to_dict())
    assert "--no-redact-hosts" in kept.redaction


def test_redaction_is_idempotent_and_counts_once():
    red = Redactor()
    once = red.text(_planted_log())
    counts = dict(red.counts)
    assert red.text(once) == once and dict(red.counts) == counts
    assert counts["setting"] >= 4 and counts["host"] >= 4 and counts["private key"] == 1


def test_the_allow_list_keeps_every_config_value_specscope_reads():
    """Each startup-args sample in parsers/ keeps, redacted for a report, every value it
    gives the run (model, draft model, k, TP, ...), and every name parsers read is listed."""
    checked = 0
    for path in sorted((ROOT / "parsers").glob("*.toml")):
        definition = tomllib.loads(path.read_text(encoding="utf-8"))
        if definition.get("kind") != "config":
            continue
        for key in definition.get("keys", {}):
            assert key in ALLOWED_ARGS, f"{path.name}: {key}"
        for sample in definition.get("samples", []):
            shown = Redactor().text(sample["text"])
            for value in sample.get("run", {}).values():
                if isinstance(value, str) and value in sample["text"]:
                    assert value in shown, (path.name, value, shown)
                    checked += 1
    assert checked >= 10


def test_arg_lists_dicts_and_env_are_judged_name_by_name():
    line = (
        "(APIServer pid=1) INFO 05-30 07:40:19 [utils.py:278] non-default args: {'model_tag': "
        "'org/Model', 'host': '0.0.0.0', 'api_key': ['k-one', 'k-two', 'k-three'], "
        "'lora_modules': [LoRAModulePath(name='acme', path='/l')], 'max_num_seqs': 8, "
        "'speculative_config': {'method': 'eagle3', 'model': 'org/Draft', "
        "'num_speculative_tokens': 3, 'extra': 'x'}}"
    )
    red = Redactor()
    shown = red.text(line)
    assert "'api_key': ['***', '***', '***']" in shown  # every element of a list
    assert "'lora_modules': [***]" in shown and "'host': '***'" in shown
    assert "'speculative_config': {'method': 'eagle3', 'model': 'org/Draft', " in shown
    assert "'extra': '***'" in shown and "'max_num_seqs': 8" in shown
    assert "pid=1" in shown
    env = red.text("export HF_HOME=/data/x OMP_NUM_THREADS=8 VLLM_USE_V1=1 PGPASSWORD=pw")
    assert env == "export HF_HOME=*** OMP_NUM_THREADS=8 VLLM_USE_V1=1 PGPASSWORD=***"
    # SGLang's counts named like tokens are counts
    sglang = "Decode batch. #running-req: 1, #token: 515, token usage: 0.00, #new-token: 6"
    assert red.text(sglang) == sglang


def test_redact_json_hides_secret_keys_and_strings_everywhere():
    data = {
        "model": "https://u:FAKE0099@h.example.com/m",
        "runs": [{"api_key": "plain", "tokens": 5, "password": 1234, "label": "\x1b[31mred"}],
        "api_key": ["a", "b"],
        "note": "/home/zqfake0026/x and jane.fake0025@example-corp.com",
    }
    out = redact_json(data)
    assert out["runs"][0] == {"api_key": "***", "tokens": 5, "password": "***", "label": "red"}
    assert out["api_key"] == ["***", "***"]
    assert _leaks(json.dumps(out), SECRET_MARK) == []
    assert "h.example.com" in out["model"]  # hosts are the report's business


def test_every_renderer_is_safe():
    from specscope.cli import render

    for name in render.__all__:
        if name != "safe":
            assert getattr(getattr(render, name), "safe_output", False), name
    assert render.safe("x\x1b]8;;http://evil/\x07y hf_FAKE0012aBcDeFgHiJkL") == "xy hf_***"


def test_terminal_escapes_in_a_repr_arg_reach_no_terminal(cli, tmp_path):
    """A Python repr in the args holds ``\\x1b`` as text; the parser makes it an escape."""
    osc = "Qwen\x1b]8;;http://evil.example/\x07-8B\x1b[2J\x9b31m"
    log = tmp_path / "osc.log"
    lines = [
        start(5, "m", "mtp", 2, served_model_name=osc).replace(
            "'model': 'm'", "'model': " + repr(osc)
        )
    ]
    lines += [x for i in range(1, 4) for x in (stats(i, pid=5), spec(i, 100, [50, 20], pid=5))]
    log.write_text("\n".join(lines) + "\n", encoding="utf-8")
    assert "\x1b" not in log.read_text(encoding="utf-8")
    for args in (
        ("ingest", log, "--store", "s"),
        ("runs", "--store", "s"),
        ("detect", "--store", "s"),
    ):
        r = cli(*args)
        assert r.status == 0, r.err
        assert not re.search(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]", r.out + r.err), args
    assert "Qwen-8B" in cli("runs", "--store", "s").out


# -- Markdown that stays text -------------------------------------------------------------------

HOSTILE = (
    "@someone #1234 GH-77 owner/repo#12 <img src=x onerror=alert(1)> </details> ``` "
    "[link](http://evil.example/x) www.evil.example https://evil.example/y **bold** <!-- c --> "
    "\x1b]8;;http://evil.example/\x07click\x1b]8;;\x07 \x1b[2J"
)


def _hostile_log(runs: int, pad: int = 0) -> str:
    lines = []
    for n in range(runs):
        pid, t0 = 100 + n, 40 * n
        first = start(pid, f"org/m{n} {HOSTILE}", "mtp", 2, served_model_name=[HOSTILE])
        lines.append(first.replace(stamp(0, pid), stamp(t0, pid)))
        lines += [stats(t0 + 1, pid=pid), spec(t0 + 1, 100, [0, 0], pid=pid)]
        lines.append(f"{stamp(t0 + 1, pid)} [x.py:1] {HOSTILE} {'x' * pad}")
        for i in range(t0 + 2, t0 + 6):
            lines += [stats(i, pid=pid), spec(i, 100, [0, 0], pid=pid)]
    return "\n".join(lines) + "\n"


def _live_markup(text: str) -> list[str]:
    """What GitHub would make of ``text`` beyond text: tags not ours, images not ours, links,
    pings, references, unbalanced blocks, terminal controls. Empty: nothing."""
    from markdown_it import MarkdownIt

    parser = MarkdownIt("commonmark", {"html": True}).enable("table")
    tokens = parser.parse(text)
    page = parser.render(text)
    fences = [t for t in tokens if t.type == "fence"]
    html = [t.content for t in tokens if t.type == "html_block"]
    html += [c.content for t in tokens if t.children for c in t.children if c.type == "html_inline"]
    problems = []
    for chunk in html:
        for tag in re.findall(r"<(/?[a-zA-Z]+)", chunk):
            if tag.lower() not in {
                "details",
                "/details",
                "summary",
                "/summary",
                "sub",
                "/sub",
                "br",
            }:
                problems.append(f"raw tag {tag}")
    for src in re.findall(r"<img src=\"([^\"]*)\"", page):
        if "_files/" not in src or ":" in src:
            problems.append(f"image {src}")
    if "<a " in page:
        problems.append("a link")
    opened = sum(chunk.count("<details>") for chunk in html)
    if opened != sum(chunk.count("</details>") for chunk in html) or opened != text.count(
        "<details><summary>"
    ):
        problems.append("unbalanced <details>")
    if text.count("<summary>Evidence</summary>") != len(fences):
        problems.append("an evidence block without its one fence")
    if any("Generated by specscope" in f.content for f in fences):
        problems.append("a fence left open")
    if "Generated by specscope" not in page.rsplit("</pre>", 1)[-1]:
        problems.append("the footer is not text")
    for pattern, what in (
        (r"@[A-Za-z0-9]", "a mention"),
        (r"#\d", "an issue reference"),
        (r"(?i)\bGH-\d", "a GH- reference"),
        (r"(?i)\b(?:https?|ftp)://|\bwww\.", "an autolink"),
        (r"[\x00-\x08\x0b-\x1f\x7f-\x9f]", "a control character"),
    ):
        if re.search(pattern, text):
            problems.append(what)
    return problems


@pytest.mark.parametrize(
    ("runs", "pad", "limit"),
    [(2, 0, GITHUB_COMMENT_LIMIT), (60, 500, GITHUB_COMMENT_LIMIT), (60, 500, 6000)],
    ids=["small", "past-65536", "cut-between-blocks"],
)
def test_hostile_text_is_never_live_markdown(tmp_path, monkeypatch, runs, pad, limit):
    import specscope.report.markdown as markdown

    log = tmp_path / "hostile.log"
    log.write_text(_hostile_log(runs, pad), encoding="utf-8")
    store = tmp_path / "s"
    specscope.ingest(log, store=store, year=2026, label=HOSTILE).raise_for_errors()
    # Every run listed (over 20 runs a report groups them by setup unless asked): the long
    # form, that has to be cut to fit.
    report = build_report(specscope.open_store(store), with_charts=False, per_run=True)
    grouped = build_report(specscope.open_store(store), with_charts=False)
    assert _live_markup(render_markdown(grouped, tmp_path / "g.md", images=False)) == []
    monkeypatch.setattr(markdown, "GITHUB_COMMENT_LIMIT", 10**9)
    full = render_markdown(report, tmp_path / "r.md", images=False)
    monkeypatch.setattr(markdown, "GITHUB_COMMENT_LIMIT", limit)
    text = render_markdown(report, tmp_path / "r.md", images=False)
    assert len(text) <= limit
    assert _live_markup(text) == []
    assert "@\u200dsomeone" in text and "#\u200d1234" in text  # still readable as text
    if runs > 2:
        assert len(full) > GITHUB_COMMENT_LIMIT  # the report was long before it was fitted
        assert "left out to fit one GitHub comment" in text
    if limit < GITHUB_COMMENT_LIMIT:
        assert "the rest is left out" in text


def test_html_holds_no_terminal_control(tmp_path):
    from specscope.report.html import render_html

    log = tmp_path / "hostile.log"
    log.write_text(_hostile_log(2), encoding="utf-8")
    specscope.ingest(log, store=tmp_path / "s", year=2026, label=HOSTILE).raise_for_errors()
    page = render_html(build_report(specscope.open_store(tmp_path / "s")))
    body = re.sub(r"<script[^>]*>.*?</script>", "", page, flags=re.S)  # data, not markup
    assert not re.search(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]", body)
    assert "<img" not in body and "&lt;img src=x" in body


def test_shortening_drops_whole_evidence_blocks_longest_first(tmp_path, monkeypatch):
    import specscope.report.markdown as markdown

    def finding(n: int, width: int) -> dict[str, object]:
        return {
            "severity": "warning",
            "kind": "low_acceptance",
            "run_id": f"r-{n}",
            "source": "a.log",
            "lines": [n, n],
            "explanation": f"finding {n}",
            "next_step": "look",
            "measured": {},
            "expected": {},
            "sample": {},
            "evidence": [f"line of finding {n} " + "y" * width, "</details>", "```"],
        }

    report = Report("v", [], [finding(1, 3000), finding(2, 9000), finding(3, 1000)], [], [], [])
    whole = render_markdown(report, tmp_path / "r.md", images=False)
    monkeypatch.setattr(markdown, "GITHUB_COMMENT_LIMIT", len(whole) - 100)
    text = render_markdown(report, tmp_path / "r.md", images=False)
    assert "line of finding 2" not in text  # the longest went, whole
    assert "line of finding 1" in text and "line of finding 3" in text
    assert text.count("evidence left out") == 1 and _live_markup(text) == []


def test_md_neutralises_mentions_references_links_and_controls():
    shown = md("@octocat #12 GH-3 www.x.org https://x.org \x1b[31mred\x1b[0m\x07")
    assert shown == ("@\u200doctocat #\u200d12 GH-\u200d3 www.\u200dx.org https:\u200d//x.org red")
    assert md("# not a heading") == "\\# not a heading" and md("1. not a list") == "1\\. not a list"
    assert strip_controls("a\x1b]0;title\x07b\rc\u202ed") == "abcd"


# -- evidence from the ingested file only -------------------------------------------------------


def _quoted(store: Path) -> list[list[str]]:
    return [
        f["evidence"] for f in build_report(specscope.open_store(store), with_charts=False).findings
    ]


@pytest.mark.parametrize("change", ["rewritten", "grown", "gone", "symlink to /etc/passwd"])
def test_a_changed_log_is_not_quoted(tmp_path, change):
    log = tmp_path / "server.log"
    text = _hostile_log(1).replace(HOSTILE, "plain")
    log.write_text(text, encoding="utf-8")
    store = tmp_path / "s"
    specscope.ingest(log, store=store, year=2026).raise_for_errors()
    assert _quoted(store)[0][0].startswith("(APIServer pid=100)")
    if change == "rewritten":  # same size, other text
        log.write_text(text.replace("INFO", "SECR"), encoding="utf-8")
    elif change == "grown":
        log.write_text(text + "appended SECR line\n", encoding="utf-8")
    elif change == "gone":
        log.unlink()
    else:
        log.unlink()
        log.symlink_to("/etc/passwd")
    evidence = _quoted(store)
    assert evidence and all(e == [f"({LOG_CHANGED}: nothing quoted)"] for e in evidence)
    page = render_markdown(
        build_report(specscope.open_store(store), with_charts=False),
        tmp_path / "r.md",
        images=False,
    )
    assert LOG_CHANGED in page and "SECR" not in page and "root:" not in page


def test_a_store_pointing_at_etc_passwd_quotes_nothing(tmp_path):
    import polars as pl

    log = tmp_path / "server.log"
    log.write_text(_hostile_log(1).replace(HOSTILE, "plain"), encoding="utf-8")
    store = specscope.ingest(log, store=tmp_path / "s", year=2026)
    store.raise_for_errors()
    real = specscope.open_store(tmp_path / "s")

    class PointsAtPasswd:
        """The store, but its sources say /etc/passwd (a store handed over by someone)."""

        def __getattr__(self, name: str) -> object:
            return getattr(real, name)

        @property
        def sources(self) -> pl.LazyFrame:
            return real.sources.with_columns(pl.lit("/etc/passwd").alias("path"))

    report = build_report(PointsAtPasswd(), with_charts=False)  # type: ignore[arg-type]
    assert report.findings
    for f in report.findings:
        assert f["evidence"] == [f"({LOG_CHANGED}: nothing quoted)"]
    assert "root:" not in json.dumps(report.to_dict())
