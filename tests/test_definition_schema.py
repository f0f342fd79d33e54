"""A broken format definition is refused in one line that names the file, the key and a hint.

``tests/bad_definitions/`` holds one small definition per way of breaking one (as lnav keeps
test/bad-config), each with the error it must give in its first line: ``# expect: ...``.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from specscope.errors import DefinitionError
from specscope.logs.definitions import definitions_dir, load_definition, load_definitions

BAD = Path(__file__).resolve().parent / "bad_definitions"
CASES = sorted(BAD.glob("*.toml"))

# A definition every check passes, for misspelling one key at a time.
GOOD = """\
kind = "fields"
table = "engine_stats"
anchor = 'Engine\\s*\\d+:'
required = ["running_reqs"]

[fields]
"Running" = { column = "running_reqs", type = "int" }

[[events]]
code = "engine_dead"
anchor = 'EngineDeadError'

[[samples]]
source = "constructed"
text = "Engine 000: Running: 1 reqs"
[[samples.records]]
running_reqs = 1
"""


def _expected(path: Path) -> str:
    first = path.read_text(encoding="utf-8").splitlines()[0]
    assert first.startswith("# expect: "), f"{path.name}: first line is not '# expect: ...'"
    return first.removeprefix("# expect: ")


def _refusal(path: Path) -> str:
    with pytest.raises(DefinitionError) as info:
        load_definition(path)
    return str(info.value)


def test_the_corpus_covers_many_faults():
    assert len(CASES) >= 10


@pytest.mark.parametrize("path", CASES, ids=lambda p: p.stem)
def test_bad_definition_is_refused(path: Path):
    message = _refusal(path)
    assert "\n" not in message and "\r" not in message
    assert message.startswith(f"{path.name}: ")
    assert _expected(path) in message


def test_every_real_definition_loads():
    # Past the cache: another test may have loaded them before this module was written.
    defs = load_definitions.__wrapped__()
    assert len(defs) == len(list(definitions_dir().glob("*.toml")))


def test_the_good_definition_loads(tmp_path: Path):
    path = tmp_path / "good.toml"
    path.write_text(GOOD, encoding="utf-8")
    assert load_definition(path).required == ("running_reqs",)


@pytest.mark.parametrize(
    ("right", "wrong", "where", "meant"),
    [
        ("required =", "requried =", "unknown key 'requried'", "required"),
        ("anchor = 'Engine\\s", "ancor = 'Engine\\s", "unknown key 'ancor'", "anchor"),
        ('{ column = "', '{ colum = "', 'fields."Running".colum:', "column"),
        ('type = "int" }', 'tpye = "int" }', 'fields."Running".tpye:', "type"),
        ("code = ", "cod = ", "events[1].cod:", "code"),
        ("source = ", "sources = ", "samples[1].sources:", "source"),
        ("running_reqs = 1", "running_req = 1", "records[1].running_req:", "running_reqs"),
    ],
)
def test_the_hint_names_the_key_meant(
    tmp_path: Path, right: str, wrong: str, where: str, meant: str
):
    assert GOOD.count(right) == 1
    path = tmp_path / "misspelled.toml"
    path.write_text(GOOD.replace(right, wrong), encoding="utf-8")
    message = _refusal(path)
    assert where in message
    assert message.endswith(f"(did you mean {meant!r}?)")


def test_a_misspelling_in_a_real_definition_is_caught(tmp_path: Path):
    source = definitions_dir() / "vllm_v1_engine_stats.toml"
    path = tmp_path / source.name
    path.write_text(source.read_text(encoding="utf-8").replace("\nrequired =", "\nrequried ="))
    assert _refusal(path) == (
        "vllm_v1_engine_stats.toml: unknown key 'requried' (did you mean 'required'?)"
    )


def test_a_key_far_from_any_lists_the_known_ones(tmp_path: Path):
    path = tmp_path / "x.toml"
    path.write_text(GOOD.replace("required =", "zzz ="), encoding="utf-8")
    assert "unknown key 'zzz' (known: name, kind, engine," in _refusal(path)
