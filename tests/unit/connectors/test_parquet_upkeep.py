"""``commit.log.cleanup.interval.ms``: how often a ParquetSink task cleans its table's commit log
up (a real ``LocalTable``-like log stand-in counts the clean-ups; time is the test's)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from daemon.connectors.parquet import upkeep
from daemon.connectors.parquet.settings import CLEAN_UP_EVERY, ParquetSettings, check_config
from daemon.storage.cleanup import CleanUp


class CountingLog:
    kind = "local"

    def __init__(self) -> None:
        self.runs = 0

    async def clean_up(self, budget: float) -> CleanUp:
        self.runs += 1
        return CleanUp()


async def _commit(up: upkeep.LogUpkeep) -> None:
    up.committed(None, closing=False)
    await asyncio.sleep(0)  # the clean-up runs in a task of its own
    await up.stop()


async def test_the_interval_decides_how_often_the_log_is_cleaned(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    now = [1000.0]
    monkeypatch.setattr(upkeep.time, "monotonic", lambda: now[0])
    log = CountingLog()
    up = upkeep.LogUpkeep(log, "t-0", every=2.0)  # type: ignore[arg-type]
    await _commit(up)  # the first commit cleans at once
    assert log.runs == 1
    now[0] += 1.9
    await _commit(up)
    assert log.runs == 1  # within the interval: no clean-up
    now[0] += 0.2
    await _commit(up)
    assert log.runs == 2
    up.committed(None, closing=True)  # never for a closing flush
    assert log.runs == 2


def _config(**extra: Any) -> dict[str, str]:
    return {"name": "c", "connector.class": "ParquetSink", "topics": "t", "path": "/tmp/x", **extra}


def test_the_setting_is_parsed_and_checked() -> None:
    assert ParquetSettings.from_config(_config()).cleanup_interval == CLEAN_UP_EVERY
    given = _config(**{"commit.log.cleanup.interval.ms": "2000"})
    assert ParquetSettings.from_config(given).cleanup_interval == 2.0
    problems = check_config(_config(**{"commit.log.cleanup.interval.ms": "10"}))
    assert [p.key for p in problems] == ["commit.log.cleanup.interval.ms"], problems
