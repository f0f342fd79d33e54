"""Two launches pasted one after the other without their start-up lines (issue 16): a
process whose SpecDecoding records print k per-position rates, then another k, is two runs;
records of data-parallel engines, a record cut short and records without a per-position
list are not. Generated logs, read line by line and in bulk, plus the real excerpts
(world cases, seeds) that keep their runs."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import specscope
from specscope.logs.runbook import shape_of
from tests.helpers import FIXTURES
from tests.test_bulk import _same

HEAD = "(APIServer pid={pid}) INFO 04-07 17:{m:02d}:{s:02d} [metrics.py:101] "


def _rates(k: int, first: float = 0.8, step: float = 0.1) -> list[float]:
    return [round(max(0.0, first - step * i), 3) for i in range(k)]


def spec_line(
    k: int,
    t: int,
    *,
    rates: list[float] | None = None,
    engine: int | None = None,
    pid: int = 4741,
    drafts: int = 1000,
    variant: str = "D",
) -> str:
    """A V1 SpecDecoding line as vLLM prints it (variant D 0.10.2+, C 0.8.5-0.10.1)."""
    rates = rates if rates is not None else _rates(k)
    accepted = sum(round(r * drafts) for r in rates)
    mean = 1 + accepted / drafts
    listed = ", ".join(f"{r:.3f}" for r in rates)
    rate = 100 * accepted / (k * drafts)
    head = HEAD.format(pid=pid, m=t // 60 % 60, s=t % 60)
    head += f"Engine {engine:03d}: " if engine is not None else ""
    if variant == "C":
        return (
            head + f"SpecDecoding metrics: Draft acceptance rate: {rate:.1f}%, Mean acceptance "
            f"length: {mean:.2f}, Accepted: {accepted} tokens, Drafted: {k * drafts} tokens, "
            f"Per-position acceptance rate: {listed}"
        )
    return (
        head + f"SpecDecoding metrics: Mean acceptance length: {mean:.2f}, Accepted throughput: "
        f"{accepted / 10:.2f} tokens/s, Drafted throughput: {k * drafts / 10:.2f} tokens/s, "
        f"Accepted: {accepted} tokens, Drafted: {k * drafts} tokens, Per-position acceptance "
        f"rate: {listed}, Avg Draft acceptance rate: {rate:.1f}%"
    )


def stats_line(t: int, engine: int | None = None, pid: int = 4741) -> str:
    head = HEAD.format(pid=pid, m=t // 60 % 60, s=t % 60).replace("metrics.py", "loggers.py")
    head += f"Engine {engine:03d}: " if engine is not None else ""
    return (
        head + "Avg prompt throughput: 10.0 tokens/s, Avg generation throughput: 200.0 "
        "tokens/s, Running: 4 reqs, Waiting: 0 reqs, GPU KV cache usage: 3.0%, Prefix cache "
        "hit rate: 0.0%"
    )


def _runs(text: str) -> list[specscope.logs.results.Run]:
    return specscope.parse_text(text).runs


def _spec_runs(text: str) -> list[tuple[int, int | None]]:
    """(run, k) of each spec record, in order."""
    rows = specscope.parse_text(text).tables.get("spec_decode", [])
    return [(r["_run"], r.get("k")) for r in rows]


def k7_then_k5(**kw: object) -> list[str]:
    lines = []
    for i in range(4):
        lines += [stats_line(10 * i), spec_line(7, 10 * i, **kw)]  # type: ignore[arg-type]
    for i in range(4, 8):
        lines += [stats_line(10 * i), spec_line(5, 10 * i, **kw)]  # type: ignore[arg-type]
    return lines


def test_k_that_changes_between_records_starts_a_run() -> None:
    result = specscope.parse_text("\n".join(k7_then_k5()))
    runs = result.runs
    assert len(runs) == 2
    assert [r.first_line for r in runs] == [1, 10]
    assert runs[0].last_line == 9
    spec = result.tables["spec_decode"]
    assert [(r["_run"], r["k"]) for r in spec] == [(1, 7)] * 4 + [(2, 5)] * 4
    # The new run says why it is one, on its first record and in its config.
    assert "k went from 7 to 5 at line 10" in runs[1].config["split"]
    assert "no restart line" in spec[4]["problems"]
    assert all(not r.get("problems") for r in spec[:4] + spec[5:])
    # The stats line before the first k = 5 record was read before k changed: the old run's.
    stats = result.tables["engine_stats"]
    assert [r["_run"] for r in stats] == [1, 1, 1, 1, 1, 2, 2, 2]


def test_variant_c_and_back_and_forth() -> None:
    lines = [spec_line(4, i, variant="C") for i in range(3)]
    lines += [spec_line(2, 10 + i, variant="C") for i in range(3)]
    lines += [spec_line(4, 20 + i, variant="C") for i in range(2)]
    assert [run for run, _ in _spec_runs("\n".join(lines))] == [1, 1, 1, 2, 2, 2, 3, 3]


def test_data_parallel_engines_interleave_without_splitting() -> None:
    """Engines of one server log side by side and share k: two runs, not one per engine or
    per change of engine; the same k throughout is one run."""
    lines = []
    for i in range(6):
        k = 7 if i < 3 else 5
        for engine in range(4):
            lines += [stats_line(10 * i, engine), spec_line(k, 10 * i, engine=engine)]
    got = _spec_runs("\n".join(lines))
    assert len(got) == 24
    assert {run for run, k in got if k == 7} == {1}
    assert {run for run, k in got if k == 5} == {2}
    # As vLLM prints them: the engine on the stats line, the spec line after it names none.
    lines = []
    for i in range(6):
        for engine in range(2):
            lines += [stats_line(10 * i, engine), spec_line(7 if i < 3 else 5, 10 * i)]
    spec = specscope.parse_text("\n".join(lines)).tables["spec_decode"]
    assert [(r["_run"], r["engine"]) for r in spec] == [(1, 0), (1, 1)] * 3 + [(2, 0), (2, 1)] * 3
    same = [spec_line(3, i, engine=i % 2) for i in range(10)]
    assert len(_runs("\n".join(same))) == 1


def test_a_record_cut_short_is_no_change_of_k() -> None:
    """A record the paste cut inside its list (variant D without its last field) or at the
    end of a list that is its last field (variant C: it no longer sums to its own mean
    length), and a record trimmed by hand to a few values, keep the run."""
    cut_d = spec_line(7, 31).split("Per-position")[0] + "Per-position acceptance rate: 0.800, 0.7"
    full_c = spec_line(7, 32, variant="C")
    cut_c = full_c[: full_c.index("0.500") - 2]  # five of seven rates, each whole
    trimmed = HEAD.format(pid=4741, m=0, s=33) + (
        "SpecDecoding metrics: Mean acceptance length: 3.80, Per-position acceptance rate: "
        "0.800, 0.700, 0.600"
    )
    for middle in (cut_d, cut_c, trimmed):
        lines = (
            [spec_line(7, i) for i in range(3)]
            + [middle]
            + [spec_line(7, 40 + i) for i in range(3)]
        )
        text = "\n".join(lines)
        assert len(_runs(text)) == 1, middle
    # The cut variant C record is kept (its values are whole), and still no split.
    got = _spec_runs(
        "\n".join([spec_line(7, 0, variant="C"), cut_c, spec_line(7, 50, variant="C")])
    )
    assert [run for run, _ in got] == [1, 1, 1]


def test_a_list_that_ends_in_zeros_and_is_cut_there_is_refused_by_its_counts() -> None:
    """Variant C with a dead tail cut off at a line end sums to its mean all the same; its
    k then disagrees with nothing the record prints but the drafted count, which the list
    alone cannot check: such a record does split. Written down so that a change to the rule
    is a decision."""
    rates = [0.8, 0.5, 0.0, 0.0]
    values = {"per_position_rate": rates[:2], "mean_acceptance_length": 2.3}
    assert shape_of(values, whole=True) == 2
    assert shape_of({**values, "per_position_rate": rates}, whole=True) == 4
    assert shape_of({**values, "per_position_rate": [0.8]}, whole=True) is None
    assert shape_of(values, whole=False) is None
    assert shape_of({"k": 3, "accepted_tokens": 5}, whole=True) == 3
    assert shape_of({"per_position_rate": [0.8, None]}, whole=True) is None


def test_records_without_a_list_have_no_k_signal() -> None:
    """SGLang's decode batches and V1's first form print no per-position rates: however
    their accept length moves, they are one run."""
    sglang = [
        f"[2025-06-01 10:00:{i:02d} TP0] Decode batch. #running-req: 4, #token: 2000, "
        f"token usage: 0.05, accept len: {2.1 + 0.3 * (i % 3):.2f}, cuda graph: True, "
        "gen throughput (token/s): 150.00, #queue-req: 0,"
        for i in range(8)
    ]
    assert len(_runs("\n".join(sglang))) == 1
    early = [
        HEAD.format(pid=9, m=0, s=i) + f"SpecDecoding metrics: Draft acceptance rate: "
        f"{40 + i:.1f}%, Accepted: {40 + i} tokens, Drafted: 100 tokens"
        for i in range(6)
    ]
    assert len(_runs("\n".join(early))) == 1


def test_llamacpp_requests_whose_lists_differ_are_one_run() -> None:
    """llama.cpp drafts as far as its draft model is sure: a request's per-position list is
    as long as that request drafted, not k."""
    line = (
        "draft acceptance = 0.62008 ( 1797 accepted /  2898 generated), mean acceptance "
        "length = {m:.2f}, acceptance rate per position = ({r})"
    )
    rates = [[0.727, 0.513], [0.8, 0.6, 0.4], [0.7]]
    lines = [line.format(m=1 + sum(r), r=", ".join(map(str, r))) for r in rates * 2]
    got = _spec_runs("\n".join(lines))
    assert len(got) == 6 and len({run for run, _ in got}) == 1


def test_v0_speculative_tokens_that_change_split() -> None:
    line = (
        "INFO 10-16 19:05:{s:02d} metrics.py:367] Speculative metrics: Draft acceptance rate: "
        "0.642, System efficiency: 0.598, Number of speculative tokens: {k}, Number of "
        "accepted tokens: {a}, Number of draft tokens: {d}, Number of emitted tokens: {e}."
    )
    lines = [line.format(s=i, k=3, a=8547, d=13311, e=10616) for i in range(3)]
    lines += [line.format(s=10 + i, k=5, a=8547, d=13310, e=10616) for i in range(3)]
    assert [run for run, _ in _spec_runs("\n".join(lines))] == [1, 1, 1, 2, 2, 2]


def test_a_config_line_naming_another_launch_still_splits_as_before() -> None:
    args = (
        "(APIServer pid=4741) INFO 04-07 17:05:00 [utils.py:233] non-default args: "
        "{'model': 'Qwen/Qwen3-8B', 'speculative_config': {'method': 'eagle3', "
        "'num_speculative_tokens': 5, 'model': 'AngelSlim/Qwen3-8B_eagle3'}}"
    )
    lines = [spec_line(5, i) for i in range(3)] + [args] + [spec_line(5, 400 + i) for i in range(3)]
    runs = _runs("\n".join(lines))
    assert len(runs) == 2
    assert runs[1].config.get("k") == 5
    assert "split" not in runs[1].config


def test_k_set_per_batch_size_varies_within_one_launch() -> None:
    args = (
        "(APIServer pid=4741) INFO 04-07 17:05:00 [utils.py:233] non-default args: "
        "{'model': 'Qwen/Qwen3-8B', 'speculative_config': {'method': 'eagle3', "
        "'num_speculative_tokens': 7, 'num_speculative_tokens_per_batch_size': "
        "{1: 7, 16: 5}, 'model': 'AngelSlim/Qwen3-8B_eagle3'}}"
    )
    lines = [args] + [spec_line(7, i) for i in range(3)] + [spec_line(5, 10 + i) for i in range(3)]
    assert len(_runs("\n".join(lines))) == 1
    assert len(_runs("\n".join(lines[1:]))) == 2


def test_a_restart_between_changes_nothing_new() -> None:
    """A new pid is a restart already: the k that changes with it adds no run of its own,
    and the new process's first k is no change."""
    lines = [spec_line(7, i) for i in range(3)] + [
        spec_line(5, 100 + i, pid=5000) for i in range(3)
    ]
    runs = _runs("\n".join(lines))
    assert len(runs) == 2
    assert "split" not in runs[1].config


