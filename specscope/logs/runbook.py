"""The server runs of one source, and which of them a record belongs to.

A run starts at the first line, at a process name seen again with a new pid (a restart),
at a process the run has not seen hours after its last line (another server in a paste),
and wherever the line parser says one does (a server start, a benchmark result, a paste
of counters). A run a result block opened takes no server log line after it.
"""

from __future__ import annotations

from collections.abc import Callable

from specscope.logs.grammar import Envelope, far_apart, side_by_side
from specscope.logs.groups import SeriesRuns
from specscope.logs.results import Run


class RunBook:
    """The runs read so far, the one the next record would belong to, and the runs of
    series printed side by side."""

    def __init__(self, before_new: Callable[[], None]) -> None:
        self.runs: list[Run] = []
        self.run: Run | None = None  # None before any line opened one
        # A record still held when a process restarts or a paste begins is the old run's.
        self._before_new = before_new
        self.series = SeriesRuns(self.runs)

    def current(self, line: int, block: bool = False) -> Run:
        """The run a record at ``line`` belongs to. A run that a result block opened
        (bench output) takes no server log lines after it: those are another source."""
        if self.run is None or (self.run.from_block and not block):
            self.new(line)
        assert self.run is not None
        self.run.last_line = max(self.run.last_line, line)
        return self.run

    def new(self, line: int) -> Run:
        self.run = Run(ordinal=len(self.runs) + 1, first_line=line, last_line=line)
        self.runs.append(self.run)
        return self.run

    def own(self, line: int) -> Run:
        """A run of its own for one record, which no other record joins and which leaves
        the run the log is in as it was (an author's statement between a server's lines)."""
        run = Run(ordinal=len(self.runs) + 1, first_line=line, last_line=line)
        run.from_block = True
        self.runs.append(run)
        return run

    def paste_run(self, line: int) -> Run:
        """A run for pasted counters, which takes no record of the log around them."""
        self._before_new()
        run = self.new(line)
        run.from_block = True
        return run

    def see_process(self, env: Envelope, line: int) -> None:
        if env.proc is None or env.pid is None:
            return
        run = self.run
        # Workers (TP ranks) share a name and differ by pid within one server.
        singleton = "Worker" not in env.proc
        other_pid = (
            run is not None
            and singleton
            and run.procs.get(env.proc, env.pid) != env.pid
            and env.pid not in run.side_pids.get(env.proc, ())
        )
        if other_pid and run is not None and side_by_side(run.last_seen, env):
            # A restart takes at least a model load; a new pid logging within seconds of
            # the run's last line is a sibling (`--api-server-count N` gives N API servers
            # that log side by side, each for its engines).
            run.side_pids.setdefault(env.proc, []).append(env.pid)
            other_pid = False
        if run is not None and (
            other_pid or (env.proc not in run.procs and run.procs and far_apart(run.last_seen, env))
        ):
            # The same process name with another pid is a restart; a process the run has
            # not seen, hours after the run's last line, is another server in the paste.
            self._before_new()
            run = self.new(line)
        run = self.current(line)
        run.procs.setdefault(env.proc, env.pid)
        if env.month is not None:
            run.last_seen = env

    def steady(self, proc: str, pid: int) -> bool:
        """Would a line from this process leave the runs as they are (its pid is the run's)?"""
        run = self.run
        if run is None or run.from_block or proc not in run.procs:
            return False
        return run.procs[proc] == pid or pid in run.side_pids.get(proc, ()) or "Worker" in proc


__all__ = ["RunBook"]
