"""llama.cpp's benchmark-only synthetic acceptance (ggml-org/llama.cpp#27711:
--spec-synthetic-acceptance-length / -rates) read from the llama-server command pasted above
a log: the run and its drafter's statistics are set apart as vLLM's synthetic runs are."""

from __future__ import annotations

from pathlib import Path

import pytest

import specscope
from specscope.logs.definitions import load_definitions
from specscope.logs.grammar import Grammar
from specscope.logs.parser import parse_text

COMMAND = (
    "./build/bin/llama-server -m /models/Llama-3.1-8B-Instruct-Q8_0.gguf "
    "-md /models/eagle3-8b.gguf --spec-type draft-eagle3 --spec-draft-n-max 3"
)


def _log(command: str | None, accepted: int, generated: int = 300, requests: int = 8) -> str:
    """Request and since-start statistics lines in the form of ggml-org/llama.cpp#24536."""
    lines = [command] if command else []
    drafts = generated // 3
    rate = accepted / generated
    for task in range(requests):
        at = f"0.{task + 1:02d}.896"
        n = task + 1
        lines += [
            f"{at}.015 I slot print_timing: id  1 | task {task} | draft acceptance = "
            f"{rate:.5f} ({accepted:5d} accepted / {generated:5d} generated), mean acceptance "
            f"length = {1 + accepted / drafts:5.2f}",
            f"{at}.057 I statistics     draft-eagle3: #calls(b,g,a) = {n:4d} {n * drafts:6d} "
            f"{n * drafts:6d}, #gen drafts = {n * drafts:6d}, #acc drafts = {n * accepted:6d}, "
            f"#gen tokens = {n * generated:6d}, #acc tokens = {n * accepted:6d}, "
            "dur(b,g,a) = 0.005, 325.555, 0.114 ms",
        ]
    return "\n".join(lines) + "\n"


def _findings(tmp_path: Path, text: str) -> list:
    tmp_path.mkdir(exist_ok=True)
    log = tmp_path / "server.log"
    log.write_text(text, encoding="utf-8")
    specscope.ingest(log, store=tmp_path / "s", year=2026).raise_for_errors()
    return specscope.detect(specscope.open_store(tmp_path / "s"))


def test_nothing_accepted_is_a_broken_drafter_without_the_setting(tmp_path) -> None:
    kinds = {f.kind for f in _findings(tmp_path, _log(COMMAND, accepted=3))}
    assert "zero_acceptance" in kinds and "forced_acceptance" not in kinds


@pytest.mark.parametrize(
    ("flag", "setting"),
    [
        ("--spec-synthetic-acceptance-length 1.03", {"synthetic_acceptance_length": 1.03}),
        (
            "--spec-synthetic-acceptance-rates=0.03,0,0",
            {"synthetic_acceptance_rates": [0.03, 0.0, 0.0]},
        ),
    ],
)
def test_the_same_counts_at_a_synthetic_setting_judge_nothing(tmp_path, flag, setting) -> None:
    found = _findings(tmp_path, _log(f"{COMMAND} {flag}", accepted=3))
    assert not {f.kind for f in found} & {"zero_acceptance", "low_acceptance", "position_cliff"}
    forced = [f for f in found if f.kind == "forced_acceptance"]
    # The server's run and its drafter's statistics (a run of their own) both.
    assert len(forced) == 2 and all(f.measured == setting for f in forced)
    assert any("not raised: zero_acceptance" in f.explanation for f in forced)
    assert all("--spec-synthetic-acceptance" in f.next_step for f in forced)


def _config(text: str) -> dict:
    grammar = Grammar(load_definitions())
    config: dict = {}
    for run in parse_text(text, grammar).runs:
        config.update({k: v for k, v in run.config.items() if not k.startswith("_")})
    return config


def test_a_wrapped_command_adds_its_flags_to_the_command_above() -> None:
    config = _config(
        "llama-server.exe -hf ggml-org/Qwen3-30B-A3B-GGUF `\n"
        "   -md C:\\models\\draft.gguf --spec-synthetic-acceptance-length=2.75 `\n"
        "   --port 8080\n"
    )
    assert config["model"] == "ggml-org/Qwen3-30B-A3B-GGUF"
    assert config["synthetic_acceptance_length"] == 2.75


@pytest.mark.parametrize(
    "prose",
    [
        "Would --spec-synthetic-acceptance-length 2.5 make llama-server comparable with vLLM?",
        "You could try --spec-synthetic-acceptance-rates 0.8,0.6 to pin it.",
        "> the PR adds --spec-synthetic-acceptance-length, set to 3.0 in its example",
    ],
)
def test_prose_that_names_the_flag_sets_nothing(prose: str) -> None:
    assert "synthetic_acceptance_length" not in _config(prose)
    assert "synthetic_acceptance_rates" not in _config(prose)


def test_a_second_command_after_records_is_another_run(tmp_path) -> None:
    text = _log(COMMAND, accepted=150, requests=3) + _log(
        f"{COMMAND} --spec-synthetic-acceptance-length 2.5", accepted=150, requests=3
    )
    found = _findings(tmp_path, text)
    forced = {f.run_id for f in found if f.kind == "forced_acceptance"}
    runs = specscope.open_store(tmp_path / "s").runs.collect()
    assert 0 < len(forced) < runs.height


def test_a_wrapped_line_of_another_engine_s_command_is_not_llamacpp() -> None:
    config = _config(
        "vllm serve \\\n"
        "    --model Qwen/Qwen3-8B \\\n"
        "    --speculative-config '{\"num_speculative_tokens\": 3}'\n"
    )
    assert config.get("server") != "llama.cpp" and "model" not in config


def test_a_forced_run_is_held_to_no_reference(tmp_path) -> None:
    # 30% at the first position is low against what EAGLE-3 reaches there (the reference
    # table, specscope/data/reference.toml), and says nothing at a forced setting.
    plain = _findings(tmp_path / "plain", _log(COMMAND, accepted=30))
    low = [f for f in plain if f.kind == "low_acceptance"]
    assert low and all("Source:" in f.explanation for f in low)
    flag = "--spec-synthetic-acceptance-length 1.3"
    forced = _findings(tmp_path / "forced", _log(f"{COMMAND} {flag}", accepted=30))
    assert "low_acceptance" not in {f.kind for f in forced}
    said = [f.explanation for f in forced if f.kind == "forced_acceptance"]
    assert said and all("not raised: low_acceptance" in s for s in said)


def test_a_command_above_a_pasted_metrics_text_holds_for_it(tmp_path) -> None:
    # The paste is a run of its own (its counters since the start): the command's setting
    # holds for it as it does for log lines after it.
    metrics = [
        "llamacpp:spec_decode_num_draft_tokens_total 4973",
        "llamacpp:spec_decode_num_accepted_tokens_total 200",
        "llamacpp:spec_decode_num_drafts_total 2060",
    ]
    plain = _findings(tmp_path / "plain", "\n".join([COMMAND, *metrics]) + "\n")
    assert "low_acceptance" in {f.kind for f in plain}
    flag = "--spec-synthetic-acceptance-length 1.1"
    found = _findings(tmp_path / "forced", "\n".join([f"{COMMAND} {flag}", *metrics]) + "\n")
    assert "low_acceptance" not in {f.kind for f in found}
    runs = specscope.open_store(tmp_path / "forced" / "s").runs.collect()
    (pasted,) = runs.filter(runs["spec_records"] > 0)["run_id"].to_list()
    (f,) = [f for f in found if f.kind == "forced_acceptance" and f.run_id == pasted]
    assert "not raised: low_acceptance" in f.explanation
