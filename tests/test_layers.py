"""The package's layers, read from every module's imports (README → Layout).

    cli → report → analysis → store → kernel
    logs, prometheus: beside each other, above store; neither imports the other

The kernel is the package's top-level modules (errors, schema, acceptance, stats, ...).
Lazy imports (inside functions) count like the others: a rule is about what a module may
know, not when it learns it.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "specscope"

# What each layer may import besides itself and the kernel.
MAY_IMPORT: dict[str, set[str]] = {
    "kernel": set(),
    "store": set(),
    "logs": {"store"},
    "prometheus": {"store"},
    "analysis": {"store"},
    "queries": {"store"},
    "report": {"analysis", "store", "logs.source"},
    "cli": {"report", "analysis", "store", "logs", "prometheus", "queries"},
}
FACADE = {"specscope", "specscope.__main__"}  # the public API: imports what it exposes


def module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def layer_of(module: str) -> str:
    parts = module.split(".")
    if len(parts) >= 3 or (len(parts) == 2 and (PACKAGE / parts[1]).is_dir()):
        return parts[1]
    return "kernel"


def imports_of(path: Path) -> Iterable[tuple[str, list[str], int]]:
    """(module imported, names taken from it, line) for every import in the file."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name, [], node.lineno
        elif isinstance(node, ast.ImportFrom) and node.module:
            yield node.module, [a.name for a in node.names], node.lineno


def graph() -> dict[str, list[tuple[str, list[str], int]]]:
    """Each specscope module with the specscope modules it imports."""
    out = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        edges = []
        for target, names, line in imports_of(path):
            if target != "specscope" and not target.startswith("specscope."):
                continue
            # ``from specscope.store import rollup`` imports the module specscope.store.rollup
            subs = [
                f"{target}.{n}"
                for n in names
                if (PACKAGE.parent / f"{target}.{n}".replace(".", "/")).with_suffix(".py").exists()
            ]
            edges.append((target, [n for n in names if f"{target}.{n}" not in subs], line))
            edges.extend((s, [], line) for s in subs)
        out[module_name(path)] = edges
    return out


def allowed(source: str, target: str) -> bool:
    if source in FACADE:
        return True
    if target == "specscope":
        return False  # through the facade: a cycle waiting to happen
    have, want = layer_of(source), layer_of(target)
    if want in ("kernel", have):
        return True
    permitted = MAY_IMPORT[have]
    inside = [f"specscope.{p}" for p in permitted]
    return want in permitted or any(target == p or target.startswith(p + ".") for p in inside)


def violations(edges: dict[str, list[tuple[str, list[str], int]]]) -> list[str]:
    found = []
    for source, targets in edges.items():
        for target, names, line in targets:
            if not allowed(source, target):
                found.append(
                    f"{source}:{line} imports {target} ({layer_of(source)} → {layer_of(target)})"
                )
            private = [n for n in names if n.startswith("_") and source not in FACADE]
            if private and target != source:
                found.append(f"{source}:{line} takes private {', '.join(private)} from {target}")
    return found


def cycles(edges: dict[str, list[tuple[str, list[str], int]]]) -> list[list[str]]:
    """Import cycles among modules (package __init__ files included)."""
    nodes = {s: sorted({t for t, _, _ in ts if t in edges and t != s}) for s, ts in edges.items()}
    found, state, stack = [], {}, []

    def visit(n: str) -> None:
        state[n] = 1
        stack.append(n)
        for m in nodes[n]:
            if state.get(m) == 1:
                found.append([*stack[stack.index(m) :], m])
            elif m not in state:
                visit(m)
        stack.pop()
        state[n] = 2

    for n in nodes:
        if n not in state and n not in FACADE:
            visit(n)
    return found


def test_every_import_follows_the_layers() -> None:
    assert violations(graph()) == []


def test_no_import_cycles() -> None:
    assert cycles({k: v for k, v in graph().items() if k not in FACADE}) == []


@pytest.mark.parametrize(
    ("source", "target", "names"),
    [
        ("specscope.analysis.evidence", "specscope.logs.parser", []),  # analysis reads no log
        ("specscope.logs.bulk", "specscope.prometheus.intervals", []),  # siblings
        ("specscope.prometheus.pull", "specscope.analysis.findings", []),  # upward
        ("specscope.store.reading", "specscope.logs.assemble", []),  # store under logs
        ("specscope.stats", "specscope.store.reading", []),  # the kernel imports nothing
        ("specscope.report.build", "specscope.logs.parser", []),  # only logs.source
        ("specscope.report.build", "specscope", []),  # not through the facade
        ("specscope.report.build", "specscope.report.charts", ["_frame"]),  # private
    ],
)
def test_a_broken_rule_is_caught(source: str, target: str, names: list[str]) -> None:
    edges = graph()
    edges[source] = [*edges[source], (target, names, 1)]
    assert len(violations(edges)) == 1


def test_a_cycle_is_caught() -> None:
    edges = graph()
    edges["specscope.stats"] = [*edges["specscope.stats"], ("specscope.acceptance", [], 1)]
    edges["specscope.acceptance"] = [*edges["specscope.acceptance"], ("specscope.stats", [], 1)]
    assert cycles(edges)


def test_every_folder_says_what_it_takes_and_gives() -> None:
    """Each stage's __init__ docstring says its input, output and what it may import."""
    for folder in sorted(p for p in PACKAGE.iterdir() if (p / "__init__.py").exists()):
        doc = ast.get_docstring(ast.parse((folder / "__init__.py").read_text(encoding="utf-8")))
        assert doc and len(doc.splitlines()) <= 12, folder.name
        assert "import" in doc.lower(), f"{folder.name}: say what it may import"


def test_no_module_is_too_long() -> None:
    long = {
        module_name(p): n
        for p in PACKAGE.rglob("*.py")
        if (n := len(p.read_text(encoding="utf-8").splitlines())) > 650
    }
    assert long == {}
