"""What a paste says changes between two of its sides (``analysis.siblings``), read from the
words their labels differ by (a table's rows, a bullet's label) and the runs' settings:

- ``expected``: a change that lowers acceptance by design: sampling, the workload, the
  context, the depth, the target model, or one drafter against another (each side naming
  its own);
- ``regression``: a change of code on the same setup, which should leave acceptance where it
  was: a version, a build, a commit, a fix ('before' / 'after') in the labels the author
  gives the two sides, and nothing else in their words;
- ``named``: another change the paste names (a cache path, disaggregation, a flag, another
  serving stack on the same weights);
- ``unknown``: nothing said (acceptance varies between datasets alone by a ratio of tau - 1
  of about 0.45, so only a drop past that is called).

A drafter named by one side only, against a side that names a serving stack ('This repo
(DSpark)' against 'r0b0tlab vLLM SM121', world 348), is the same drafter on two stacks, not
two drafters compared.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from specscope.analysis.siblings import Side

# Words that name a change a careful reader expects to lower acceptance: sampling, the
# workload, the drafter's depth, the context. (A regression between versions, a cache path,
# a disaggregated decode are not.)
_EXPECTED = re.compile(
    r"temp(?:erature)?|sampl\w*|top[-_ ]?[pk]|greedy|random|"
    r"data(?:set)?s?|tasks?|code|coding|chat|math|gsm8k|humaneval|mbpp|mt-?bench|sharegpt|"
    r"alpaca|summar\w*|translat\w*|writing|reasoning|thinking|english|chinese|language|"
    r"prompts?|draft|heads?|depth|n-max|tree|chain|long|short|\d+(?:\.\d+)?k|"
    # another target model: each drafter is trained for its own
    r"(?:qwen|llama|deepseek|glm|kimi|mistral|mixtral|gemma|phi|minimax|gpt-oss|vicuna)[\w.\-]*",
)
# The drafters by name: two sides naming two of them compare drafters.
_DRAFTERS = re.compile(
    r"eagle-?\d*|mtp|nextn|ngram|n-gram|suffix|dflash\d*|dspark|medusa|lookahead|drafters?"
)
# Words of a serving stack or a build: a side naming one is a stack, not a drafter.
_STACKS = re.compile(
    r"vllm(?:-ascend)?|sglang|llama\.?cpp|ik_llama\.?cpp|mainline|upstream|fork|trt-?llm|"
    r"tensorrt-llm|lmdeploy|mlx|repo|recipe|stack|server|engine|images?|builds?|versions?"
)
# Words of a change of code on the same setup (with the versions, builds and commits below).
_CODE = re.compile(
    r"before|after|fix(?:ed|es)?|patch(?:ed)?|unpatched|regress\w*|bug(?:gy|s)?|broken|"
    r"main|master|nightly|releases?|released|stable|old(?:er)?|new(?:er)?|latest|previous|"
    r"current|upgrade[sd]?|downgrade[sd]?|revert(?:ed)?|commits?|branch|pr|"
    r"v\d+(?:\.\d+)+[\w.+-]*|\d+\.\d+\.\d+[\w.+-]*|b\d{3,5}|(?=[0-9a-f]*[a-f])(?=[0-9a-f]*\d)[0-9a-f]{7,40}"
)
# Words of code that say only which is older, of whatever the label names beside them.
_AGE = re.compile(r"old(?:er)?|new(?:er)?|latest|previous|current|the|a|an|of|on|in|with|this|our")
# Words of a label that change nothing by themselves ('with the v0.17 image').
_FILLER = re.compile(r"the|a|an|of|on|in|at|with|w/|and|vs\.?|this|that|our|ours|its|run|-")
# Settings whose value is a label's number ('temperature 0' against 'temperature 1.0'):
# two labels that differ in numbers alone beside one of them change that setting.
_SETTINGS = re.compile(
    r"temp(?:erature)?|t|top[-_ ]?[pk]|k|d|depth|steps?|n-max|num_speculative_tokens|"
    r"draft[-_]?n|n[-_]?draft|draft[-_]?max|"
    r"context|ctx|len(?:gth)?|tok(?:en)?s?|prompt|input|output|batch|bs|concurrency",
)
NUMBER = re.compile(r"[~≈]?\d+(?:[.,]\d+)?[kmx%]?")
# A label's words that name the depth itself ('k=3', 'nst 5', '3 steps').
# ('D=4' too: logs.label_config reads a capital D with its value as the depth)
_DEPTH = re.compile(
    r"k|d|nst|steps?|depth|n-max|num_speculative_tokens|draft|draft[-_]?n|n[-_]?draft|"
    r"draft[-_]?max|tokens?|spec"
)
# Settings of a run that, where two runs state different values, name what changed.
_RUN_SETTINGS = (
    "vllm_version",
    "quantization",
    "kv_cache_dtype",
    "enable_prefix_caching",
    "tensor_parallel_size",
    "data_parallel_size",
    "attention_backend",
)


def change(a: Side, b: Side, runs: Mapping[str, Mapping[str, Any]]) -> str:
    """What the paste says changes between two sides: "expected", "regression", "named" or
    "unknown" (the module's doc)."""
    if other_context(a, b, runs):
        return "expected"
    wa, wb = words(a.labels), words(b.labels)
    if a.labels and b.labels:
        differ = wa ^ wb
        if _expected(wa - wb, wb - wa):
            return "expected"
        numbers = [w for w in differ if NUMBER.fullmatch(w)]
        settings = [w for w in wa & wb if _SETTINGS.fullmatch(w)]
        # A setting's value changed ('t=0.0' against 't=1.0', whatever else changes beside
        # it); a depth's alone is set against the positions both draft (sibling_depths).
        only_numbers = len(numbers) == len(differ)
        if numbers and (
            (only_numbers and settings) or any(not _DEPTH.fullmatch(w) for w in settings)
        ):
            return "expected"
        if differ and any(_CODE.fullmatch(w) for w in differ):
            rest = [w for w in differ if not (_CODE.fullmatch(w) or _FILLER.fullmatch(w))]
            # 'old prompt' against 'new prompt', 'previous drafter' against 'latest': the
            # words both share say what the old and the new are.
            if all(_AGE.fullmatch(w) for w in differ - set(rest)) and any(
                _EXPECTED.fullmatch(w) or _DRAFTERS.fullmatch(w) for w in wa & wb
            ):
                return "expected"
            return "regression" if all(NUMBER.fullmatch(w) for w in rest) else "named"
        if differ:
            return "named"
    # Two launches of other versions in one log are named a change, no more: nothing ties
    # them as arms of one comparison on the same workload, as an author's labels do.
    ra, rb = runs.get(a.run_id, {}), runs.get(b.run_id, {})
    for key in _RUN_SETTINGS:
        if ra.get(key) is not None and rb.get(key) is not None and ra[key] != rb[key]:
            return "named"
    return "unknown"


def _expected(only_a: set[str], only_b: set[str]) -> bool:
    """Do the words only one side has (``only_a``, ``only_b``) name a change that lowers
    acceptance by design? A drafter counts where each side names one, or where the side
    without one names no stack either (a drafter against a side that names nothing)."""
    differ = only_a | only_b
    if any(_EXPECTED.fullmatch(w) for w in differ):
        return True
    drafters = [any(_DRAFTERS.fullmatch(w) for w in side) for side in (only_a, only_b)]
    if all(drafters):
        return True
    if any(drafters):
        other = only_b if drafters[0] else only_a
        return not any(_STACKS.fullmatch(w) for w in other)
    return False


def confounded(a: Side, b: Side, runs: Mapping[str, Mapping[str, Any]] | None = None) -> bool:
    """Do two sides' labels change something besides k that lowers acceptance by itself
    (k=3 on chat against k=5 on code), or their headings (another target model)? Then the
    depth is not what the comparison shows."""
    if runs is not None and other_context(a, b, runs):
        return True
    if not (a.labels and b.labels):
        return False
    wa, wb = words(a.labels), words(b.labels)
    rest = {w for w in wa ^ wb if not (NUMBER.fullmatch(w) or _DEPTH.fullmatch(w))}
    return _expected(rest & wa, rest & wb)


def other_context(a: Side, b: Side, runs: Mapping[str, Mapping[str, Any]]) -> bool:
    """Are two sides under headings that differ by what lowers acceptance by design (the
    nearest heading above each one's table, ``logs.label_config``: '### Qwen3.5-35B-A3B-4bit'
    against '### Qwen3.6-27B-4bit', world 371)? Rows under two such headings are no arms of
    one comparison, whatever their labels share. Only where both have a heading."""
    ha, hb = heading(runs.get(a.run_id, {})), heading(runs.get(b.run_id, {}))
    if ha is None or hb is None or ha == hb:
        return False
    wa, wb = words([ha]), words([hb])
    return _expected(wa - wb, wb - wa)


def heading(run: Mapping[str, Any]) -> str | None:
    """The heading a run's configuration keeps (its table's), or None."""
    config = run.get("config")
    if not isinstance(config, str) or '"heading"' not in config:
        return None
    try:
        value = json.loads(config).get("heading")
    except (ValueError, AttributeError):
        return None
    return value if isinstance(value, str) and value.strip() else None


def words(labels: list[str]) -> set[str]:
    text = " ".join(labels).lower().replace("=", " ")
    return {w.rstrip(".") for w in re.findall(r"[~≈]?[a-z0-9][a-z0-9.\-_%]*", text)}


__all__ = ["NUMBER", "change", "confounded", "heading", "other_context", "words"]
