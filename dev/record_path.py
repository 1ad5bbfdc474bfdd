"""Which files of daemon/ one record's path runs through in the daemon process (standalone,
ParquetSink, local table): every Python call made in the context of the connector's task (its
coroutine, and the tasks and threads it starts, which inherit its context variables) while one
record goes from the broker to a committed row (the second record: the first warms the table
and the executor). Issue 28 counted 32 files before its restructuring, 41 after.

Run from a checkout's root with its venv, against a broker (``make kafka-up``):
``.venv/bin/python dev/record_path.py 127.0.0.1:9092``
"""

import asyncio
import os
import sys
import tempfile
import threading
import uuid
from pathlib import Path
from types import FrameType
from typing import Any

ROOT = os.getcwd()
sys.path[:0] = [ROOT, os.path.join(ROOT, "tests")]
from aiokafka import AIOKafkaProducer  # noqa: E402
from aiokafka.admin import AIOKafkaAdminClient, NewTopic  # noqa: E402
from support.daemon import make_plan, worker_properties  # noqa: E402

from daemon.daemon import Daemon  # noqa: E402
from daemon.logs.context import connector_var  # noqa: E402


def committed(table: Path) -> int:
    import pyarrow.dataset as ds

    if not table.is_dir():
        return 0
    try:
        return int(ds.dataset(table, format="parquet").count_rows())
    except (OSError, ValueError):
        return 0


NAME = "trace"
seen: set[str] = set()


def hook(frame: FrameType, event: str, arg: Any) -> None:
    if event == "call" and connector_var.get() == NAME:
        f = frame.f_code.co_filename
        if f.startswith(ROOT + "/daemon/"):
            seen.add(os.path.relpath(f, ROOT + "/daemon"))


async def main(bootstrap: str) -> None:
    tmp = Path(tempfile.mkdtemp())
    topic = f"trace-{uuid.uuid4().hex[:8]}"
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    await admin.create_topics([NewTopic(topic, 1, 1)])
    await admin.close()
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap)
    await producer.start()
    props = worker_properties(bootstrap, tmp / "state")
    props["rest.front.process"] = "false"
    table = tmp / "table"
    conn = {
        "name": NAME,
        "connector.class": "ParquetSink",
        "topics": topic,
        "path": str(table),
        "flush.max.records": "1",
    }
    d = Daemon(make_plan(props, [conn]), handle_signals=False)
    await d.start()
    try:

        async def one(n: int) -> None:
            await producer.send_and_wait(topic, b"record-%d" % n)
            for _ in range(1200):
                if committed(table) >= n:
                    return
                await asyncio.sleep(0.1)
            raise TimeoutError(n)

        await one(1)  # warm: the table exists, the executor is warm
        threading.setprofile(hook)
        sys.setprofile(hook)
        await one(2)
        sys.setprofile(None)
        threading.setprofile(None)
    finally:
        await producer.stop()
        await d.shutdown()
    for f in sorted(seen):
        print(f)
    print(len(seen), "files")


asyncio.run(main(sys.argv[1]))
