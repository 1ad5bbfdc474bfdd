"""Every error is Connect's ``{"error_code", "message"}``: routes, methods, bodies, queries."""

from __future__ import annotations

import pytest
from support.fake_worker import Client, FakeWorker, local_settings, serving_client

from daemon.errors import ConfigError, Conflict, InvalidConfig, StopFailed
from daemon.rest.errors import RestError, status_of


async def test_unknown_route_is_404(client: Client) -> None:
    assert (await client.get("/no/such/thing")).error(404) == "HTTP 404 Not Found"
    (await client.get("/connectors/x/nothing")).error(404)


async def test_wrong_method_is_405_with_allow(client: Client) -> None:
    answer = await client.call("DELETE", "/connectors")
    assert answer.error(405) == "HTTP 405 Method Not Allowed"
    assert "POST" in answer.headers["Allow"] and "GET" in answer.headers["Allow"]
    (await client.call("POST", "/connectors/x/status")).error(405)
    (await client.call("GET", "/connectors/x/pause")).error(405)


async def test_malformed_json_is_400(client: Client) -> None:
    answer = await client.call(
        "POST", "/connectors", data=b'{"name": ', headers={"Content-Type": "application/json"}
    )
    assert "not valid JSON" in answer.error(400)
    answer = await client.call(
        "POST", "/connectors", data=b'{"a": NaN}', headers={"Content-Type": "application/json"}
    )
    answer.error(400)


async def test_wrong_or_missing_content_type_is_415(client: Client) -> None:
    for headers in (
        {"Content-Type": "text/plain"},
        {"Content-Type": "application/x-www-form-urlencoded"},
    ):
        answer = await client.call("POST", "/connectors", data=b"{}", headers=headers)
        assert answer.error(415) == "HTTP 415 Unsupported Media Type"
    answer = await client.call(
        "PUT",
        "/connectors/x/config",
        data=b"{}",
        headers={"Content-Type": "application/json; charset=utf-8"},
    )
    assert answer.status != 415


async def test_missing_or_empty_body_is_400(client: Client) -> None:
    assert "no body" in (await client.call("POST", "/connectors")).error(400)
    answer = await client.call(
        "POST", "/connectors", data=b"  ", headers={"Content-Type": "application/json"}
    )
    assert "empty" in answer.error(400)


@pytest.mark.parametrize("document", ["[]", '"text"', "42", "null", "true"])
async def test_body_that_is_not_an_object_is_400(client: Client, document: str) -> None:
    answer = await client.call(
        "PUT", "/connectors/x/config", data=document, headers={"Content-Type": "application/json"}
    )
    assert answer.error(400) == "The request body is not a JSON object"


async def test_not_acceptable_is_406(client: Client) -> None:
    (await client.get("/connectors", headers={"Accept": "text/html"})).error(406)
    ok = await client.get("/connectors", headers={"Accept": "text/html, application/json;q=0.9"})
    assert ok.status == 200


async def test_body_over_the_cap_is_413() -> None:
    worker = FakeWorker()
    async with serving_client(worker, local_settings(max_body_bytes=1024)) as client:
        big = {"connector.class": "HangSink", "topics": "t", "pad": "x" * 2000}
        answer = await client.call("PUT", "/connectors/big/config", json=big)
        assert "1024 bytes" in answer.error(413)
        small = {"connector.class": "HangSink", "topics": "t"}
        assert (await client.call("PUT", "/connectors/big/config", json=small)).status == 201

        async def chunks():  # type: ignore[no-untyped-def]
            for _ in range(4):
                yield b" " * 512

        chunked = await client.call(
            "PUT",
            "/connectors/big/config",
            data=chunks(),
            headers={"Content-Type": "application/json"},
        )
        chunked.error(413)


async def test_default_cap_is_one_mebibyte(client: Client) -> None:
    body = {"connector.class": "HangSink", "topics": "t", "pad": "x" * (1 << 20)}
    (await client.call("PUT", "/connectors/big/config", json=body)).error(413)


def test_status_mapping() -> None:
    assert status_of(Conflict("busy")) == (409, "busy")
    assert status_of(Conflict("not stopped", status=400)) == (400, "not stopped")
    assert status_of(StopFailed("stuck")) == (500, "stuck")
    assert status_of(ConfigError("bad")) == (400, "bad")
    assert status_of(InvalidConfig([]))[0] == 400
    assert status_of(RestError(418, "teapot")) == (418, "teapot")
    assert status_of(TimeoutError()) == (500, "Request timed out")
    assert status_of(RuntimeError("surprise")) == (500, "surprise")


async def test_worker_crash_is_500_in_connect_shape(client: Client, worker: FakeWorker) -> None:
    def broken() -> list[str]:
        raise RuntimeError("the worker is broken")

    worker.connector_names = broken  # type: ignore[method-assign]
    assert (await client.get("/connectors")).error(500) == "the worker is broken"


async def test_slow_worker_times_out_with_500_and_keeps_working(worker: FakeWorker) -> None:
    import asyncio

    finished = asyncio.Event()
    original = worker.pause_connector

    async def slow(name: str) -> None:
        await asyncio.sleep(0.3)
        await original(name)
        finished.set()

    worker.pause_connector = slow  # type: ignore[method-assign]
    async with serving_client(worker, local_settings(request_timeout=0.05)) as client:
        await client.create("c")
        answer = await client.call("PUT", "/connectors/c/pause")
        assert answer.error(500) == "Request timed out"
        await asyncio.wait_for(finished.wait(), 5)  # the operation was not cancelled
        assert worker.connector_status("c").state.value == "PAUSED"
