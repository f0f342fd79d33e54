"""The names of things that acceptance depends on: speculative methods as vLLM and SGLang
spell them, how each drafter proposes, and the quantizations that change a target."""

from __future__ import annotations

from typing import Any

import regex

# Method names as vLLM spells them (and as users type them) to the names specscope stores.
_METHOD_ALIASES = {
    "eagle": "eagle",
    "eagle1": "eagle",
    "eagle3": "eagle3",
    "eagle-3": "eagle3",
    "draft_model": "draft_model",
    "draft": "draft_model",
    "ngram": "ngram",
    "[ngram]": "ngram",
    "ngram_gpu": "ngram",
    "medusa": "medusa",
    "mlp_speculator": "mlp_speculator",
    "dflash": "dflash",
    "suffix": "suffix",
    "mtp": "mtp",
    "nextn": "mtp",  # SGLang's name for MTP heads
    "standalone": "draft_model",  # SGLang
    "lookahead": "ngram",
}


# How the drafter proposes: a chain conditions each token on the previous draft tokens,
# a block proposes all k at once, a lookup copies from the context.
DRAFTER_KINDS = {
    "mtp": "chain",
    "eagle": "chain",
    "eagle3": "chain",
    "draft_model": "chain",
    "medusa": "chain",
    "mlp_speculator": "chain",
    "dflash": "block",
    "ngram": "lookup",
    "suffix": "lookup",
}


_QUANT_IN_NAME = regex.compile(
    r"(?i)(?:^|[-_/.])(?P<q>awq|gptq|int4|int8|w4a16|w8a8|w8a16|nvfp4|mxfp4|fp8|fp4|autoround|"
    r"gguf|bnb|4bit|8bit|exl2|marlin)(?:$|[-_/.])"
)


def normalise_method(raw: Any) -> str | None:
    if raw is None:
        return None
    name = str(raw).strip().strip("'\"").lower()
    if not name or name == "none":
        return None
    if name in _METHOD_ALIASES:
        return _METHOD_ALIASES[name]
    if name.endswith("_mtp") or name.startswith("mtp"):
        return "mtp"
    return name


def quantization_from_model_name(model: str | None) -> str | None:
    if not model:
        return None
    m = _QUANT_IN_NAME.search(model.rsplit("/", 1)[-1])
    return m.group("q").lower() if m else None


QUANTIZED = (
    "int4",
    "awq",
    "gptq",
    "nvfp4",
    "fp4",
    "w4a16",
    "4bit",
    "autoround",
    "marlin",
    "int8",
    "w8a8",
    "bnb",
    "gguf",
    "exl2",
)
