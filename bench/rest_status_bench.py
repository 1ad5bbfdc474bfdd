"""``GET /connectors/{c}/status`` latency, measured with wrk, while 10 tasks stream records.

A real daemon (in this process, on uvloop, with its own REST server and access log) runs an
``EchoSink`` connector with ``tasks.max=10`` on a 10-partition topic; a producer in another
process writes ``--rate`` records per second. wrk polls the status endpoint with 1 and with 4
connections, first with the connector idle, then while records stream: once *paced* (each
connection waits ``--pace-ms``, default 10 ms, between a response and its next request — a
monitoring poller, 100 requests/s per connection), once *flat out* (wrk's default: the next
request as soon as the last answer came, which saturates the loop and shares the 2 cores with
wrk itself, the broker and the producer, so it measures throughput more than latency). The
records the tasks consumed during each window come from the connector group's committed offsets;
the event-loop lag comes from the daemon's own monitor; garbage-collector pauses (any thread: a
collection holds the GIL, so the loop waits for it too) from ``gc.callbacks``. Numbers are
printed, never asserted. On a shared machine the loop's lag (CPU contention) bounds the p99:
``--nice -10`` (root) runs the daemon, wrk and the producer ahead of other work, as on a host of
their own.

    .venv/bin/python bench/rest_status_bench.py                  # starts its own broker
    .venv/bin/python bench/rest_status_bench.py --bootstrap 127.0.0.1:9092 --rate 20000
    QUICK=1 .venv/bin/python bench/rest_status_bench.py          # 5 s per wrk run
    .venv/bin/python bench/rest_status_bench.py --profile        # + what blocked the loop

``--profile`` runs the daemon on asyncio's own loop (uvloop cannot time its callbacks) and
lists every loop callback that ran longer than ``--slow-ms`` (default 2 ms), by the coroutine
it resumed, with count, total and maximum. ``--switch-interval`` and ``--no-gc-freeze`` override
the daemon's own interpreter settings, for before/after comparisons. The daemon is set up as
``connectd`` sets it up (``Daemon.run``): its logging (lines written by a thread) and a frozen
start-up heap.

Needs wrk (``apt-get install wrk``) and Java (for the broker and the daemon's executors).
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import os
import re
import shutil
import sys
import tempfile
import threading
import time
import urllib.request
from collections import defaultdict
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

from aiokafka.admin import AIOKafkaAdminClient  # noqa: E402
from aiokafka.errors import KafkaError  # noqa: E402
from support.kafka import KafkaBroker, create_topic, unique_topic_name  # noqa: E402

from daemon.config import Mode, parse_worker  # noqa: E402
from daemon.config.plan import LaunchPlan  # noqa: E402
from daemon.daemon import Daemon  # noqa: E402
from daemon.logs import setup_logging  # noqa: E402

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


def worker_properties(bootstrap: str, state_dir: Path, front: bool) -> dict[str, str]:
    return {
        "bootstrap.servers": bootstrap,
        "rest.front.process": str(front).lower(),
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


class GcPauses:
    """Durations of the cyclic garbage collector's runs, by generation and thread."""

    def __init__(self) -> None:
        self._started: dict[int, float] = {}
        self.pauses: list[tuple[int, bool, float]] = []  # generation, on the loop thread, s
        self._main = threading.main_thread().ident

    def __call__(self, phase: str, info: dict[str, Any]) -> None:
        ident = threading.get_ident()
        if phase == "start":
            self._started[ident] = time.perf_counter()
        elif ident in self._started:
            elapsed = time.perf_counter() - self._started.pop(ident)
            self.pauses.append((int(info["generation"]), ident == self._main, elapsed))

    def reset(self) -> None:
        self.pauses.clear()

    def summary(self) -> str:
        parts = []
        for gen in (0, 1, 2):
            times = [s for g, _, s in self.pauses if g == gen]
            if times:
                parts.append(f"gen{gen} {len(times)}x max {max(times) * 1000:.1f} ms")
        return ", ".join(parts) or "none"


class SlowCallbacks:
    """Times every callback of asyncio's own event loop (``Handle._run``); those longer than
    ``threshold`` seconds are kept by what they ran: a task step is named by the chain of
    coroutines it resumed (innermost last), anything else by its callback."""

    def __init__(self, threshold: float) -> None:
        self.threshold = threshold
        self.slow: dict[str, list[float]] = defaultdict(list)
        self._original = asyncio.events.Handle._run

    def install(self) -> None:
        original, slow, threshold, describe = self._original, self.slow, self.threshold, _describe

        def timed_run(handle: asyncio.Handle) -> None:
            began = time.perf_counter()
            original(handle)
            elapsed = time.perf_counter() - began
            if elapsed > threshold:
                slow[describe(handle)].append(elapsed)

        asyncio.events.Handle._run = timed_run  # type: ignore[method-assign]

    def uninstall(self) -> None:
        asyncio.events.Handle._run = self._original  # type: ignore[method-assign]

    def reset(self) -> None:
        self.slow.clear()

    def report(self, top: int = 12) -> list[str]:
        ranked = sorted(self.slow.items(), key=lambda kv: -sum(kv[1]))[:top]
        return [
            f"  {len(t):5d}x  total {sum(t) * 1000:7.1f} ms  max {max(t) * 1000:6.1f} ms  {name}"
            for name, t in ranked
        ]


