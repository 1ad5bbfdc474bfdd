"""Connect's windowed task metrics (``daemon.metrics.sampled``) against Kafka's own metrics
library: the same values recorded at the same times into kafka-clients 4.1's ``Rate``, ``Avg``
and ``Max`` (``Stats.java``, Connect's defaults: 2 samples of 30 s) read the same, through
bursts, gaps longer than the samples' span and reads with nothing recorded."""

from __future__ import annotations

import math
import random

import pytest
from support.connect_jars import connect_libs, kafka_stats

from daemon.metrics.sampled import Sampled

pytestmark = pytest.mark.integration


def _steps() -> list[tuple[str, int, float]]:
    steps: list[tuple[str, int, float]] = [
        ("read", 0, 0),
        ("record", 1_000, 5),
        ("record", 2_000, 7),
        ("read", 3_000, 0),
        ("record", 31_000, 2),
        ("read", 40_000, 0),
        ("read", 61_500, 0),
        ("read", 95_000, 0),
        ("record", 100_000, 1),
        ("read", 100_000, 0),
    ]
    rng = random.Random(35)
    ms = 200_000
    for _ in range(400):  # bursts and lulls, reads in between
        ms += rng.choice((1, 50, 900, 7_000, 29_999, 30_000, 45_000, 61_000))
        if rng.random() < 0.7:
            steps.append(("record", ms, float(rng.randint(0, 5000))))
        else:
            steps.append(("read", ms, 0))
    return steps


def test_rate_avg_and_max_read_as_kafkas_own() -> None:
    steps = _steps()
    theirs = kafka_stats(connect_libs(), steps)
    now = [0.0]
    stat = Sampled(lambda: now[0])
    ours = []
    for op, ms, value in steps:
        now[0] = ms / 1000
        if op == "record":
            stat.record(value)
        else:
            ours.append((stat.rate(), stat.avg(), stat.max()))
    assert len(ours) == len(theirs) > 100
    for i, (mine, kafka) in enumerate(zip(ours, theirs, strict=True)):
        for a, b in zip(mine, kafka, strict=True):
            assert (math.isnan(a) and math.isnan(b)) or a == pytest.approx(b, rel=1e-9), (
                i,
                mine,
                kafka,
            )
