"""``connector.client.config.override.policy`` on a real ``connectd standalone``: under ``None``
a connector overriding a consumer setting is refused at create (400, Connect's body, nothing
created) and by ``/config/validate`` under the override's key, with Connect's message; one
without overrides is created."""

from __future__ import annotations

from pathlib import Path

import pytest
from support.daemon import ProcessFactory, worker_properties

pytestmark = pytest.mark.integration

WHY = "The 'None' policy does not allow 'max.poll.records' to be overridden"


def test_the_none_policy_refuses_a_connectors_overrides(
    daemon_process: ProcessFactory, kafka_bootstrap: str, tmp_path: Path
) -> None:
    worker = worker_properties(
        kafka_bootstrap, tmp_path / "state", **{"connector.client.config.override.policy": "None"}
    )
    daemon = daemon_process(worker)
    echo = {"connector.class": "EchoSink", "topics": "t"}
    tuned = {**echo, "consumer.override.max.poll.records": "10"}

    code, answer = daemon.rest("POST", "/connectors", {"name": "tuned", "config": tuned})
    assert code == 400 and answer["error_code"] == 400, answer
    assert f"consumer.override.max.poll.records: {WHY}" in answer["message"], answer
    assert daemon.rest("GET", "/connectors") == (200, [])

    code, infos = daemon.rest(
        "PUT", "/connector-plugins/EchoSink/config/validate", {"name": "tuned", **tuned}
    )
    assert code == 200 and infos["error_count"] == 1, infos
    (value,) = [
        c["value"]
        for c in infos["configs"]
        if c["value"]["name"] == "consumer.override.max.poll.records"
    ]
    assert any(WHY in e for e in value["errors"]), value

    assert daemon.rest("POST", "/connectors", {"name": "plain", "config": echo})[0] == 201