@pytest.mark.parametrize("dp", [False, True])
@pytest.mark.parametrize("block_bytes", [700, 4096, 1 << 24])
def test_bulk_reader_splits_where_the_line_parser_does(
    dp: bool, block_bytes: int, tmp_path: Path
) -> None:
    """The bulk reader sends a record where k may change to the line parser: the same runs,
    rows and run ids however the blocks fall (a cut record and a restart among them)."""
    lines = []
    engines = range(2) if dp else [None]
    for i in range(30):
        k = 7 if i < 12 else 5 if i < 20 else 3
        for e in engines:
            # Half the way the spec line names its engine, half the way it follows its stats.
            lines += [stats_line(i, e), spec_line(k, i, engine=e if i % 2 else None)]
        if i == 6:
            lines.append(spec_line(7, i).split("Per-position")[0] + "Per-position acceptance")
        if i == 24:
            lines += [spec_line(3, 60 + j, pid=5001) for j in range(5)]
            lines += [spec_line(4, 70 + j, pid=5001) for j in range(5)]
    path = tmp_path / "launches.log"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    fast = _same(path, block_bytes=block_bytes)
    ks = [(r["ordinal"], r["k"]) for r in fast["runs"]]
    assert [k for _, k in ks] == [7, 5, 3, 3, 4, 3]
    assert fast["bulk_rows"] > 0


