"""The server runs of one source, and which of them a record belongs to.

A run starts at the first line, at a process name seen again with a new pid (a restart),
at a process the run has not seen hours after its last line (another server in a paste),
and wherever the line parser says one does (a server start, a benchmark result, a paste
of counters). A run a result block opened takes no server log line after it.

A change of drafting shape with no restart line between starts one too: a process whose
complete SpecDecoding records print k per-position rates, then another k, is two launches
pasted one after the other with their start-up lines cut (k = 7, then k = 5). What counts
is ``shape_of``: a record cut short, trimmed, or whose list does not sum to its own mean
length says nothing of k; records without a per-position list (SGLang, V1's first form)
say nothing either. Data-parallel engines of one process share k, so k is followed per
process, not per engine. The bulk reader sends every record where k may change to the
line parser (``plain.contradicts``), so both readers split at the same records.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

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
        # Per process: the k its last complete record printed (kept across runs, so that
        # records read in bulk, which never change it, leave it as reading them one by one).
        self._shape: dict[tuple[str | None, int | None], int] = {}

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

    def reshape(self, run: Run, key: tuple[str | None, int | None], k: int, line: int) -> Run:
        """The run a record of process ``key`` that printed ``k`` per-position rates belongs
        to: ``run``, or a new one when the process printed another k before in a run that
        already holds spec records (two launches pasted without their start-up lines)."""
        before, self._shape[key] = self._shape.get(key), k
        if before is None or before == k or run.from_block or not run.counts.get("spec_decode"):
            return run
        new = self.new(line)
        # Lines after this record's first were seen (their process) before it was kept.
        new.last_line = max(line, run.last_line)
        run.last_line = max(run.first_line, min(run.last_line, line - 1))
        # The same process goes on: its lines are the new run's, not a restart's.
        new.procs = dict(run.procs)
        new.side_pids = {name: list(pids) for name, pids in run.side_pids.items()}
        new.last_seen = run.last_seen
        # Its last stats line (the engine a spec line that names none belongs to) goes on too.
        new.last_record = dict(run.last_record)
        if "server" in run.config:
            new.config["server"] = run.config["server"]
        new.config["split"] = (
            f"k went from {before} to {k} at line {line} with no restart line between: "
            "another launch pasted after the first"
        )
        return new

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


# A per-position list sums to its mean length minus one: rates printed to 3 decimals, the
# mean to 2.
SUM_SLACK = 0.006


def shape_of(values: Mapping[str, Any], *, whole: bool) -> int | None:
    """The k a spec record's values show, when they show it: the length of a per-position
    list that sums to the record's own mean length (a list cut short does not), or a k the
    record prints (V0). ``whole``: nothing cut, trimmed or marked the record partial."""
    if not whole:
        return None
    rates = values.get("per_position_rate")
    if isinstance(rates, list) and rates:
        if any(r is None for r in rates):
            return None
        mean = values.get("mean_acceptance_length")
        slack = SUM_SLACK + 0.0005 * len(rates)
        if isinstance(mean, int | float) and abs(1 + sum(rates) - mean) > slack:
            return None
        return len(rates)
    k = values.get("k")
    return k if isinstance(k, int) and not isinstance(k, bool) and k > 0 else None


__all__ = ["SUM_SLACK", "RunBook", "shape_of"]
