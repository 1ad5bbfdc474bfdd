"""The REST API over the real worker: a broker, real executors, the seed's hung task.

The daemon runs in-process with its own REST server (``daemon.rest``) on a free port. The hang
demo is replayed with curl: the task blocks in its executor, ``POST .../tasks/0/restart``
answers 204 only after that executor's whole process tree is gone and a new incarnation runs.
"""

from __future__ import annotations

import asyncio
import json
import shutil
from pathlib import Path
from typing import Any

import aiohttp
import psutil
import pytest
from support.daemon import run_daemon, worker_properties  # noqa: F401 (fixture)
from support.fake_worker import Client
from support.kafka import produce

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]
NAME = "sink-hang-connector"


async def _until(probe: Any, what: str, deadline_s: float = 120.0) -> Any:
    loop = asyncio.get_running_loop()
    end = loop.time() + deadline_s
    while True:
        value = await probe()
        if value:
            return value
        assert loop.time() < end, f"timed out waiting for {what}"
        await asyncio.sleep(0.1)


async def _curl(cwd: Path, *args: str) -> tuple[int, str]:
    process = await asyncio.create_subprocess_exec(
        "curl", "-sS", "-m", "120", "-w", "\n%{http_code}", *args,
        cwd=cwd, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    out, err = await asyncio.wait_for(process.communicate(), timeout=150)
    assert process.returncode == 0, err.decode()
    body, _, code = out.decode().rpartition("\n")
    return int(code), body


async def test_hang_demo_against_the_real_worker(
    run_daemon: Any,  # noqa: F811
    kafka_bootstrap: str,
    kafka_topic: Any,
    tmp_path: Path,
) -> None:
    if shutil.which("curl") is None:
        pytest.skip("curl is not installed (apt-get install curl)")
    topic = await kafka_topic(partitions=1)
    props = worker_properties(kafka_bootstrap, tmp_path / "state")
    daemon = await run_daemon(props)
    base = daemon.rest_url
    assert base is not None and base.startswith("http://127.0.0.1:")
    demo = {
        "name": NAME,
        "config": {"connector.class": "HangSink", "tasks.max": "1", "topics": topic},
    }
    (tmp_path / "sink-hang-connector.json").write_text(json.dumps(demo))
    code, body = await _curl(
        tmp_path,
        "-H", "Content-Type: application/json", "-X", "POST",
        "--data", "@sink-hang-connector.json", f"{base}/connectors",
    )  # fmt: skip
    assert code == 201, body
    await produce(kafka_bootstrap, topic, [(None, b"record")] * 5)

    async with aiohttp.ClientSession(base) as session:
        client = Client(session)

        async def blocked() -> dict[str, Any] | None:
            task = (await client.get(f"/connectors/{NAME}/tasks/0/status")).json
            return task if task.get("executor_pid") else None

        before = await _until(blocked, "task 0 to block in an executor")
        assert before["state"] == "RUNNING"
        old_pid = before["executor_pid"]
        old_tree = [old_pid, *(p.pid for p in psutil.Process(old_pid).children(True))]

        code, body = await _curl(
            tmp_path, "-X", "POST", f"{base}/connectors/{NAME}/tasks/0/restart"
        )
        assert (code, body) == (204, "")
        assert not [p for p in old_tree if psutil.pid_exists(p) and _alive(p)]
        after = (await client.get(f"/connectors/{NAME}/tasks/0/status")).json
        assert after["incarnation"] > before["incarnation"]
        assert after["executor_pid"] != old_pid

        code, body = await _curl(tmp_path, f"{base}/connectors/{NAME}")
        shown = json.loads(body)
        assert code == 200
        assert list(shown) == ["name", "config", "tasks", "type"]
        assert shown["config"] == {**demo["config"], "name": NAME}
        assert shown["tasks"] == [{"connector": NAME, "task": 0}]

        # the rest of the lifecycle on the real worker
        assert (await client.call("PUT", f"/connectors/{NAME}/stop")).status == 204
        offsets = (await client.get(f"/connectors/{NAME}/offsets")).json
        assert "offsets" in offsets
        body = {"offsets": [{"partition": {"kafka_topic": topic, "kafka_partition": 0},
                             "offset": {"kafka_offset": 3}}]}  # fmt: skip
        altered = await client.call("PATCH", f"/connectors/{NAME}/offsets", json=body)
        assert altered.status == 200, altered.text
        assert (await client.call("DELETE", f"/connectors/{NAME}")).status == 204
        assert (await client.get("/connectors")).json == []


def _alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False
