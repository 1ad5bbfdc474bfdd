"""``/connector-plugins``: listing, plugin settings, config validation in Connect's shapes."""

from __future__ import annotations

from typing import Any

import pytest
from support.fake_worker import Client

HANG = "support.fake_worker.HangSinkConnector"
KEY_FIELDS = {
    "name",
    "type",
    "required",
    "default_value",
    "importance",
    "documentation",
    "group",
    "width",
    "display_name",
    "dependents",
    "order",
}


async def test_list_connectors_only(client: Client) -> None:
    answer = await client.get("/connector-plugins")
    assert answer.status == 200
    assert {p["class"] for p in answer.json} == {HANG, "support.fake_worker.EchoSinkConnector"}
    for plugin in answer.json:
        assert plugin == {"class": plugin["class"], "type": "sink", "version": "1.0.0-test"}
    again = await client.get("/connector-plugins?connectorsOnly=true")
    assert again.json == answer.json


async def test_list_all_adds_converters(client: Client) -> None:
    plugins = (await client.get("/connector-plugins?connectorsOnly=false")).json
    converters = {p["class"] for p in plugins if p["type"] == "converter"}
    assert "org.apache.kafka.connect.json.JsonConverter" in converters
    assert "org.apache.kafka.connect.storage.StringConverter" in converters
    by_type = {(p["class"], p["type"]) for p in plugins}
    assert ("org.apache.kafka.connect.transforms.Filter", "transformation") in by_type
    predicates = "org.apache.kafka.connect.transforms.predicates."
    assert {c for c, t in by_type if t == "predicate"} == {
        predicates + "TopicNameMatches",
        predicates + "HasHeaderKey",
        predicates + "RecordIsTombstone",
    }
    (await client.get("/connector-plugins?connectorsOnly=perhaps")).error(400)


async def test_a_transform_or_predicate_lists_its_own_settings(client: Client) -> None:
    (pattern,) = (await client.get("/connector-plugins/TopicNameMatches/config")).json
    assert (pattern["name"], pattern["required"]) == ("pattern", True)
    assert (await client.get("/connector-plugins/Filter/config")).json == []
    full = "org.apache.kafka.connect.transforms.Cast$Value"
    keys = {k["name"]: k for k in (await client.get(f"/connector-plugins/{full}/config")).json}
    assert (keys["spec"]["type"], keys["spec"]["required"]) == ("LIST", True)
    default = keys["replace.null.with.default"]
    assert (default["type"], default["default_value"], default["required"]) == (
        "BOOLEAN",
        "true",
        False,
    )
    converter = (await client.get("/connector-plugins/TimestampConverter$Key/config")).json
    assert "target.type" in {k["name"] for k in converter}


@pytest.mark.parametrize("name", ["HangSink", "HangSinkConnector", "hangsink", HANG])
async def test_plugin_config_by_any_name(client: Client, name: str) -> None:
    answer = await client.get(f"/connector-plugins/{name}/config")
    assert answer.status == 200
    assert answer.json == [
        {
            "name": "hang.after.records",
            "type": "INT",
            "required": False,
            "default_value": "0",
            "importance": "LOW",
            "documentation": "Records to accept before blocking.",
            "group": "Hang",
            "width": "NONE",
            "display_name": "hang.after.records",
            "dependents": [],
            "order": -1,
        }
    ]


async def test_plugin_config_of_converter_and_unknown(client: Client) -> None:
    keys = (await client.get("/connector-plugins/JsonConverter/config")).json
    assert [k["name"] for k in keys] == ["schemas.enable"]
    assert (await client.get("/connector-plugins/StringConverter/config")).json == []
    assert (await client.get("/connector-plugins/os.system/config")).error(
        404
    ) == "Unknown plugin os.system."


async def _validate(client: Client, plugin: str, config: dict[str, Any]) -> dict[str, Any]:
    answer = await client.call("PUT", f"/connector-plugins/{plugin}/config/validate", json=config)
    assert answer.status == 200, answer.text
    return dict(answer.json)


def _by_name(infos: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {c["definition"]["name"]: c for c in infos["configs"]}


async def test_validate_valid_config(client: Client) -> None:
    config = {"connector.class": "HangSink", "name": "x", "topics": "t", "tasks.max": 2}
    infos = await _validate(client, "HangSink", config)
    assert set(infos) == {"name", "error_count", "groups", "configs"}
    assert infos["name"] == "HangSink"
    assert infos["error_count"] == 0
    assert infos["groups"][:2] == ["Common", "Error Handling"]
    assert "Hang" in infos["groups"]
    configs = _by_name(infos)
    for entry in infos["configs"]:
        assert set(entry) == {"definition", "value"}
        assert set(entry["definition"]) == KEY_FIELDS
        assert set(entry["value"]) == {"name", "value", "recommended_values", "errors", "visible"}
    assert configs["tasks.max"]["value"]["value"] == "2"
    assert configs["tasks.max"]["definition"]["type"] == "INT"
    assert configs["topics"]["definition"]["type"] == "LIST"
    assert configs["errors.log.enable"]["definition"]["type"] == "BOOLEAN"
    assert configs["errors.log.enable"]["value"]["value"] == "false"  # the default
    assert configs["errors.retry.delay.max.ms"]["definition"]["default_value"] == "60000"
    assert configs["hang.after.records"]["value"]["value"] == "0"
    assert configs["name"]["definition"]["required"] is True


async def test_validate_reports_errors_per_key(client: Client) -> None:
    infos = await _validate(client, "HangSink", {"tasks.max": "many", "hang.after.records": "x"})
    configs = _by_name(infos)
    assert infos["error_count"] == sum(len(c["value"]["errors"]) for c in infos["configs"])
    assert infos["error_count"] >= 4  # name, topics, tasks.max, hang.after.records
    assert configs["tasks.max"]["value"]["errors"]
    assert configs["topics"]["value"]["errors"]
    assert configs["name"]["value"]["errors"]
    assert configs["hang.after.records"]["value"]["errors"]
    assert configs["connector.class"]["value"]["value"] == "HangSink"  # filled from the path


async def test_validate_hides_passwords_and_lists_unknown_keys_with_errors(
    client: Client,
) -> None:
    config = {"name": "x", "topics": "t", "echo.path": "/p", "echo.secret": "s3", "tasks.mx": "1"}
    infos = await _validate(client, "EchoSink", config)
    configs = _by_name(infos)
    assert configs["echo.secret"]["value"]["value"] == "[hidden]"
    assert configs["echo.secret"]["definition"]["type"] == "PASSWORD"
    assert configs["tasks.mx"]["value"]["errors"]  # a typo of tasks.max is an error
    assert infos["error_count"] == 1


async def test_validate_class_mismatch_and_unknown(client: Client) -> None:
    message = (
        await client.call(
            "PUT", "/connector-plugins/HangSink/config/validate", json={"connector.class": "Echo"}
        )
    ).error(400)
    assert message == "Included connector type Echo does not match request type HangSink"
    (await client.call("PUT", "/connector-plugins/Nope/config/validate", json={})).error(404)
    infos = await _validate(client, "Sink", {"connector.class": "HangSinkConnector", "topics": "t"})
    assert infos["name"] == "HangSinkConnector"
