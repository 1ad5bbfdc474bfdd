"""The REST API over the real worker: a broker, real executors, the hang demo's hung task.

The daemon runs in-process with its own REST server (``daemon.rest``) on a free port. The hang
demo's calls (tests/fixtures/hang-demo) are replayed as curl sends them: the task blocks in its
executor, ``POST .../tasks/0/restart`` answers 204 only after that executor's whole process tree
is gone (reaped, not a zombie) and a new incarnation runs, which blocks in another executor.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import aiohttp
import psutil
import pytest
from support import hang_demo
from support.daemon import run_daemon, worker_properties  # noqa: F401 (fixture)
from support.fake_worker import Client
from support.kafka import produce

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]
NAME = hang_demo.NAME


async def _until(probe: Any, what: str, deadline_s: float = 120.0) -> Any:
    loop = asyncio.get_running_loop()
    end = loop.time() + deadline_s
    while True:
        value = await probe()
        if value:
            return value
        assert loop.time() < end, f"timed out waiting for {what}"
        await asyncio.sleep(0.1)


def _tree(pid: int) -> dict[int, float]:
    """``pid`` and its descendants, each with its start time (tells a process from a reused pid)."""
    leader = psutil.Process(pid)
    return {p.pid: p.create_time() for p in [leader, *leader.children(recursive=True)]}


def _still_there(tree: dict[int, float]) -> list[str]:
    """Members of ``tree`` that still exist, running or as an unreaped zombie."""
    left = []
    for pid, started in tree.items():
        try:
            process = psutil.Process(pid)
            if process.create_time() == started:
                left.append(f"{pid} ({process.status()})")
        except psutil.NoSuchProcess:
            continue
    return left


async def test_hang_demo_against_the_real_worker(
    run_daemon: Any,  # noqa: F811
    kafka_bootstrap: str,
    kafka_topic: Any,
    tmp_path: Path,
) -> None:
    submit, restart, show = hang_demo.load()
    topic = await kafka_topic(partitions=1)
    props = worker_properties(kafka_bootstrap, tmp_path / "state")
    daemon = await run_daemon(props)
    base = daemon.rest_url
    assert base is not None and base.startswith("http://127.0.0.1:")
    demo = hang_demo.connector()
    demo["config"]["topics"] = topic  # the demo's connector on this test's own topic
    await produce(kafka_bootstrap, topic, [(None, b"record")] * 5)

    async with aiohttp.ClientSession() as raw, aiohttp.ClientSession(base) as session:
        answer = await hang_demo.send(raw, base, submit, data=json.dumps(demo).encode())
        hang_demo.check(submit, *answer)
        client = Client(session)

        async def blocked_in_executor(after: int = -1) -> dict[str, Any] | None:
            task = (await client.get(f"/connectors/{NAME}/tasks/0/status")).json
            blocked = task.get("executor_pid") and task["incarnation"] > after
            return task if blocked else None

        before = await _until(blocked_in_executor, "task 0 to block in an executor")
        assert before["state"] == "RUNNING"
        old_pid = before["executor_pid"]
        assert isinstance(old_pid, int) and isinstance(before["incarnation"], int)
        old_tree = _tree(old_pid)

        hang_demo.check(restart, *await hang_demo.send(raw, base, restart))
        # The 204 comes after the reap: nothing of the old tree may remain, not even a zombie.
        assert _still_there(old_tree) == []
        after = await _until(
            lambda: blocked_in_executor(before["incarnation"]),
            "the new incarnation to block in an executor of its own",
        )
        assert after["state"] == "RUNNING"
        assert (
            isinstance(after["incarnation"], int) and after["incarnation"] > before["incarnation"]
        )
        new_pid = after["executor_pid"]
        assert isinstance(new_pid, int) and new_pid != old_pid and new_pid not in old_tree
        assert psutil.Process(new_pid).status() != psutil.STATUS_ZOMBIE

        shown = hang_demo.check(show, *await hang_demo.send(raw, base, show))
        expected = json.loads(json.dumps(show.json))
        expected["config"]["topics"] = topic
        assert shown == expected
        assert list(shown) == list(expected) == ["name", "config", "tasks", "type"]

        # the rest of the lifecycle on the real worker
        assert (await client.call("PUT", f"/connectors/{NAME}/stop")).status == 204
        partition = {"kafka_topic": topic, "kafka_partition": 0}
        # A task that never returned from put() has committed nothing.
        assert (await client.get(f"/connectors/{NAME}/offsets")).json == {"offsets": []}
        wanted = {"offsets": [{"partition": partition, "offset": {"kafka_offset": 3}}]}
        altered = await client.call("PATCH", f"/connectors/{NAME}/offsets", json=wanted)
        assert altered.status == 200, altered.text
        assert (await client.get(f"/connectors/{NAME}/offsets")).json == wanted
        assert (await client.call("DELETE", f"/connectors/{NAME}")).status == 204
        assert (await client.get("/connectors")).json == []