def test_detect_judges_the_two_launches_apart(tmp_path: Path) -> None:
    """k = 7 with a tail that accepts nearly nothing, then k = 5 healthy: the tail is found
    on the first launch only, and the second is not blamed for it."""
    tail = [0.8, 0.7, 0.6, 0.5, 0.4, 0.01, 0.0]
    lines = [spec_line(7, i, rates=tail, drafts=4000) for i in range(6)]
    lines += [spec_line(5, 100 + i, drafts=4000) for i in range(6)]
    log = tmp_path / "two.log"
    log.write_text("\n".join(lines) + "\n", encoding="utf-8")
    store = tmp_path / "store"
    specscope.ingest([log], store=store, year=2026)
    findings = specscope.detect(specscope.open_store(store))
    runs = {
        f.kind: {r.rsplit("-", 1)[1] for r in (f.run_id or "").split(",")}
        for f in findings
        if f.kind in ("k_too_large", "position_cliff")
    }
    assert runs, [f.kind for f in findings]
    assert all(r == {"1"} for r in runs.values()), runs


def _world(upto: int = 219) -> list[Path]:
    world = FIXTURES / "world"
    out = []
    for p in sorted(world.glob("*.log")):
        m = re.match(r"(\d+)_", p.name)
        if m and int(m.group(1)) <= upto:  # later cases are being labelled blind
            out.append(p)
    return out


def test_real_excerpts_keep_their_runs() -> None:
    """No real excerpt (world cases, seeds) holds two launches without a line between
    them: none gains a run from a change of k (measured on all of them: none splits)."""
    paths = [*_world(), *sorted((FIXTURES / "seeds").glob("*.txt"))]
    assert len(paths) > 200
    split = []
    for path in paths:
        runs = specscope.parse_text(path.read_text(encoding="utf-8", errors="replace")).runs
        split += [f"{path.name}: {r.config['split']}" for r in runs if r.config.get("split")]
    assert not split, split
