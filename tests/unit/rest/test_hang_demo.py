"""The hang demo's REST calls (tests/fixtures/hang-demo), replayed as curl sends them.

The demo submits ``sink-hang-connector.json``, restarts task 0 of the hung connector, and shows
``GET /connectors/sink-hang-connector``. The same calls work here, with connectd's ``HangSink``
as the connector class; the connector shown keeps the demo's keys in the demo's order (plus
``type``, which Kafka Connect added later). The restart answers 204 once the old incarnation is
gone: never two incarnations of task 0.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import aiohttp
from support import hang_demo
from support.fake_worker import FakeWorker, serve

from daemon.config import load_connector

EXAMPLES = Path(__file__).resolve().parents[3] / "examples"


def _structure(value: Any) -> Any:
    """Keys (in order) and nesting, without the values."""
    if isinstance(value, dict):
        return [(k, _structure(v)) for k, v in value.items()]
    if isinstance(value, list):
        return [_structure(v) for v in value]
    return type(value).__name__


def test_the_demo_submits_the_example_connector(tmp_path: Path) -> None:
    """The fixture's connector is the one ``examples/hang-sink.properties`` runs standalone,
    sent as one line (what curl's ``--data @file`` makes of it), with a JSON content type."""
    submit, restart, show = hang_demo.load()
    assert (submit.method, submit.path, submit.status) == ("POST", "/connectors", 201)
    assert submit.headers == {"Content-Type": "application/json"}
    assert submit.data is not None and b"\n" not in submit.data
    sent = tmp_path / "sent.json"
    sent.write_bytes(submit.data)
    from_demo, warnings = load_connector(sent)
    assert warnings == []
    assert from_demo == load_connector(EXAMPLES / "hang-sink.properties")[0]
    assert (restart.method, restart.path) == (
        "POST",
        f"/connectors/{hang_demo.NAME}/tasks/0/restart",
    )
    assert (show.method, show.path) == ("GET", f"/connectors/{hang_demo.NAME}")
    assert show.json["config"] == {**hang_demo.connector()["config"], "name": hang_demo.NAME}


async def test_replay_of_the_hang_demo() -> None:
    submit, restart, show = hang_demo.load()
    worker = FakeWorker()
    async with serve(worker) as server, aiohttp.ClientSession() as session:
        base = f"http://localhost:{server.bound[0].port}"
        hang_demo.check(submit, *await hang_demo.send(session, base, submit))
        worker.hang_task(hang_demo.NAME, 0)  # the task now blocks, as in the demo
        before = worker.task_status(hang_demo.NAME, 0).incarnation

        hang_demo.check(restart, *await hang_demo.send(session, base, restart))
        shown = hang_demo.check(show, *await hang_demo.send(session, base, show))

    assert shown == show.json
    assert _structure(shown) == _structure(show.json)  # the demo's keys, in its order
    after = worker.task_status(hang_demo.NAME, 0).incarnation
    assert after is not None and before is not None and after > before
    assert worker.live_incarnations[(hang_demo.NAME, 0)] == {after}
    assert worker.max_live_seen == 1
