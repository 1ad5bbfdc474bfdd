"""``GET /connectors/{c}/status`` latency, measured with wrk, while 10 tasks stream records.

A real daemon (in this process, on uvloop, with its own REST server and access log) runs an
``EchoSink`` connector with ``tasks.max=10`` on a 10-partition topic; a producer in another
process writes ``--rate`` records per second. wrk polls the status endpoint with 1 and with 4
connections, first with the connector idle, then while records stream; the records the tasks
consumed during each window come from the connector group's committed offsets; the event-loop
lag comes from the daemon's own monitor. Numbers are printed, never asserted. On a shared
machine the loop's lag (CPU contention) bounds the p99: ``--nice -10`` (root) runs the daemon,
wrk and the producer ahead of other work, as on a host of their own.

    .venv/bin/python bench/rest_status_bench.py                  # starts its own broker
    .venv/bin/python bench/rest_status_bench.py --bootstrap 127.0.0.1:9092 --rate 20000

Needs wrk (``apt-get install wrk``) and Java (for the broker and the daemon's executors).
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import re
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

from aiokafka.admin import AIOKafkaAdminClient  # noqa: E402
from aiokafka.errors import KafkaError  # noqa: E402
from support.kafka import KafkaBroker, create_topic, unique_topic_name  # noqa: E402

from daemon.config import Mode, parse_worker  # noqa: E402
from daemon.daemon import Daemon  # noqa: E402
from daemon.launch import LaunchPlan  # noqa: E402

CONNECTOR = "bench"
TASKS = 10
PRODUCER = r"""
import asyncio, sys, time
from aiokafka import AIOKafkaProducer
async def main(bootstrap, topic, rate, seconds):
    p = AIOKafkaProducer(bootstrap_servers=bootstrap, linger_ms=20, acks=1)
    await p.start()
    value = b"v" * 100
    sent, began = 0, time.monotonic()
    try:
        while time.monotonic() - began < seconds:
            due = int((time.monotonic() - began) * rate)
            futures = [await p.send(topic, value=value) for _ in range(due - sent)]
            sent = due
            for f in futures:
                await f
            await asyncio.sleep(0.01)
    finally:
        await p.stop()
asyncio.run(main(sys.argv[1], sys.argv[2], float(sys.argv[3]), float(sys.argv[4])))
"""


def worker_properties(bootstrap: str, state_dir: Path) -> dict[str, str]:
    return {
        "bootstrap.servers": bootstrap,
        "listeners": "http://127.0.0.1:0",
        "state.dir": str(state_dir),
        "key.converter": "bytearray",
        "value.converter": "bytearray",
        "offset.flush.interval.ms": "1000",
        "executor.pool.size": "1",
        "executor.pool.spares": "0",
        "executor.spark.master": "local[1]",
        "executor.spark.conf.spark.ui.enabled": "false",
        "executor.spark.conf.spark.driver.memory": "512m",
    }


async def committed(bootstrap: str, deadline_s: float = 60.0) -> int:
    """Records the connector's group has committed, over every partition."""
    end = time.monotonic() + deadline_s
    while True:
        admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
        await admin.start()
        try:
            offsets = await admin.list_consumer_group_offsets(f"connect-{CONNECTOR}")
            return sum(max(0, meta.offset) for meta in offsets.values())
        except KafkaError:  # the coordinator is still being elected on a fresh broker
            if time.monotonic() > end:
                raise
        finally:
            await admin.close()
        await asyncio.sleep(0.5)


async def wrk(url: str, connections: int, seconds: int) -> dict[str, float]:
    process = await asyncio.create_subprocess_exec(
        "wrk", "-t1", f"-c{connections}", f"-d{seconds}s", "--latency", url,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
    )  # fmt: skip
    out, _ = await process.communicate()
    text = out.decode()
    result: dict[str, float] = {}
    for pct in ("50", "90", "99"):
        match = re.search(rf"^\s+{pct}%\s+([\d.]+)(us|ms|s)\s*$", text, re.M)
        if match is None:
            raise RuntimeError(f"cannot read wrk's {pct}% line:\n{text}")
        value, unit = float(match.group(1)), match.group(2)
        result[f"p{pct}"] = value / 1000 if unit == "us" else value * 1000 if unit == "s" else value
    rps = re.search(r"Requests/sec:\s+([\d.]+)", text)
    errors = re.search(r"Non-2xx or 3xx responses: (\d+)", text)
    result["rps"] = float(rps.group(1)) if rps else 0.0
    result["non2xx"] = float(errors.group(1)) if errors else 0.0
    return result


