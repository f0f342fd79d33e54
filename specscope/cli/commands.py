"""Commands gathered in a module of their own, registered on the app in ``app``'s order.

A module of commands keeps its own ``Commands``; ``app`` adds them, so that the modules
never import the app (and the order of ``specscope --help`` is written in one place).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

Command = TypeVar("Command", bound=Callable[..., Any])


class Commands:
    """The commands of one module, each with the examples its ``--help`` ends with."""

    def __init__(self) -> None:
        self.listed: list[tuple[Callable[..., Any], str]] = []

    def command(self, epilog: str) -> Callable[[Command], Command]:
        def register(function: Command) -> Command:
            self.listed.append((function, epilog))
            return function

        return register


__all__ = ["Commands"]
