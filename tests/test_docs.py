"""Every command is documented in README.md and has --help with an example."""

from __future__ import annotations

import pytest

from specscope.cli.app import app

from .helpers import ROOT

README = (ROOT / "README.md").read_text(encoding="utf-8")
COMMANDS = sorted(c.name or c.callback.__name__ for c in app.registered_commands)


def test_there_are_commands():
    assert {"ingest", "runs", "formats"} <= set(COMMANDS)


@pytest.mark.parametrize("command", COMMANDS)
def test_command_is_in_readme(command):
    assert f"### `specscope {command}`" in README


@pytest.mark.parametrize("command", COMMANDS)
def test_command_help_has_an_example(cli, command):
    r = cli(command, "--help")
    assert r.status == 0
    assert "Example" in r.out
    assert f"specscope {command}" in r.out


def test_readme_opens_with_install_and_test_commands(cli, tmp_path):
    """README's first command is the one-step triage on a fixture that ships, and it works
    as printed (from the repository's root, writing its report)."""
    first = [line.strip() for line in README.splitlines()[1:6] if line.strip()]
    assert first[0].startswith("pip install . && specscope triage fixtures/")
    command = first[0].split(" && ", 1)[1].split()
    assert command[:2] == ["specscope", "triage"] and (ROOT / command[2]).is_file()
    assert "pytest" in first[1]
    args = [str(ROOT / a) if a.startswith("fixtures/") else a for a in command[2:]]
    r = cli("triage", *args)
    assert r.status == 0 and "zero_acceptance" in r.out
    out = tmp_path / command[command.index("--out") + 1]
    assert out.is_file() and "## Findings" in out.read_text(encoding="utf-8")
    assert not (tmp_path / "specscope-data").exists()  # a throw-away store


def test_public_api_is_documented():
    import specscope

    functions = [n for n in specscope.__all__ if n[0].islower()]
    assert {"ingest", "pull", "detect", "advise", "compare", "build_report"} <= set(functions)
    for name in functions:
        assert callable(getattr(specscope, name)), name
        if name not in ("parse_lines", "runs_overview"):  # the lower-level two
            assert f"specscope.{name}" in README, name
    for name in specscope.__all__:
        assert getattr(specscope, name) is not None, name


def test_importing_the_library_does_not_import_the_cli_or_altair():
    import subprocess
    import sys

    code = (
        "import sys, specscope; "
        "print(sorted(m for m in ('altair', 'typer', 'specscope.cli.app') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_every_exit_status_is_in_readme():
    from specscope.errors import ExitStatus

    for status in ExitStatus:
        assert f"| {status.value} |" in README


@pytest.mark.parametrize("command", COMMANDS)
def test_help_placeholders_are_words_and_examples_verbatim(cli, command):
    """No type where a word belongs (``<list[str]>``, ``<path>``, ``{paths}``), and each
    example on one line as written, so that a line copied from --help runs as it is."""
    import re

    from specscope.cli.app import app as the_app

    out = cli(command, "--help", env={"COLUMNS": "80"}).out
    assert re.search(r"<(?:list|path|str|int|float|bool)\b|\{[a-z_]+\}", out) is None, out
    registered = {c.name or c.callback.__name__: c for c in the_app.registered_commands}
    epilog = registered[command].epilog or ""
    examples = [line.strip() for line in epilog.splitlines()[1:] if line.strip()]
    shown = [line.strip() for line in out.splitlines()]
    assert examples and all(example in shown for example in examples), (examples, out)


def test_version(cli):
    import specscope

    r = cli("--version")
    assert r.status == 0 and r.out.strip() == f"specscope {specscope.__version__}"


def test_help_loads_no_data_library():
    """``specscope --help`` answers without importing polars, pyarrow, numpy or Altair
    (they cost most of a second; the help, a fifth)."""
    import subprocess
    import sys

    probe = (
        "import sys\n"
        "from specscope.cli import main\n"
        "assert main(['--help']) == 0 and main(['ingest', '--help']) == 0\n"
        "print(sorted(m for m in ('polars', 'pyarrow', 'numpy', 'altair') if m in sys.modules))"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, cwd=ROOT, check=True
    )
    assert done.stdout.strip().splitlines()[-1] == "[]", done.stdout