def _describe(handle: asyncio.Handle) -> str:
    callback = getattr(handle, "_callback", None)
    owner = getattr(callback, "__self__", None)
    if isinstance(owner, asyncio.Task):
        names, coro, depth = [], owner.get_coro(), 0
        while coro is not None and depth < 8:
            names.append(getattr(coro, "__qualname__", type(coro).__name__))
            coro = getattr(coro, "cr_await", None) or getattr(coro, "gi_yieldfrom", None)
            depth += 1
        return "task " + " > ".join(names)
    return f"callback {getattr(callback, '__qualname__', repr(callback))}"


def thread_cpu() -> tuple[float, float]:
    """CPU seconds used so far by this process's main thread (the event loop) and by all its
    other threads (to_thread workers, Arrow's pool, ...)."""
    tick = os.sysconf("SC_CLK_TCK")
    main, others = 0.0, 0.0
    for tid in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{tid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:  # the thread ended
            continue
        used = (int(fields[11]) + int(fields[12])) / tick
        if int(tid) == os.getpid():
            main += used
        else:
            others += used
    return main, others


def process_cpu(pid: int | None) -> float:
    """CPU seconds used so far by process ``pid`` (0 when there is none)."""
    if pid is None:
        return 0.0
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


PEER = r"""
import sys
import uvloop
from aiohttp import web
body = open(sys.argv[2], "rb").read()
async def status(request):
    return web.Response(body=body, content_type="application/json", charset="utf-8")
app = web.Application()
app.router.add_get("/status", status)
web.run_app(app, host="127.0.0.1", port=int(sys.argv[1]), access_log=None, print=None,
            loop=uvloop.new_event_loop())
"""


def _fetch(url: str) -> bytes:
    with urllib.request.urlopen(url, timeout=10) as answer:
        body: bytes = answer.read()
        return body


async def start_peer(body: bytes, workdir: Path) -> tuple[asyncio.subprocess.Process, str]:
    """The peer: a bare aiohttp app on uvloop in a process of its own, answering ``body``."""
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    (workdir / "peer-body.json").write_bytes(body)
    peer = await asyncio.create_subprocess_exec(
        sys.executable, "-c", PEER, str(port), str(workdir / "peer-body.json")
    )
    url = f"http://127.0.0.1:{port}/status"
    end = time.monotonic() + 30
    while True:
        try:
            _, writer = await asyncio.open_connection("127.0.0.1", port)
            writer.close()
            await writer.wait_closed()
            return peer, url
        except OSError:
            if time.monotonic() > end or peer.returncode is not None:
                peer.kill()
                await peer.wait()
                raise RuntimeError("the peer app did not start") from None
            await asyncio.sleep(0.05)


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


def _ms(value: str, unit: str) -> float:
    return (
        float(value) / 1000
        if unit == "us"
        else float(value) * 1000
        if unit == "s"
        else float(value)
    )


async def wrk(
    url: str, connections: int, seconds: int, pace_ms: int | None = None
) -> dict[str, float]:
    """wrk's numbers; ``pace_ms``: each connection waits that long between a response and its
    next request (wrk's Lua ``delay()``), else requests go flat out."""
    script: list[str] = []
    if pace_ms:
        path = Path(tempfile.mkdtemp(prefix="connectd-wrk-")) / "pace.lua"
        path.write_text(f"function delay()\n  return {int(pace_ms)}\nend\n")
        script = ["-s", str(path)]
    process = await asyncio.create_subprocess_exec(
        "wrk", "-t1", f"-c{connections}", f"-d{seconds}s", "--latency", *script, url,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
    )  # fmt: skip
    out, _ = await process.communicate()
    text = out.decode()
    result: dict[str, float] = {}
    for pct in ("50", "90", "99"):
        match = re.search(rf"^\s+{pct}%\s+([\d.]+)(us|ms|s)\s*$", text, re.M)
        if match is None:
            raise RuntimeError(f"cannot read wrk's {pct}% line:\n{text}")
        result[f"p{pct}"] = _ms(match.group(1), match.group(2))
    # "    Latency   avg unit   stdev unit   max unit   +/- stdev"
    stats = re.search(
        r"^\s+Latency\s+[\d.]+(?:us|ms|s)\s+[\d.]+(?:us|ms|s)\s+([\d.]+)(us|ms|s)", text, re.M
    )
    if stats is None:
        raise RuntimeError(f"cannot read wrk's Latency line:\n{text}")
    result["max"] = _ms(stats.group(1), stats.group(2))
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


class Bench:
    def __init__(self, args: argparse.Namespace, bootstrap: str) -> None:
        self.args = args
        self.bootstrap = bootstrap
        self.rows: list[list[str]] = []
        self.notes: list[str] = []
        self.gc = GcPauses()
        self.slow = SlowCallbacks(args.slow_ms / 1000) if args.profile else None

    async def measure(
        self,
        serving: str,
        load: str,
        url: str,
        daemon: Daemon,
        *,
        front_pid: int | None = None,
        runs: list[tuple[str, int, int | None]] | None = None,
    ) -> None:
        if runs is None:
            runs = [(f"{load}, paced", c, self.args.pace_ms) for c in (1, 4)]
            runs += [(f"{load}, flat out", c, None) for c in (1, 4)]
        for label, connections, pace in runs:
            before, t0 = await committed(self.bootstrap), time.monotonic()
            daemon.lag.reset()
            self.gc.reset()
            cpu0, front0 = thread_cpu(), process_cpu(front_pid)
            if self.slow is not None:
                self.slow.reset()
            result = await wrk(url, connections, self.args.duration, pace)
            lag = daemon.lag.stats()
            gc_line = self.gc.summary()
            cpu1, front1 = thread_cpu(), process_cpu(front_pid)
            spent = time.monotonic() - t0
            loop_cpu, other_cpu = ((b - a) / spent * 100 for a, b in zip(cpu0, cpu1, strict=True))
            slow = self.slow.report() if self.slow is not None else []
            consumed = (await committed(self.bootstrap) - before) / (time.monotonic() - t0)
            self.rows.append(
                [
                    serving,
                    label,
                    str(connections),
                    f"{result['rps']:.0f}",
                    f"{result['p50']:.2f}",
                    f"{result['p99']:.2f}",
                    f"{result['max']:.2f}",
                    f"{consumed:.0f}",
                    f"{lag.p99 * 1000:.1f}",
                    f"{lag.max * 1000:.1f}",
                    f"{result['non2xx']:.0f}",
                ]
            )
            front_note = (
                f", front process {(front1 - front0) / spent * 100:.0f}%"
                if front_pid is not None
                else ""
            )
            self.notes.append(
                f"{serving}, {label}, {connections} conn: daemon CPU loop thread {loop_cpu:.0f}%,"
                f" other threads {other_cpu:.0f}%{front_note} (of one core); gc pauses {gc_line}"
            )
            if self.slow is not None:
                self.notes.append(
                    f"  loop callbacks over {self.args.slow_ms:g} ms: "
                    f"{sum(len(t) for t in self.slow.slow.values())}"
                )
                self.notes.extend(slow)

    async def run(self, workdir: Path, front: bool, peer: bool) -> None:
        args = self.args
        serving = "front process" if front else "worker loop"
        topic = unique_topic_name("rest-bench")
        await create_topic(self.bootstrap, topic, partitions=TASKS)
        state = workdir / ("front" if front else "loop")
        worker_config = parse_worker(
            worker_properties(self.bootstrap, state, front), mode=Mode.STANDALONE
        )
        daemon = Daemon(
            LaunchPlan(mode=Mode.STANDALONE, worker=worker_config.config),
            handle_signals=False,
        )
        await daemon.start()
        # Overrides of the daemon's own interpreter settings, for before/after comparisons.
        if args.switch_interval is not None:
            sys.setswitchinterval(args.switch_interval)
        if not args.no_gc_freeze:  # as Daemon.run does
            gc.collect()
            gc.freeze()
        self.notes.append(
            f"{serving}: switch interval {sys.getswitchinterval() * 1000:g} ms, gc thresholds"
            f" {gc.get_threshold()}, frozen objects {gc.get_freeze_count()},"
            f" loop {type(asyncio.get_running_loop()).__module__}"
        )
        gc.callbacks.append(self.gc)
        if self.slow is not None:
            self.slow.install()
        producer: asyncio.subprocess.Process | None = None
        peer_process: asyncio.subprocess.Process | None = None
        front_pid = getattr(daemon.rest, "pid", None)
        try:
            assert daemon.herder is not None and daemon.rest_url is not None
            config = {
                "name": CONNECTOR,
                "connector.class": "EchoSink",
                "tasks.max": str(TASKS),
                "topics": topic,
                "log.first.records": "0",
                "log.every.records": "0",
            }
            await daemon.herder.create_connector(CONNECTOR, config)
            await wait_running(daemon.herder)
            url = f"{daemon.rest_url}/connectors/{CONNECTOR}/status"
            if not args.streaming_only:
                await self.measure(serving, "idle", url, daemon, front_pid=front_pid)
            # Long enough for every run of this mode (4) and the peer's (2), with their set-up.
            seconds = (args.duration + 10) * 6 + 30
            producer = await asyncio.create_subprocess_exec(
                sys.executable, "-c", PRODUCER, self.bootstrap, topic, str(args.rate), str(seconds)
            )
            await asyncio.sleep(5)  # let the stream reach its pace
            load = f"streaming {args.rate}/s"
            await self.measure(serving, load, url, daemon, front_pid=front_pid)
            if peer:
                body = await asyncio.to_thread(_fetch, url)
                peer_process, peer_url = await start_peer(body, workdir)
                runs = [(f"{load}, paced", 1, args.pace_ms), (f"{load}, flat out", 1, None)]
                await self.measure("peer: bare aiohttp", load, peer_url, daemon, runs=runs)
        finally:
            if peer_process is not None and peer_process.returncode is None:
                peer_process.kill()
                await peer_process.wait()
            if self.slow is not None:
                self.slow.uninstall()
            gc.callbacks.remove(self.gc)
            if producer is not None and producer.returncode is None:
                producer.kill()
                await producer.wait()
            await daemon.shutdown()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--bootstrap", help="an existing broker; default: start one")
    parser.add_argument("--rate", type=int, default=10000, help="records per second produced")
    parser.add_argument("--duration", type=int, help="seconds per wrk run (15; QUICK=1: 5)")
    parser.add_argument("--quick", action="store_true", help="5 s per wrk run (or QUICK=1)")
    parser.add_argument("--nice", type=int, default=0, help="niceness change (negative: root)")
    parser.add_argument(
        "--profile", action="store_true", help="asyncio's loop, slow callbacks listed"
    )
    parser.add_argument("--slow-ms", type=float, default=2.0, help="slow callback, ms")
    parser.add_argument("--streaming-only", action="store_true", help="skip the idle runs")
    parser.add_argument(
        "--switch-interval", type=float, help="override sys.setswitchinterval (seconds)"
    )
    parser.add_argument("--no-gc-freeze", action="store_true", help="no gc.freeze() after start-up")
    parser.add_argument(
        "--pace-ms", type=int, default=10, help="paced runs: wait between a response and the next"
    )
    parser.add_argument(
        "--rest-front",
        choices=("process", "loop", "both"),
        default="both",
        help="serve REST from the front process (rest.front.process=true), the worker's loop, or"
        " each in turn (default)",
    )
    parser.add_argument("--no-peer", action="store_true", help="skip the bare aiohttp peer")
    args = parser.parse_args()
    quick = args.quick or os.environ.get("QUICK", "") not in ("", "0")
    if args.duration is None:
        args.duration = 5 if quick else 15
    if args.nice:
        os.nice(args.nice)
    if shutil.which("wrk") is None:
        print("wrk is not installed: apt-get install wrk", file=sys.stderr)
        return 69
    workdir = Path(tempfile.mkdtemp(prefix="connectd-rest-bench-"))
    log_file = open(workdir / "daemon.log", "a", encoding="utf-8")  # noqa: SIM115 (till exit)
    setup_logging("INFO", "text", stream=log_file)
    broker = None if args.bootstrap else KafkaBroker()
    bench: Bench | None = None
    try:
        bootstrap = args.bootstrap or broker.start()  # type: ignore[union-attr]
        bench = Bench(args, bootstrap)
        modes = {"process": [True], "loop": [False], "both": [True, False]}[args.rest_front]
        for index, front in enumerate(modes):
            run = bench.run(workdir, front, peer=index == 0 and not args.no_peer)
            if args.profile:
                asyncio.run(run)
            else:
                import uvloop

                with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
                    runner.run(run)
    finally:
        if broker is not None:
            broker.stop()
    header = [
        "serving",
        "load",
        "conns",
        "req/s",
        "p50 ms",
        "p99 ms",
        "max ms",
        "records/s",
        "loop lag p99 ms",
        "lag max ms",
        "non-2xx",
    ]
    rows = bench.rows
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    for row in [header, *rows]:
        print("  ".join(cell.rjust(w) for cell, w in zip(row, widths, strict=True)))
    load = os.getloadavg()[0]
    print(f"(wrk -t1 -cN -d{args.duration}s; load average {load:.1f} on {os.cpu_count()} CPUs;")
    print(f" loop lag: the daemon's own LoopLag monitor; daemon log: {workdir / 'daemon.log'})")
    for note in bench.notes:
        print(note)
    return 0


if __name__ == "__main__":
    sys.exit(main())
