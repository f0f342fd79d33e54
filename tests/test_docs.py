"""Every command is documented in README.md and has --help with an example."""

from __future__ import annotations

import pytest

from specscope import __all__ as public
from specscope.cli import app

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


def test_readme_opens_with_install_and_test_commands():
    first = [line.strip() for line in README.splitlines()[1:6] if line.strip()]
    assert first[0].startswith("pip install . && specscope ingest fixtures/")
    assert (ROOT / first[0].split()[-1]).is_file()
    assert "pytest" in first[1]


def test_public_api_is_documented():
    for name in ("ingest", "open_store", "weighted_acceptance", "parse_text"):
        assert name in public
        assert f"specscope.{name}" in README


def test_every_exit_status_is_in_readme():
    from specscope.errors import ExitStatus

    for status in ExitStatus:
        assert f"| {status.value} |" in README
