"""Connectors CRUD through a real HTTP client: Connect's paths, status codes, shapes, errors."""

from __future__ import annotations

import asyncio

import pytest
from support.fake_worker import Client, FakeWorker

NAME = "sink-hang-connector"


async def test_list_is_empty_then_names(client: Client) -> None:
    assert (await client.get("/connectors")).json == []
    await client.create("b")
    await client.create("a")
    answer = await client.get("/connectors")
    assert answer.status == 200
    assert sorted(answer.json) == ["a", "b"]
    assert answer.headers["Content-Type"].startswith("application/json")


async def test_list_expand_status_info_and_both(client: Client) -> None:
    await client.create(NAME)
    status = (await client.get("/connectors?expand=status")).json
    assert set(status) == {NAME}
    assert set(status[NAME]) == {"status"}
    assert status[NAME]["status"]["connector"]["state"] == "RUNNING"
    info = (await client.get("/connectors?expand=info")).json
    assert set(info[NAME]) == {"info"}
    assert info[NAME]["info"]["config"]["connector.class"] == "HangSink"
    both = (await client.get("/connectors?expand=status&expand=info")).json
    assert set(both[NAME]) == {"status", "info"}


async def test_list_expand_unknown_value_is_400(client: Client) -> None:
    message = (await client.get("/connectors?expand=everything")).error(400)
    assert "expand" in message


async def test_create_answers_201_location_and_connect_shape(client: Client) -> None:
    answer = await client.create(NAME)
    assert answer.status == 201
    assert answer.headers["Location"].endswith(f"/connectors/{NAME}")
    assert answer.headers["Location"].startswith("http://127.0.0.1:")
    assert answer.json == {
        "name": NAME,
        "config": {
            "connector.class": "HangSink",
            "tasks.max": "1",
            "topics": "some_demo_topic",
            "name": NAME,
        },
        "tasks": [{"connector": NAME, "task": 0}],
        "type": "sink",
    }


async def test_create_takes_numbers_and_booleans_as_text(client: Client) -> None:
    answer = await client.create(NAME, tasks_max=2, **{"errors.log.enable": True})
    assert answer.status == 201
    assert answer.json["config"]["tasks.max"] == "2"
    assert answer.json["config"]["errors.log.enable"] == "true"


async def test_create_trims_the_name(client: Client) -> None:
    body = {"name": "  spaced  ", "config": {"connector.class": "HangSink", "topics": "t"}}
    answer = await client.call("POST", "/connectors", json=body)
    assert answer.status == 201
    assert answer.json["name"] == "spaced"
    assert answer.json["config"]["name"] == "spaced"


async def test_create_rejects_config_name_that_differs(client: Client) -> None:
    body = {"name": "a", "config": {"connector.class": "HangSink", "topics": "t", "name": "b"}}
    message = (await client.call("POST", "/connectors", json=body)).error(400)
    assert message == "Connector name configuration (b) doesn't match connector name in the URL (a)"


async def test_create_existing_is_409(client: Client) -> None:
    await client.create(NAME)
    message = (await client.create(NAME)).error(409)
    assert NAME in message and "already exists" in message


@pytest.mark.parametrize(
    ("name", "why"),
    [
        ("a/b", "'/'"),
        ("tab\there", "control character"),
        ("bell\x07", "control character"),
        ("x" * 250, "bytes"),
        ("é" * 125, "bytes"),  # 250 bytes in UTF-8
        ("   ", "empty"),
    ],
)
async def test_create_rejects_bad_names(client: Client, name: str, why: str) -> None:
    body = {"name": name, "config": {"connector.class": "HangSink", "topics": "t"}}
    message = (await client.call("POST", "/connectors", json=body)).error(400)
    assert why in message


async def test_create_accepts_a_249_byte_name(client: Client) -> None:
    answer = await client.create("x" * 249)
    assert answer.status == 201


async def test_create_with_invalid_config_is_400_with_connect_message(client: Client) -> None:
    body = {"name": NAME, "config": {"connector.class": "HangSink", "tasks.max": "zero"}}
    message = (await client.call("POST", "/connectors", json=body)).error(400)
    assert message.startswith("Connector configuration is invalid and contains the following 2")
    assert "tasks.max" in message and "topics" in message
    assert message.endswith(
        "You can also find the above list of errors at the endpoint "
        "`/connector-plugins/{connectorType}/config/validate`"
    )


async def test_create_with_unknown_class_is_400(client: Client) -> None:
    body = {"name": NAME, "config": {"connector.class": "NoSuchSink", "topics": "t"}}
    assert "NoSuchSink" in (await client.call("POST", "/connectors", json=body)).error(400)


@pytest.mark.parametrize(
    ("body", "fragment"),
    [
        ({"config": {"topics": "t"}}, "name"),
        ({"name": NAME}, "config"),
        ({"name": 5, "config": {}}, "name"),
        ({"name": NAME, "config": {"topics": None}}, "null"),
        ({"name": NAME, "config": {"topics": ["a"]}}, "array"),
        ({"name": NAME, "config": {"topics": {"a": 1}}}, "object"),
        ({"name": NAME, "config": {}, "tasks": []}, "tasks"),
        ({"name": NAME, "config": {}, "initial_state": "SLEEPING"}, "initial_state"),
        ({"name": NAME, "config": "topics=t"}, "config"),
    ],
)
async def test_create_rejects_malformed_bodies(
    client: Client, body: dict[str, object], fragment: str
) -> None:
    assert fragment in (await client.call("POST", "/connectors", json=body)).error(400)


