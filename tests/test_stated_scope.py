"""What an author states in prose (a rate, counts, a reference value) is a run of its own,
which no server line joins: a number in a sentence never adds to, or stands for, the
counts a server printed around it (issue 16)."""

from __future__ import annotations

from pathlib import Path

from specscope.logs.parser import parse_text

SEEDS = Path(__file__).parent.parent / "fixtures" / "seeds"
STATED = {"stated_acceptance", "trtllm_reference_accept_length"}


def _formats_by_run(text: str) -> dict[int, list[str]]:
    result = parse_text(text)
    runs: dict[int, list[str]] = {}
    for table, rows in result.tables.items():
        for row in rows:
            if table != "events":
                runs.setdefault(row["_run"], []).append(row["format"])
    return runs


def test_seed_002_rates_stated_in_prose_are_runs_of_their_own() -> None:
    """Seed 002's author states four rates (lines 22, 210, 211, 213); the server's records
    after the last (from line 229) were in its run and are in runs of their own now."""
    text = (SEEDS / "002_2dcac71f91935498.txt").read_text(encoding="utf-8")
    result = parse_text(text)
    stated = [r for r in result.tables["spec_decode"] if r["format"] == "stated_acceptance"]
    assert {r["line"] for r in stated} == {22, 210, 211, 213}
    for formats in _formats_by_run(text).values():
        assert not (set(formats) & STATED) or set(formats) <= STATED, formats
    after = [r for r in result.tables["spec_decode"] if r["line"] >= 229]
    assert after and {r["_run"] for r in after}.isdisjoint({r["_run"] for r in stated})


def test_counts_stated_before_a_log_are_not_added_to_its_counts() -> None:
    """A real statement of counts (ik_llama.cpp#1781: '112/141 accepted draft tokens')
    between seed 003's launch and its INT4 records (nothing accepted): the log's run sums
    the log's counts alone, and the statement's run holds the statement alone."""
    statement = (
        "- Gemma 4 31B external MTP runtime check: MTP active, 112/141 accepted draft tokens, "
        "108.27 tok/s vs 60.57 tok/s without MTP"
    )
    lines = (SEEDS / "003_83783f5568908b19.txt").read_text(encoding="utf-8").splitlines()
    at = next(i for i, line in enumerate(lines) if "SpecDecoding metrics" in line)
    log = "\n".join(lines)
    alone = parse_text(log).tables["spec_decode"]
    result = parse_text("\n".join([*lines[:at], statement, *lines[at:]]))
    rows = result.tables["spec_decode"]
    said = [r for r in rows if r["format"] == "stated_acceptance"]
    assert [(r["accepted_tokens"], r["draft_tokens"]) for r in said] == [(112, 141)]
    others = [r for r in rows if r["format"] != "stated_acceptance"]
    assert len(others) == len(alone)
    assert said[0]["_run"] not in {r["_run"] for r in others}
    first_log_run = min(r["_run"] for r in others)
    in_run = [r for r in others if r["_run"] == first_log_run]
    alone_first = [r for r in alone if r["_run"] == min(a["_run"] for a in alone)]
    assert sum(r["accepted_tokens"] or 0 for r in in_run) == sum(
        r["accepted_tokens"] or 0 for r in alone_first
    )
    assert sum(r["draft_tokens"] or 0 for r in in_run) == sum(
        r["draft_tokens"] or 0 for r in alone_first
    )


def test_a_rate_stated_between_a_launch_and_its_log_leaves_the_launch_its_log() -> None:
    """The author's words between a server's configuration and its records (a rate stated
    after the launch command, as in seed 002) do not take the records from the launch's
    run: the config and the records stay together, the rate apart."""
    log = (SEEDS / "003_83783f5568908b19.txt").read_text(encoding="utf-8").splitlines()
    first_spec = next(i for i, line in enumerate(log) if "SpecDecoding metrics" in line)
    # seed 002, line 22: the author's words
    words = (
        "Running vllm with dflash on FP8 of 27B, 15 spec num averages very low acceptance "
        "rate ~12%."
    )
    text = "\n".join([*log[:first_spec], words, *log[first_spec:]])
    result = parse_text(text)
    rows = result.tables["spec_decode"]
    said = [r for r in rows if r["format"] == "stated_acceptance"]
    assert [r["reported_rate"] for r in said] == [0.12]
    plain = parse_text("\n".join(log))
    runs_alone = {r.ordinal: r.config.get("model") for r in plain.runs}
    first_model = runs_alone[min(r["_run"] for r in plain.tables["spec_decode"])]
    log_runs = {r.ordinal: r for r in result.runs}
    first = min(r["_run"] for r in rows if r["format"] != "stated_acceptance")
    assert log_runs[first].config.get("model") == first_model
    assert said[0]["_run"] != first
