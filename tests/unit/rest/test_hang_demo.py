"""The hang demo's curl calls (seeds/000_c2a97bc18b0c1d28.txt), replayed with curl itself.

The seed submits ``sink-hang-connector.json``, restarts task 0 of the hung connector, and shows
``GET /connectors/sink-hang-connector`` through ``jq``. The same calls work here, with
connectd's ``HangSink`` as the connector class, and the JSON has the seed's structure (plus
``type``, which Kafka Connect added after 2017). The restart answers 204 once the old
incarnation is gone: never two incarnations of task 0.
"""

from __future__ import annotations

import asyncio
import json
import re
import shutil
from pathlib import Path
from typing import Any

import pytest
from support.fake_worker import FakeWorker, serve

SEED = Path(__file__).resolve().parents[4] / "shared" / "seeds" / "000_c2a97bc18b0c1d28.txt"
SEED_GET = {
    "name": "sink-hang-connector",
    "config": {
        "connector.class": "com.smartertravel.kafka.demo.LatchHangSinkConnector",
        "tasks.max": "1",
        "topics": "some_demo_topic",
        "name": "sink-hang-connector",
    },
    "tasks": [{"connector": "sink-hang-connector", "task": 0}],
}
"""The seed's ``curl .../connectors/sink-hang-connector | jq .`` output."""

SINK_HANG_CONNECTOR_JSON = {
    "name": "sink-hang-connector",
    "config": {"connector.class": "HangSink", "tasks.max": "1", "topics": "some_demo_topic"},
}


def test_the_inline_copy_matches_the_seed() -> None:
    if not SEED.exists():
        pytest.skip(f"the seed documents are not next to this checkout ({SEED})")
    text = SEED.read_text()
    block = re.search(r"\| jq \.\n(\{.*?\n\})\n```", text, re.S)
    assert block is not None
    assert json.loads(block.group(1)) == SEED_GET
    assert "-X POST --data @'sink-hang-connector.json' http://localhost:8083/connectors" in text
    assert (
        "curl -X POST 'http://localhost:8083/connectors/sink-hang-connector/tasks/0/restart'"
        in text
    )


def _structure(value: Any) -> Any:
    """Keys (in order) and nesting, without the values."""
    if isinstance(value, dict):
        return [(k, _structure(v)) for k, v in value.items()]
    if isinstance(value, list):
        return [_structure(v) for v in value]
    return type(value).__name__


async def _curl(cwd: Path, *args: str) -> tuple[int, str]:
    process = await asyncio.create_subprocess_exec(
        "curl", "-sS", "-w", "\n%{http_code}", *args,
        cwd=cwd, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    out, err = await asyncio.wait_for(process.communicate(), timeout=30)
    assert process.returncode == 0, err.decode()
    body, _, code = out.decode().rpartition("\n")
    return int(code), body


async def test_curl_replay_of_the_hang_demo(tmp_path: Path) -> None:
    if shutil.which("curl") is None:
        pytest.skip("curl is not installed (apt-get install curl)")
    (tmp_path / "sink-hang-connector.json").write_text(json.dumps(SINK_HANG_CONNECTOR_JSON))
    worker = FakeWorker()
    async with serve(worker) as server:
        base = f"http://localhost:{server.bound[0].port}"
        code, body = await _curl(
            tmp_path,
            "-H", "Content-Type: application/json", "-X", "POST",
            "--data", "@sink-hang-connector.json", f"{base}/connectors",
        )  # fmt: skip
        assert code == 201, body
        worker.hang_task("sink-hang-connector", 0)  # the task now blocks, as in the demo
        before = worker.task_status("sink-hang-connector", 0).incarnation

        code, body = await _curl(
            tmp_path, "-X", "POST", f"{base}/connectors/sink-hang-connector/tasks/0/restart"
        )
        assert (code, body) == (204, "")

        code, body = await _curl(tmp_path, f"{base}/connectors/sink-hang-connector")
        assert code == 200
        shown = json.loads(body)

    expected = {**SEED_GET, "config": {**SEED_GET["config"], "connector.class": "HangSink"}}
    assert {k: v for k, v in shown.items() if k != "type"} == expected
    assert _structure({k: v for k, v in shown.items() if k != "type"}) == _structure(SEED_GET)
    assert shown["type"] == "sink"
    after = worker.task_status("sink-hang-connector", 0).incarnation
    assert after is not None and before is not None and after > before
    assert worker.live_incarnations[("sink-hang-connector", 0)] == {after}
    assert worker.max_live_seen == 1
