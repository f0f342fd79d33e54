"""``ts`` is the clock as the source printed it; ``ts_utc`` the same instant in UTC where
it is known: from a pull, or from a log whose container runtime stamped its lines."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import polars as pl
import pytest

import specscope
from specscope.logs.zone import utc_offset
from tests.loglines import START, spec, start, stats
from tests.prom_servers import Misbehaving


def _log(offset: timedelta | None, *, zone: str = "Z", cri: bool = False) -> list[str]:
    """A vLLM log printed at local time START..., stamped by the runtime in UTC (``offset``
    = local minus UTC) or not stamped (None)."""
    lines = [start(1, "m", "eagle", 3)]
    for i in range(1, 7):
        lines += [stats(2 * i), spec(2 * i + 1, 100, [80, 60, 40])]
    if offset is None:
        return lines
    out = []
    for n, line in enumerate(lines):
        local = START + timedelta(seconds=10 * n)
        when = local - offset  # the UTC moment
        shown = when if zone == "Z" else when + timedelta(hours=5, minutes=30)
        text = f"{shown:%Y-%m-%dT%H:%M:%S}.{123456789 + n}{zone}"
        out.append(f"{text} stdout F {line}" if cri else f"{text} {line}")
    return out


def _rows(tmp_path: Path, lines: list[str]) -> pl.DataFrame:
    log = tmp_path / "server.log"
    log.write_text("\n".join(lines) + "\n")
    specscope.ingest([log], store=tmp_path / "s")
    return specscope.open_store(tmp_path / "s").spec_decode.collect()


@pytest.mark.parametrize(
    ("offset", "zone", "cri"),
    [
        (timedelta(hours=2), "Z", False),  # docker logs -t: UTC stamps
        (timedelta(hours=-7), "Z", True),  # a CRI file
        (timedelta(hours=5, minutes=30), "+05:30", False),  # stamps in the local zone
        (timedelta(0), "Z", False),  # a server on UTC
    ],
)
def test_a_stamped_log_has_ts_utc_its_ts_less_the_offset(tmp_path, offset, zone, cri):
    rows = _rows(tmp_path, _log(offset, zone=zone, cri=cri))
    assert rows.height == 6
    assert rows.schema["ts_utc"] == pl.Datetime("ms", "UTC")
    assert rows["ts"].min() >= START  # ts stays as the server printed it
    expected = rows["ts"] - offset
    assert rows["ts_utc"].dt.replace_time_zone(None).to_list() == expected.to_list()


def test_an_unstamped_log_has_no_ts_utc(tmp_path):
    rows = _rows(tmp_path, _log(None))
    assert rows.height == 6 and rows["ts"].null_count() == 0
    assert rows["ts_utc"].null_count() == rows.height


def test_events_and_engine_stats_get_ts_utc_too(tmp_path):
    _rows(tmp_path, _log(timedelta(hours=1)))
    stats_rows = specscope.open_store(tmp_path / "s").engine_stats.collect()
    assert stats_rows.height > 0
    shifted = stats_rows["ts_utc"].dt.replace_time_zone(None)
    assert (stats_rows["ts"] - shifted).unique().to_list() == [timedelta(hours=1)]


def test_a_pull_has_ts_utc_equal_to_its_ts(tmp_path):
    server = Misbehaving("matrix")
    try:
        at = datetime(2026, 11, 24, 12, 0, tzinfo=UTC)
        specscope.pull(server.url, store=tmp_path / "s", since="1m", retries=0, now=lambda: at)
    finally:
        server.stop()
    rows = specscope.open_store(tmp_path / "s").spec_decode.collect()
    assert rows.height > 0
    assert rows["ts_utc"].dt.replace_time_zone(None).to_list() == rows["ts"].to_list()


# -- the offset itself -------------------------------------------------------------------------


def test_offsets_are_quarter_hours_within_two_minutes():
    line = "2026-04-07T15:19:58.5Z (APIServer pid=1) INFO 04-07 17:20:59 [metrics.py:101] x"
    assert utc_offset([line]) == timedelta(hours=2)  # a minute's lag is the runtime's
    late = "2026-04-07T15:14:00Z (APIServer pid=1) INFO 04-07 17:20:59 [metrics.py:101] x"
    assert utc_offset([late]) is None  # 7 minutes off a quarter hour: not an offset


def test_the_year_is_the_one_nearest_the_stamp():
    # Stamped 31 December in UTC, printed 1 January in Tokyo.
    line = "2025-12-31T20:00:01Z (APIServer pid=1) INFO 01-01 05:00:01 [loggers.py:1] x"
    assert utc_offset([line]) == timedelta(hours=9)


def test_sglang_full_dates_read_too():
    line = "2025-07-01T10:34:56.1Z [2025-07-01 12:34:56] Decode batch. #running-req: 1"
    assert utc_offset([line]) == timedelta(hours=2)


def test_the_most_common_offset_wins_and_unstamped_lines_say_nothing():
    lines = ["INFO 04-07 17:20:59 [metrics.py:101] no stamp"] * 10
    lines += ["2026-04-07T15:20:59Z INFO 04-07 17:20:59 [x.py:1] a"] * 3
    lines += ["2026-04-07T16:20:59Z INFO 04-07 17:20:59 [x.py:1] b"]  # after a DST change
    assert utc_offset(lines) == timedelta(hours=2)
    assert utc_offset(lines[:10]) is None
    assert utc_offset(["2026-02-30T15:20:59Z INFO 02-30 17:20:59 [x.py:1] c"]) is None
