"""A Connect transform configured as Connect refuses it (a SetSchemaMetadata that names neither
a schema name nor a version), or one of its settings with a value Connect refuses, is refused
everywhere a configuration enters, naming the key it concerns (``transforms.<alias>.schema.name``,
``transforms.<alias>.spec``). A real ``connectd standalone`` and its REST API: POST
and PUT answer 400 with Connect's body and create nothing, ``/config/validate`` files the error
under the key, ``check-config`` and the daemon's start exit 78 naming it."""

from __future__ import annotations

import contextlib
import subprocess
from pathlib import Path

import pytest
from support.cli import connectd
from support.daemon import ProcessFactory, worker_properties, write_properties

pytestmark = pytest.mark.integration

METADATA = "org.apache.kafka.connect.transforms.SetSchemaMetadata$Value"
WHY = "transforms.mask.schema.name: Neither schema name nor version configured"
BAD_CAST = "transforms.cast.spec: 'id:int32,when:date': 'date' is not a type Cast casts to"


def masked(name: str) -> dict[str, str]:
    return {
        "name": name,
        "connector.class": "EchoSink",
        "topics": "people",
        "transforms": "mask",
        "transforms.mask.type": METADATA,
    }


def cast(name: str) -> dict[str, str]:
    return {
        "name": name,
        "connector.class": "EchoSink",
        "topics": "people",
        "transforms": "cast",
        "transforms.cast.type": "Cast$Value",
        "transforms.cast.spec": "id:int32,when:date",
    }


def test_a_connector_with_transforms_is_refused_everywhere(
    daemon_process: ProcessFactory, kafka_bootstrap: str, tmp_path: Path
) -> None:
    worker = worker_properties(kafka_bootstrap, tmp_path / "state")
    daemon = daemon_process(worker)

    code, answer = daemon.rest("POST", "/connectors", {"name": "m", "config": masked("m")})
    assert code == 400 and answer["error_code"] == 400, answer
    assert answer["message"].startswith("Connector configuration is invalid"), answer
    assert WHY in answer["message"], answer
    code, answer = daemon.rest("PUT", "/connectors/m/config", masked("m"))
    assert code == 400 and WHY in answer["message"], answer
    assert daemon.rest("GET", "/connectors") == (200, [])

    code, infos = daemon.rest("PUT", "/connector-plugins/EchoSink/config/validate", masked("m"))
    assert code == 200 and infos["error_count"] == 1, infos
    (value,) = [
        c["value"] for c in infos["configs"] if c["value"]["name"] == "transforms.mask.schema.name"
    ]
    assert any("Neither schema name nor version" in e for e in value["errors"]), value

    worker_file = write_properties(tmp_path / "worker.properties", worker)
    connector_file = write_properties(tmp_path / "m.properties", masked("m"))
    checked = connectd("check-config", worker_file, connector_file)
    out = checked.stdout + checked.stderr
    assert checked.returncode == 78, out
    assert f"error: {connector_file}: {WHY}" in out, out  # a key the file lacks: no line

    code, answer = daemon.rest("POST", "/connectors", {"name": "c", "config": cast("c")})
    assert code == 400 and BAD_CAST in answer["message"], answer
    code, infos = daemon.rest("PUT", "/connector-plugins/EchoSink/config/validate", cast("c"))
    assert code == 200 and infos["error_count"] == 1, infos
    (value,) = [
        c["value"] for c in infos["configs"] if c["value"]["name"] == "transforms.cast.spec"
    ]
    assert any("'date' is not a type Cast casts to" in e for e in value["errors"]), value
    cast_file = write_properties(tmp_path / "c.properties", cast("c"))
    checked = connectd("check-config", worker_file, cast_file)
    assert checked.returncode == 78 and BAD_CAST in checked.stdout + checked.stderr, checked
    assert daemon.rest("GET", "/connectors") == (200, [])

    started = daemon_process(worker, [masked("m")], wait=False)
    with contextlib.suppress(subprocess.TimeoutExpired):
        started.wait(120)
    assert started.proc is not None and started.proc.returncode == 78, started.log()
    assert WHY in started.log()