async def wait_running(worker: Any, deadline_s: float = 120.0) -> None:
    end = time.monotonic() + deadline_s
    while True:
        status = worker.connector_status(CONNECTOR)
        states = {t.state.value for t in status.tasks}
        if len(status.tasks) == TASKS and states == {"RUNNING"}:
            return
        if time.monotonic() > end:
            raise RuntimeError(f"tasks not running after {deadline_s} s: {status}")
        await asyncio.sleep(0.2)


async def measure(
    label: str, url: str, daemon: Daemon, bootstrap: str, seconds: int, rows: list[list[str]]
) -> None:
    for connections in (1, 4):
        before, t0 = await committed(bootstrap), time.monotonic()
        daemon.lag.reset()
        result = await wrk(url, connections, seconds)
        lag = daemon.lag.stats()
        consumed = (await committed(bootstrap) - before) / (time.monotonic() - t0)
        rows.append(
            [
                label,
                str(connections),
                f"{result['rps']:.0f}",
                f"{result['p50']:.2f}",
                f"{result['p90']:.2f}",
                f"{result['p99']:.2f}",
                f"{consumed:.0f}",
                f"{lag.p99 * 1000:.1f}",
                f"{lag.max * 1000:.1f}",
                f"{result['non2xx']:.0f}",
            ]
        )


async def run(args: argparse.Namespace, bootstrap: str, workdir: Path) -> list[list[str]]:
    topic = unique_topic_name("rest-bench")
    await create_topic(bootstrap, topic, partitions=TASKS)
    worker_config = parse_worker(worker_properties(bootstrap, workdir), mode=Mode.STANDALONE)
    daemon = Daemon(
        LaunchPlan(mode=Mode.STANDALONE, worker=worker_config.config),
        handle_signals=False,
    )
    await daemon.start()
    producer: asyncio.subprocess.Process | None = None
    rows: list[list[str]] = []
    try:
        assert daemon.worker is not None and daemon.rest_url is not None
        config = {
            "name": CONNECTOR,
            "connector.class": "EchoSink",
            "tasks.max": str(TASKS),
            "topics": topic,
            "log.first.records": "0",
            "log.every.records": "0",
        }
        await daemon.worker.create_connector(CONNECTOR, config)
        await wait_running(daemon.worker)
        url = f"{daemon.rest_url}/connectors/{CONNECTOR}/status"
        await measure("idle", url, daemon, bootstrap, args.duration, rows)
        seconds = args.duration * 2 + 30
        producer = await asyncio.create_subprocess_exec(
            sys.executable, "-c", PRODUCER, bootstrap, topic, str(args.rate), str(seconds)
        )
        await asyncio.sleep(5)  # let the stream reach its pace
        await measure(f"streaming {args.rate}/s", url, daemon, bootstrap, args.duration, rows)
    finally:
        if producer is not None and producer.returncode is None:
            producer.kill()
            await producer.wait()
        await daemon.shutdown()
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--bootstrap", help="an existing broker; default: start one")
    parser.add_argument("--rate", type=int, default=10000, help="records per second produced")
    parser.add_argument("--duration", type=int, default=15, help="seconds per wrk run")
    parser.add_argument("--nice", type=int, default=0, help="niceness change (negative: root)")
    args = parser.parse_args()
    if args.nice:
        os.nice(args.nice)
    if shutil.which("wrk") is None:
        print("wrk is not installed: apt-get install wrk", file=sys.stderr)
        return 69
    workdir = Path(tempfile.mkdtemp(prefix="connectd-rest-bench-"))
    logging.basicConfig(
        filename=workdir / "daemon.log",
        level=logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s %(message)s",
    )
    broker = None if args.bootstrap else KafkaBroker()
    try:
        bootstrap = args.bootstrap or broker.start()  # type: ignore[union-attr]
        import uvloop

        with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
            rows = runner.run(run(args, bootstrap, workdir))
    finally:
        if broker is not None:
            broker.stop()
    header = [
        "load",
        "conns",
        "req/s",
        "p50 ms",
        "p90 ms",
        "p99 ms",
        "records/s",
        "loop lag p99 ms",
        "lag max ms",
        "non-2xx",
    ]
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    for row in [header, *rows]:
        print("  ".join(cell.rjust(w) for cell, w in zip(row, widths, strict=True)))
    load = os.getloadavg()[0]
    print(f"(wrk -t1 -cN -d{args.duration}s; load average {load:.1f} on {os.cpu_count()} CPUs;")
    print(f" loop lag: the daemon's own LoopLag monitor; daemon log: {workdir / 'daemon.log'})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
