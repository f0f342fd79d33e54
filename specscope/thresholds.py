"""The thresholds detectors judge by (``data/detect.toml``, overridable with ``--config``)
and what methods usually reach (``data/reference.toml``, extendable with ``--reference``)."""

from __future__ import annotations

import tomllib
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
                raise UsageError(f"unknown section [{section}]", path=str(path))
            config[section].update(values)
    return config


def load_reference(path: str | Path | None = None) -> list[dict[str, Any]]:
    entries = list(_data("reference.toml").get("entry", []))
    if path is not None:
        try:
            entries += tomllib.loads(Path(path).read_text(encoding="utf-8")).get("entry", [])
        except (OSError, tomllib.TOMLDecodeError) as exc:
            raise UsageError(f"cannot read the reference ({exc})", path=str(path)) from exc
    return entries
