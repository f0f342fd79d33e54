from __future__ import annotations

from dataclasses import dataclass

import pytest

from specscope.cli.app import main


@dataclass
class Result:
    status: int
    out: str
    err: str


@pytest.fixture(autouse=True, scope="session")
def _cache(tmp_path_factory):
    """Reports keep the Vega bundle in a cache: the tests' own, not the user's."""
    import os

    os.environ["SPECSCOPE_CACHE"] = str(tmp_path_factory.mktemp("cache"))


@pytest.fixture
def cli(capsys, monkeypatch, tmp_path):
    """Run the CLI in-process with a clean environment; returns (status, stdout, stderr)."""
    monkeypatch.delenv("SPECSCOPE_STORE", raising=False)
    monkeypatch.chdir(tmp_path)

    def run(*args: str, env: dict[str, str] | None = None) -> Result:
        for key, value in (env or {}).items():
            monkeypatch.setenv(key, value)
        capsys.readouterr()
        status = main([str(a) for a in args])
        captured = capsys.readouterr()
        return Result(status, captured.out, captured.err)

    return run
