"""Domain exceptions. The CLI turns each into one line and the exit status it names."""

from __future__ import annotations

from enum import IntEnum


class ExitStatus(IntEnum):
    """Exit statuses of the ``specscope`` command; scripts and cron jobs may rely on them."""

    SUCCESS = 0
    ERROR = 1  # anything unexpected
    USAGE = 2  # bad options (the value click uses)
    INPUT_MISSING = 3  # the file does not exist
    INPUT_NOT_A_FILE = 4  # a directory or other non-regular file
    INPUT_UNREADABLE = 5  # permission denied or an I/O error
    INPUT_EMPTY = 6
    INPUT_BINARY = 7  # not text, or a corrupt gzip stream
    NO_TELEMETRY = 8  # text, but no speculative-decoding telemetry in it
    STORE_ERROR = 9  # the store is unreadable, locked, or of a newer schema
    PROMETHEUS = 10  # a Prometheus or /metrics endpoint failed (what came before is kept)
    FINDINGS = 11  # detect: a finding reached --fail-on


class SpecscopeError(Exception):
    """Base class of every error specscope raises on purpose."""

    exit_status: ExitStatus = ExitStatus.ERROR

    def __init__(self, message: str, *, path: str | None = None, line: int | None = None) -> None:
        self.message = message
        self.path = path
        self.line = line
        super().__init__(self.one_line())

    def one_line(self) -> str:
        where = ""
        if self.path is not None:
            where = f"{self.path}:{self.line}: " if self.line is not None else f"{self.path}: "
        return where + self.message


class UsageError(SpecscopeError):
    """An option, a config file or a run id that cannot be used as given."""

    exit_status = ExitStatus.USAGE


class InputMissingError(SpecscopeError):
    exit_status = ExitStatus.INPUT_MISSING


class InputNotAFileError(SpecscopeError):
    exit_status = ExitStatus.INPUT_NOT_A_FILE


class InputUnreadableError(SpecscopeError):
    exit_status = ExitStatus.INPUT_UNREADABLE


class InputEmptyError(SpecscopeError):
    exit_status = ExitStatus.INPUT_EMPTY


class InputBinaryError(SpecscopeError):
    exit_status = ExitStatus.INPUT_BINARY


class NoTelemetryError(SpecscopeError):
    exit_status = ExitStatus.NO_TELEMETRY


class StoreError(SpecscopeError):
    exit_status = ExitStatus.STORE_ERROR


class PrometheusError(SpecscopeError):
    """A Prometheus server or /metrics endpoint could not be read (unreachable, refused,
    too slow, a malformed answer)."""

    exit_status = ExitStatus.PROMETHEUS


class DefinitionError(SpecscopeError):
    """A format definition under parsers/ is malformed (a bug in specscope, not in the log)."""


__all__ = [
    "DefinitionError",
    "ExitStatus",
    "InputBinaryError",
    "InputEmptyError",
    "InputMissingError",
    "InputNotAFileError",
    "InputUnreadableError",
    "NoTelemetryError",
    "PrometheusError",
    "SpecscopeError",
    "StoreError",
]
