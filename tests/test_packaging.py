"""What a package index and a type checker read: the license the metadata names is the
one in the tree, the package says it is typed, and every third-party module the package
imports is one it declares (else `pip install specscope` works only by luck)."""

from __future__ import annotations

import ast
import sys
import tomllib

from .helpers import ROOT

PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
PROJECT = PYPROJECT["project"]
# A distribution's name where its module's differs.
DISTRIBUTION = {
    "yaml": "pyyaml",
    "prometheus_api_client": "prometheus-api-client",
    "vl_convert": "vl-convert-python",
}


def _name(requirement: str) -> str:
    for stop in "<>=!~[; ":
        requirement = requirement.split(stop, 1)[0]
    return requirement.strip().lower().replace("_", "-")


def test_the_license_file_is_the_license_the_metadata_names():
    text = (ROOT / "LICENSE").read_text(encoding="utf-8")
    assert PROJECT["license"] == "Apache-2.0"
    assert "Apache License" in text and "Version 2.0, January 2004" in text
    assert "END OF TERMS AND CONDITIONS" in text


def test_the_package_says_it_is_typed():
    assert (ROOT / "specscope" / "py.typed").is_file()
    assert "Typing :: Typed" in PROJECT["classifiers"]


def _imported() -> dict[str, str]:
    """Each third-party module the package imports, with a file that imports it."""
    stdlib = set(sys.stdlib_module_names)
    imported: dict[str, str] = {}
    for path in sorted((ROOT / "specscope").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            else:
                continue
            for name in names:
                top = name.split(".")[0]
                if top not in stdlib and top != "specscope":
                    imported.setdefault(top, str(path.relative_to(ROOT)))
    return imported


def test_every_imported_third_party_module_is_declared():
    declared = {_name(r) for r in PROJECT["dependencies"]}
    imported = _imported()
    missing = {
        top: where
        for top, where in imported.items()
        if _name(DISTRIBUTION.get(top, top)) not in declared
    }
    assert missing == {}


def test_every_declared_dependency_is_imported():
    """A dependency the package never imports is weight on every install (what only the
    tests use belongs to the test extra)."""
    used = {_name(DISTRIBUTION.get(top, top)) for top in _imported()}
    unused = {_name(r) for r in PROJECT["dependencies"]} - used
    assert unused == set()


def test_no_user_facing_text_names_the_projects_own_fixtures():
    """What specscope prints cites public reports, not this repository's test files
    ("seed 003", "fixtures/..."): a user has neither."""
    import re

    pattern = re.compile(r"\bseeds? \d{3}\b|fixtures/")
    found = []
    for path in sorted((ROOT / "specscope").rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        docstrings = {
            id(node.body[0].value)
            for node in ast.walk(tree)
            if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef)
            and node.body
            and isinstance(node.body[0], ast.Expr)
            and isinstance(node.body[0].value, ast.Constant)
        }
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Constant)
                and isinstance(node.value, str)
                and id(node) not in docstrings
                and pattern.search(node.value)
            ):
                found.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert found == []
