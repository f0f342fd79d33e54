"""The thresholds detectors judge by (``data/detect.toml``, overridable with ``--config``)
and what methods usually reach (``data/reference.toml``, extendable with ``--reference``)."""

from __future__ import annotations

import difflib
import tomllib
from collections.abc import Mapping
from importlib import resources
from pathlib import Path
from typing import Any

from specscope.errors import UsageError

Config = dict[str, Any]


def _data(name: str) -> Config:
    text = (resources.files("specscope") / "data" / name).read_text(encoding="utf-8")
    return tomllib.loads(text)


def load_config(path: str | Path | None = None) -> Config:
    """The default thresholds, with those of ``path`` (a TOML file) laid over them."""
    config = _data("detect.toml")
    if path is not None:
        try:
            user = tomllib.loads(Path(path).read_text(encoding="utf-8"))
        except (OSError, tomllib.TOMLDecodeError) as exc:
            raise UsageError(f"cannot read the config ({exc})", path=str(path)) from exc
        for section, values in user.items():
            if not isinstance(values, dict) or section not in config:
                hint = _hint(section, config)
                raise UsageError(f"unknown section [{section}] ({hint})", path=str(path))
            for key, value in values.items():
                _check(section, key, value, config[section], str(path))
            config[section].update(values)
    return config


def _hint(name: str, known: Mapping[str, Any]) -> str:
    close = difflib.get_close_matches(name, list(known), n=1)
    return f"did you mean {close[0]!r}?" if close else f"known: {', '.join(known)}"


def _check(section: str, key: str, value: Any, defaults: Mapping[str, Any], path: str) -> None:
    """A user's setting must name a known key and have the default's kind of value: a
    misspelt key would be ignored without a word, a wrong type would fail at detect."""
    if key not in defaults:
        raise UsageError(f"[{section}] unknown key {key!r} ({_hint(key, defaults)})", path=path)
    default = defaults[key]
    if isinstance(default, bool):
        ok, what = isinstance(value, bool), "true or false"
    elif isinstance(default, int | float):
        ok = isinstance(value, int | float) and not isinstance(value, bool)
        what = "a number"
    elif isinstance(default, str):
        ok, what = isinstance(value, str), "a string"
    else:
        ok, what = True, ""
    if not ok:
        raise UsageError(f"[{section}] {key} must be {what}, not {value!r}", path=path)


def load_reference(path: str | Path | None = None) -> list[dict[str, Any]]:
    entries = list(_data("reference.toml").get("entry", []))
    if path is not None:
        try:
            entries += tomllib.loads(Path(path).read_text(encoding="utf-8")).get("entry", [])
        except (OSError, tomllib.TOMLDecodeError) as exc:
            raise UsageError(f"cannot read the reference ({exc})", path=str(path)) from exc
    return entries
