"""Records whose anchor captures their values itself (named groups), for formats that do not
print ``label: value`` (llama.cpp's ``name = value``), and the runs of series a server
prints side by side.

- A group named after a column is typed as the definition's field of that column declares
  (a count as an int, a per-position list as floats); a group named ``x_<name>`` is kept
  in ``extra`` under ``<name>`` (what no column holds: llama.cpp's calls and durations);
  a group ``series`` names the series the record belongs to (or the definition's
  ``keys.series``, for all its records: the responses of a capture).
- A record of a series goes to a run of its own beside the server's run, one per series:
  llama.cpp prints one cumulative ``statistics <implementation>:`` line per speculative
  implementation after every request, beside the request's own line; those are other
  counts of the same tokens, so they are never added to the request lines' run, and two
  implementations (n-gram and MTP side by side) are two methods. The responses of a
  capture are another series: each a request's counts, never added to a log's intervals.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from specscope.logs.definitions import Definition
from specscope.logs.derive import MEANING_KEYS
from specscope.logs.fields import convert
from specscope.logs.results import Run
from specscope.vocabulary import DRAFTER_KINDS, normalise_method

EXTRA_PREFIX = "x_"


def typed_groups(
    defn: Definition, groups: Mapping[str, Any], extra: dict[str, Any]
) -> dict[str, Any]:
    """The groups as values of their columns' types; ``x_`` groups go to ``extra``. A value
    that does not read raises ``FieldValueError`` (the record is skipped, with its line)."""
    specs = {f.column: f for f in defn.fields.values()}
    out: dict[str, Any] = {}
    for name, raw in groups.items():
        if name.startswith(EXTRA_PREFIX):
            extra[name[len(EXTRA_PREFIX) :]] = _numbers(str(raw))
            continue
        spec = specs.get(name)
        out[name] = convert(spec, str(raw)) if spec is not None and isinstance(raw, str) else raw
    rates = out.get("per_position_rate")
    if isinstance(rates, list) and rates:
        out["k"] = len(rates)  # as drafted: the positions the list covers, whatever the flag
    return out


def _numbers(raw: str) -> Any:
    """``"6 1690 26"`` -> ``[6, 1690, 26]``, ``"26"`` -> ``26``; text that is not numbers as
    it is."""
    items = raw.replace(",", " ").split()
    try:
        numbers = [int(x) if x.isdigit() else float(x) for x in items]
    except ValueError:
        return " ".join(items)
    return numbers[0] if len(numbers) == 1 else numbers


def method_of(series: str) -> str | None:
    """A llama.cpp implementation's method (``draft-mtp``, ``ngram_mod``, ``eagle3``)."""
    name = series.lower().replace("-", "_")
    if name.startswith("ngram"):
        return "ngram"
    if name.endswith("mtp"):
        return "mtp"
    if "eagle3" in name:
        return "eagle3"
    if name.startswith("draft"):
        return "draft_model"
    return normalise_method(name)


LIST_ITEMS = 16  # the items of a list looked into (a response's choices; not its token ids)


class Held(dict[str, Any]):
    """The object that holds a definition's keys, found nested in a document, with the
    objects around it (the nearest first): what a response says beside its counts (vLLM's
    ``usage`` beside ``metrics``) is read from them (``fields.read_json``, ``^`` labels)."""

    def __init__(self, found: dict[str, Any], around: list[dict[str, Any]]) -> None:
        super().__init__(found)
        self.around = around


def holding(
    obj: Any, keys: Sequence[str], depth: int = 3, around: tuple[dict[str, Any], ...] = ()
) -> dict[str, Any] | None:
    """``obj``, or the first object nested in it, that has every one of ``keys``: a
    response keeps its speculative counts under ``meta_info`` (SGLang) or
    ``metrics.speculative_decoding`` (vLLM) or on each of its ``choices`` (TensorRT-LLM), a
    capture wraps the response again. A nested one comes as a ``Held``, the objects
    around it beside it."""
    if isinstance(obj, list):  # a response's choices (TensorRT-LLM counts on each)
        for item in obj[:LIST_ITEMS]:
            found = holding(item, keys, depth, around)
            if found is not None:
                return found
        return None
    if not isinstance(obj, dict):
        return None
    if all(key in obj for key in keys):
        return Held(obj, list(reversed(around))) if around else obj
    for value in obj.values() if depth else ():
        if isinstance(value, dict | list):
            found = holding(value, keys, depth - 1, (*around, obj))
            if found is not None:
                return found
    return None


class SeriesRuns:
    """One run per (server run, series), after the parser's runs."""

    def __init__(self, runs: list[Run]) -> None:
        self.runs = runs  # the parser's list: a new run is appended to it
        self.by_key: dict[tuple[int, str], Run] = {}

    def run_for(self, parent: Run, series: str, line: int, engine: str) -> Run:
        key = (parent.ordinal, series)
        run = self.by_key.get(key)
        if run is None:
            run = Run(ordinal=len(self.runs) + 1, first_line=line, last_line=line)
            run.from_block = True  # no record of the log around it joins it
            run.update_config({"server": engine})
            # A setting that forces acceptance holds for every series of the server.
            run.update_config({k: v for k, v in parent.config.items() if k in MEANING_KEYS})
            method = method_of(series)
            if method in DRAFTER_KINDS:  # a drafter's name, not a series such as "responses"
                run.update_config({"spec_method_raw": series, "spec_method": method})
            self.runs.append(run)
            self.by_key[key] = run
        return run


__all__ = ["EXTRA_PREFIX", "Held", "SeriesRuns", "holding", "method_of", "typed_groups"]