@pytest.mark.parametrize(
    ("initial", "state"), [("RUNNING", "RUNNING"), ("paused", "PAUSED"), ("STOPPED", "STOPPED")]
)
async def test_create_with_initial_state(client: Client, initial: str, state: str) -> None:
    body = {
        "name": NAME,
        "config": {"connector.class": "HangSink", "topics": "t"},
        "initial_state": initial,
    }
    assert (await client.call("POST", "/connectors", json=body)).status == 201
    assert (await client.get(f"/connectors/{NAME}/status")).json["connector"]["state"] == state


async def test_get_connector_and_404(client: Client) -> None:
    await client.create(NAME)
    answer = await client.get(f"/connectors/{NAME}")
    assert answer.status == 200
    assert answer.json["tasks"] == [{"connector": NAME, "task": 0}]
    message = (await client.get("/connectors/nope")).error(404)
    assert message == "Connector nope not found"


async def test_trailing_slash_is_the_same_resource(client: Client) -> None:
    await client.create(NAME)
    assert (await client.get("/connectors/")).json == [NAME]
    assert (await client.get(f"/connectors/{NAME}/")).json["name"] == NAME


async def test_get_config(client: Client) -> None:
    await client.create(NAME)
    config = (await client.get(f"/connectors/{NAME}/config")).json
    assert config == {
        "connector.class": "HangSink",
        "tasks.max": "1",
        "topics": "some_demo_topic",
        "name": NAME,
    }
    (await client.get("/connectors/nope/config")).error(404)


async def test_put_config_creates_201_then_updates_200(client: Client) -> None:
    config = {"connector.class": "HangSink", "topics": "t", "tasks.max": 2}
    created = await client.call("PUT", f"/connectors/{NAME}/config", json=config)
    assert created.status == 201
    assert created.headers["Location"].endswith(f"/connectors/{NAME}")
    assert created.json["config"]["name"] == NAME
    assert created.json["config"]["tasks.max"] == "2"
    updated = await client.call("PUT", f"/connectors/{NAME}/config", json={**config, "topics": "u"})
    assert updated.status == 200
    assert "Location" not in updated.headers
    assert updated.json["config"]["topics"] == "u"


async def test_put_config_rejects_a_different_config_name(client: Client) -> None:
    config = {"connector.class": "HangSink", "topics": "t", "name": "other"}
    message = (await client.call("PUT", f"/connectors/{NAME}/config", json=config)).error(400)
    assert "(other)" in message and f"({NAME})" in message


async def test_put_config_rejects_a_bad_path_name(client: Client) -> None:
    config = {"connector.class": "HangSink", "topics": "t"}
    assert "control" in (await client.call("PUT", "/connectors/a%07b/config", json=config)).error(
        400
    )


async def test_put_config_invalid_is_400(client: Client) -> None:
    config = {"connector.class": "HangSink"}
    message = (await client.call("PUT", f"/connectors/{NAME}/config", json=config)).error(400)
    assert "topics" in message


async def test_patch_merges_and_null_removes(client: Client, worker: FakeWorker) -> None:
    await client.create(NAME, **{"errors.log.enable": "true"})
    patch = {"topics": "other", "errors.log.enable": None, "tasks.max": 3}
    answer = await client.call("PATCH", f"/connectors/{NAME}/config", json=patch)
    assert answer.status == 200
    config = answer.json["config"]
    assert config["topics"] == "other"
    assert config["tasks.max"] == "3"
    assert "errors.log.enable" not in config
    assert config["name"] == NAME
    assert len(answer.json["tasks"]) == 3
    assert worker.connector_config(NAME) == config


async def test_patch_unknown_is_404_and_bad_name_400(client: Client) -> None:
    (await client.call("PATCH", "/connectors/nope/config", json={"topics": "x"})).error(404)
    await client.create(NAME)
    patch = {"name": "renamed"}
    assert "renamed" in (
        await client.call("PATCH", f"/connectors/{NAME}/config", json=patch)
    ).error(400)


async def test_patch_that_breaks_the_config_is_400(client: Client) -> None:
    await client.create(NAME)
    patch = {"topics": None}
    assert "topics" in (await client.call("PATCH", f"/connectors/{NAME}/config", json=patch)).error(
        400
    )


async def test_delete_204_then_404(client: Client) -> None:
    await client.create(NAME)
    answer = await client.call("DELETE", f"/connectors/{NAME}")
    assert answer.status == 204
    assert answer.text == ""
    assert (await client.get("/connectors")).json == []
    (await client.call("DELETE", f"/connectors/{NAME}")).error(404)


async def test_name_with_spaces_and_unicode_round_trips(client: Client) -> None:
    name = "my sink ü"
    assert (await client.create(name)).status == 201
    answer = await client.get("/connectors/my%20sink%20%C3%BC")
    assert answer.json["name"] == name


async def test_concurrent_patches_lose_nothing(client: Client, worker: FakeWorker) -> None:
    await client.create(NAME)
    patches = [
        client.call("PATCH", f"/connectors/{NAME}/config", json={f"extra.{i}": i})
        for i in range(10)
    ]
    answers = await asyncio.gather(*patches)
    assert {a.status for a in answers} == {200}
    config = worker.connector_config(NAME)
    assert {k for k in config if k.startswith("extra.")} == {f"extra.{i}" for i in range(10)}
