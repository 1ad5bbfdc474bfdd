"""make demo: sample records into the local broker, then connectd writes them into a table.

Run by `make demo` after `make kafka-up`:

1. a topic ``demo-events`` (3 partitions) gets a few thousand JSON records;
2. ``connectd standalone examples/worker.properties examples/parquet-sink.properties`` starts
   (the two files are copied under ``.demo/`` with this run's broker address, REST port
   (``--rest-port``; ``make demo REST_PORT=N``), and ``.demo/state`` and ``.demo/table`` in place
   of the examples' /tmp/connectd-demo paths);
3. once every record is in the table, the demo prints the row count, a command that queries
   the table with pyarrow, and the REST status URL; connectd keeps running until Ctrl-C
   (``--exit-when-done`` stops it at once), then it is stopped with SIGTERM.

Nothing outlives the demo. SIGTERM to the demo, or the death of whatever ran it (``make``: the
demo takes SIGTERM as its parent-death signal), ends it as Ctrl-C does: connectd gets SIGTERM
and stops cleanly. connectd itself runs with SIGKILL as its parent-death signal: should the demo
be killed outright, connectd dies with it, and with connectd its executors, their JVMs and its
REST front (each has a parent-death signal of its own), freeing the REST port and the state
directory's lock. Not SIGTERM there: the kernel sends a parent-death signal once per thread
that inherited it, and a second SIGTERM forces connectd's exit anyway.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import random
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path

from aiokafka import AIOKafkaProducer
from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from aiokafka.errors import TopicAlreadyExistsError

from daemon.executor.process import set_parent_death_signal

ROOT = Path(__file__).resolve().parents[1]
DEMO = ROOT / ".demo"
TOPIC = "demo-events"


async def make_topic(bootstrap: str, partitions: int) -> None:
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        await admin.create_topics(
            [NewTopic(name=TOPIC, num_partitions=partitions, replication_factor=1)]
        )
    except TopicAlreadyExistsError:
        pass
    finally:
        await admin.close()


async def produce(bootstrap: str, count: int) -> None:
    rng = random.Random(42)
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all", linger_ms=20)
    await producer.start()
    try:
        for i in range(count):
            event = {
                "id": i,
                "user": f"user-{rng.randrange(100):03d}",
                "action": rng.choice(["view", "click", "buy"]),
                "amount": round(rng.random() * 100, 2),
            }
            await producer.send(TOPIC, json.dumps(event).encode(), key=event["user"].encode())
        await producer.flush()
    finally:
        await producer.stop()


def read_properties(path: Path) -> list[tuple[str, str]]:
    """Key/value lines of a simple .properties file (comments and blank lines dropped)."""
    items = []
    for line in path.read_text().splitlines():
        text = line.strip()
        if text and not text.startswith(("#", "!")) and "=" in text:
            key, _, value = text.partition("=")
            items.append((key.strip(), value.strip()))
    return items


def write_properties(path: Path, items: list[tuple[str, str]], note: str) -> Path:
    path.write_text(f"# {note}\n" + "".join(f"{k}={v}\n" for k, v in items))
    return path


def demo_files(bootstrap: str, rest_port: int | None) -> tuple[Path, Path, Path, str]:
    """The example files for this run: (worker, connector, table path, REST URL)."""
    DEMO.mkdir(parents=True, exist_ok=True)
    worker = dict(read_properties(ROOT / "examples" / "worker.properties"))
    worker["bootstrap.servers"] = bootstrap
    worker["state.dir"] = str(DEMO / "state")
    worker.pop("offset.storage.file.filename", None)
    listener = worker.get("listeners", "http://127.0.0.1:8083").split(",")[0]
    if rest_port is not None:
        listener = f"http://127.0.0.1:{rest_port}"
        worker["listeners"] = listener
    connector = dict(read_properties(ROOT / "examples" / "parquet-sink.properties"))
    table = DEMO / "table"
    connector["path"] = str(table)
    connector["flush.interval.ms"] = connector.get("flush.interval.ms", "2000")
    note = "Written by dev/demo.py from examples/; edit the examples, not this file."
    w = write_properties(DEMO / "worker.properties", list(worker.items()), note)
    c = write_properties(DEMO / "parquet-sink.properties", list(connector.items()), note)
    return w, c, table, listener.rstrip("/")


def table_rows(table: Path) -> int:
    import pyarrow.dataset as ds

    if not table.is_dir():
        return 0
    try:
        return int(ds.dataset(table, format="parquet").count_rows())
    except (OSError, ValueError):  # files moving into place: look again
        return 0


def rest_status(url: str) -> dict[str, object] | None:
    try:
        with urllib.request.urlopen(f"{url}/connectors/parquet-sink/status", timeout=2) as r:
            status: dict[str, object] = json.loads(r.read())
            return status
    except OSError:
        return None


def die_with(parent: int, sig: signal.Signals) -> Callable[[], None]:
    """Arms ``sig`` as the caller's parent-death signal (a ``preexec_fn``, or called in this
    process): it comes when ``parent`` dies; if ``parent`` is already gone, exit at once."""

    def arm() -> None:
        set_parent_death_signal(sig)
        if os.getppid() != parent:
            os._exit(1)

    return arm


def _end_as_on_ctrl_c(signum: int, frame: object) -> None:
    # Once: the kernel sends a parent-death signal once per thread that inherited it.
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    sys.exit(128 + signal.SIGTERM)


def main() -> int:
    global DEMO
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bootstrap", default="127.0.0.1:9092")
    parser.add_argument("--records", type=int, default=5000)
    parser.add_argument("--rest-port", type=int, default=None, help="default: the example's")
    parser.add_argument("--timeout", type=float, default=300.0, help="seconds to wait for rows")
    parser.add_argument("--exit-when-done", action="store_true", help="stop once rows are in")
    parser.add_argument("--dir", type=Path, default=DEMO, help="the demo's files (default .demo)")
    args = parser.parse_args()
    DEMO = args.dir.resolve()
    # Run by make (or any parent) that dies: end as on Ctrl-C, which stops connectd too.
    signal.signal(signal.SIGTERM, _end_as_on_ctrl_c)
    die_with(os.getppid(), signal.SIGTERM)()

    asyncio.run(make_topic(args.bootstrap, partitions=3))
    asyncio.run(produce(args.bootstrap, args.records))
    print(f"demo: {args.records} JSON records produced to {TOPIC} on {args.bootstrap}")

    worker, connector, table, url = demo_files(args.bootstrap, args.rest_port)
    already = table_rows(table)
    expected = already + args.records
    command = [sys.executable, "-m", "daemon", "standalone", str(worker), str(connector)]
    print("demo: connectd standalone examples/worker.properties examples/parquet-sink.properties")
    print(f"      (run as: python {' '.join(command[1:])}; log in {DEMO}/connectd.log)")
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    with open(DEMO / "connectd.log", "ab") as log:
        daemon = subprocess.Popen(
            command,
            cwd=ROOT,
            env=env,
            stdout=log,
            stderr=log,
            preexec_fn=die_with(os.getpid(), signal.SIGKILL),
        )
    try:
        deadline = time.monotonic() + args.timeout
        rows = 0
        while (rows := table_rows(table)) < expected:
            if daemon.poll() is not None:
                print(f"demo: connectd exited ({daemon.returncode}); see {DEMO}/connectd.log")
                return 1
            if time.monotonic() > deadline:
                print(f"demo: only {rows} of {expected} rows after {args.timeout:g} s")
                return 1
            time.sleep(1.0)
        status = rest_status(url)
        print(f"demo: {rows} rows in the table {table} (each Kafka offset once)")
        print("demo: query it with pyarrow:")
        print(
            f'  {sys.executable} -c "import pyarrow.dataset as ds; '
            f"t = ds.dataset('{table}', format='parquet').to_table(); "
            "print(t.num_rows); "
            "print(t.group_by('kafka_partition').aggregate([('kafka_offset', 'count_distinct')]))\""
        )
        print(f"demo: REST status: curl {url}/connectors/parquet-sink/status")
        if status is not None:
            print(f"      {json.dumps(status)}")
        if not args.exit_when_done:
            print("demo: connectd keeps running; Ctrl-C stops it (then `make kafka-down`)")
            with contextlib.suppress(KeyboardInterrupt):
                daemon.wait()
        return 0
    finally:
        if daemon.poll() is None:
            daemon.send_signal(signal.SIGTERM)
            try:
                daemon.wait(60)
            except subprocess.TimeoutExpired:
                daemon.kill()
                daemon.wait()
        print("demo: connectd stopped; stop the broker with `make kafka-down`")


if __name__ == "__main__":
    sys.exit(main())
