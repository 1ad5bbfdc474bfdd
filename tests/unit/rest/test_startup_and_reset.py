"""Issue 13 on the REST side, over the fake worker (the real daemon's tests:
tests/integration/rest/test_standalone_rest_defaults.py):

- item 14: while the worker is still loading its connectors, ``GET /connectors`` answers 503 with
  Connect's error body (an empty list would be wrong, not early), and so does a connector not
  found yet; once loaded, a shutdown does not bring the 503 back;
- item 13: ``DELETE /connectors/{c}/offsets`` says that the sink already holds the records before
  the offsets it had committed and that resuming writes them again.
"""

from __future__ import annotations

from typing import Any

from support.fake_worker import Client, FakeWorker, local_settings, serving_client

from daemon.rest.context import STILL_STARTING
from daemon.rest.offsets import RESET, reset_message
from daemon.runtime.model import SinkOffset

NAME = "sink"


async def test_connectors_are_503_until_loaded_then_never_again(worker: FakeWorker) -> None:
    worker.ready = False  # the worker is starting: its connectors may not be loaded yet
    config = {"connector.class": "HangSink", "tasks.max": "1", "topics": "t"}
    await worker.create_connector(NAME, {"name": NAME, **config})  # loaded so far
    async with serving_client(worker, local_settings(health_timeout=0.05)) as client:
        for path in ("/connectors", "/connectors?expand=status", "/connectors/other/status"):
            answer = await client.get(path)
            assert answer.status == 503, path
            assert answer.json == {"error_code": 503, "message": STILL_STARTING}
        assert (await client.get("/health")).status == 503
        # A change meanwhile could be undone by the start-up deciding what exists: 503 too.
        for method, path in (("POST", "/connectors"), ("DELETE", f"/connectors/{NAME}")):
            body = {"name": "other", "config": config} if method == "POST" else None
            answer = await client.call(method, path, json=body)
            assert answer.status == 503, (method, path)
        assert worker.connector_names() == [NAME]
        worker.ready = True
        assert (await client.get("/connectors")).json == [NAME]
        assert (await client.create("other")).status == 201
        worker.ready = False  # stopping now, not starting: the answers stay what they are
        assert sorted((await client.get("/connectors")).json) == sorted([NAME, "other"])
        assert (await client.get("/connectors/nope/status")).status == 404


def _offset(topic: str, partition: int, offset: int) -> dict[str, Any]:
    return {
        "partition": {"kafka_topic": topic, "kafka_partition": partition},
        "offset": {"kafka_offset": offset},
    }


async def test_reset_warns_that_resuming_writes_the_held_records_again(client: Client) -> None:
    await client.create(NAME)
    assert (await client.call("PUT", f"/connectors/{NAME}/stop")).status == 204
    body = {"offsets": [_offset("orders", 0, 400), _offset("orders", 1, 0)]}
    assert (await client.call("PATCH", f"/connectors/{NAME}/offsets", json=body)).status == 200
    answer = await client.call("DELETE", f"/connectors/{NAME}/offsets")
    assert answer.status == 200
    message = answer.json["message"]
    assert message.startswith(RESET + ". Warning: the sink already holds the records")
    assert "(orders-0 before offset 400)" in message  # orders-1 holds nothing
    assert "writes those records into the table a second time" in message
    # Nothing committed any more: a second reset is Connect's plain answer.
    again = await client.call("DELETE", f"/connectors/{NAME}/offsets")
    assert again.json == {"message": RESET}


def test_a_long_list_of_partitions_is_cut_short() -> None:
    message = reset_message([SinkOffset("t", p, 10) for p in range(8)])
    assert "t-4 before offset 10 and 3 more partition(s)" in message
    assert "t-5" not in message
    assert reset_message([SinkOffset("t", 0, 0)]) == RESET
