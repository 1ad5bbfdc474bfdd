"""What the two long soaks (``make soak``: standalone, ``runtime/test_soak_faults.py``; cluster,
``cluster/test_cluster_soak.py``) share: the scale and the seed of a run, a producer that keeps a
bounded backlog ahead of the tables, broker outages, and the checks of processes by PID and
start time (a PID reused later is another process)."""

from __future__ import annotations

import asyncio
import contextlib
import os
import random
import time
from collections.abc import Awaitable, Callable, Iterable, Sequence
from typing import Any

import psutil
from aiokafka.errors import KafkaError

from daemon.executor.process import read_stat
from support.daemon import ROOT, wait_until
from support.kafka import KafkaBroker, produce

#: ``CONNECTD_SOAK_SCALE=0.1`` runs a tenth of the records and faults (at least one of each).
SCALE = float(os.environ.get("CONNECTD_SOAK_SCALE", "1"))
CHUNK = 5_000
PAD = b"x" * 188  # 200-byte values: 8 digits, " of ", the pad


def seed() -> int:
    """The run's seed: ``CONNECTD_SOAK_SEED`` replays one."""
    return int(os.environ.get("CONNECTD_SOAK_SEED", time.time_ns() % 100_000))


def report(name: str, lines: Iterable[str]) -> str:
    """The run's figures, printed and kept in ``.cache/soak/<name>.txt``."""
    text = "\n".join(lines)
    print(text)
    out = ROOT / ".cache" / "soak"
    out.mkdir(parents=True, exist_ok=True)
    (out / f"{name}.txt").write_text(text + "\n")
    return text


class Feed:
    """Records ``0 .. records-1`` (key the number, value its 8 digits, `` of `` and a pad) into
    ``topic`` in chunks, never more than ``backlog`` ahead of ``progress()``, nor past
    ``ceiling()`` when given (a soak whose faults take longer than its records would otherwise
    strike after the last record: it holds the feed near the next fault's point until the
    fault struck); ``kafka`` is held while the broker is down (the feed waits), a failed chunk
    is sent again (four times)."""

    def __init__(
        self,
        broker: KafkaBroker,
        topic: str,
        records: int,
        progress: Callable[[], int],
        backlog: int,
        ceiling: Callable[[], int] | None = None,
    ) -> None:
        self.broker, self.topic, self.records = broker, topic, records
        self.progress, self.backlog = progress, backlog
        self.ceiling = ceiling
        self.kafka = asyncio.Lock()
        self.produced = 0

    def _may_produce(self) -> bool:
        if self.ceiling is not None and self.produced >= self.ceiling():
            return False
        return self.progress() >= self.produced - self.backlog

    async def run(self) -> None:
        i = 0
        while i < self.records:
            await wait_until(self._may_produce, 3600, "the tables catching up", interval=0.5)
            n = min(CHUNK, self.records - i)
            chunk = [(b"%d" % k, b"%08d" % k + b" of " + PAD) for k in range(i, i + n)]
            async with self.kafka:
                for attempt in range(5):
                    try:
                        await produce(self.broker.bootstrap, self.topic, chunk)
                        break
                    except KafkaError:
                        if attempt == 4:
                            raise
            i += n
            self.produced = i

    async def outage(self, rng: random.Random) -> str:
        """The broker stopped for 3-15 s (the feed waits meanwhile), then started again."""
        async with self.kafka:
            self.broker.halt()
            down = time.monotonic()
            # The outage's length is what is under test, not a synchronisation.
            await asyncio.sleep(rng.uniform(3.0, 15.0))
            self.broker.resume()
            return f"broker down {time.monotonic() - down:.1f} s"


def running(pid: int, started: float) -> bool:
    """Process ``pid`` that started at ``started`` runs (a zombie does not)."""
    stat = read_stat(pid)
    if stat is None or not stat.running:
        return False
    with contextlib.suppress(psutil.Error):
        return psutil.Process(pid).create_time() == started
    return False


def alive(processes: dict[int, float]) -> dict[int, str]:
    """Those of ``processes`` (pid → start time) still running, with their command lines."""
    found = {}
    for pid, started in processes.items():
        if running(pid, started):
            with contextlib.suppress(psutil.Error):
                found[pid] = " ".join(psutil.Process(pid).cmdline())[:200]
    return found


def tree(pid: int, below: Iterable[int]) -> dict[int, float]:
    """``pid`` and the processes ``below`` it, with their start times."""
    found = {}
    for p in [pid, *below]:
        with contextlib.suppress(psutil.Error):
            found[p] = psutil.Process(p).create_time()
    return found


def rss_mb(pid: int) -> float:
    return float(psutil.Process(pid).memory_info().rss) / 2**20


async def strike_all(
    feed: asyncio.Task[None],
    faults: Sequence[Any],
    strike: Callable[[Any], Awaitable[str]],
) -> None:
    """Each fault of the plan in turn while ``feed`` runs (its failure, if any, ends the run),
    each one's account printed as it is done; then the rest of the feed."""
    for fault in faults:
        if feed.done():
            feed.result()
        print(await strike(fault), flush=True)
    await feed
