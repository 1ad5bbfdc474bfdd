"""Issue 13, items 12 and 14 on the config side: ``rest.port`` maps to a loopback listener, a UTF-8
byte order mark is not part of the first key, a binary file is "not a text file", and a connector
file given where the worker file goes says that the worker file comes first.

The same through real ``connectd`` processes: tests/unit/cli/test_config_files_cli.py.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from daemon.config import Listener, load_connector, load_daemon_toml, load_worker, parse_worker
from daemon.errors import InvalidConfig


def test_rest_port_alone_maps_to_the_loopback_listener() -> None:
    config, warnings = parse_worker({"rest.port": "9000"})
    assert config.listeners == (Listener(scheme="http", host="127.0.0.1", port=9000),)
    [warning] = warnings
    assert warning.key == "rest.port"
    assert "listeners=http://127.0.0.1:9000" in warning.message
    assert "listeners=http://0.0.0.0:9000 to listen on every interface" in warning.message


def test_rest_host_name_alone_keeps_the_default_port_on_loopback_unless_a_host_is_named() -> None:
    config, _ = parse_worker({"rest.host.name": " "})
    assert config.listeners == (Listener(scheme="http", host="127.0.0.1", port=8083),)
    config, warnings = parse_worker({"rest.host.name": "0.0.0.0", "rest.port": "9001"})
    assert config.listeners == (Listener(scheme="http", host="0.0.0.0", port=9001),)
    assert all("listeners=http://0.0.0.0:9001" in w.message for w in warnings)


def test_a_utf8_byte_order_mark_is_not_part_of_the_first_key(tmp_path: Path) -> None:
    worker = tmp_path / "w.properties"
    worker.write_bytes(b"\xef\xbb\xbfbootstrap.servers=k:9092\n")
    config, warnings = load_worker(worker)
    assert warnings == [] and config.bootstrap_servers == ("k:9092",)
    connector = tmp_path / "c.properties"
    connector.write_bytes(b"\xef\xbb\xbfname=a\nconnector.class=EchoSink\ntopics=t\n")
    assert load_connector(connector).config.name == "a"
    as_json = tmp_path / "c.json"
    as_json.write_bytes(b'\xef\xbb\xbf{"name": "j", "connector.class": "EchoSink", "topics": "t"}')
    assert load_connector(as_json).config.name == "j"
    toml = tmp_path / "d.toml"
    toml.write_bytes(b'\xef\xbb\xbf[worker]\n"bootstrap.servers" = "k:9092"\n')
    assert load_daemon_toml(toml).config.worker.bootstrap_servers == ("k:9092",)


@pytest.mark.parametrize("name", ["w.properties", "c.json", "d.toml"])
def test_a_binary_file_is_not_a_text_file(tmp_path: Path, name: str) -> None:
    path = tmp_path / name
    path.write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + bytes(range(256)))
    load = {"w.properties": load_worker, "c.json": load_connector, "d.toml": load_daemon_toml}
    with pytest.raises(InvalidConfig) as caught:
        load[name](path)
    [problem] = caught.value.problems
    assert problem.is_error and problem.key is None
    assert str(problem).startswith(f"{path}: not a text file")
    assert "\x00" not in str(problem) and "PNG" not in str(problem)


def test_latin1_properties_still_load(tmp_path: Path) -> None:
    path = tmp_path / "c.properties"
    path.write_bytes(b"name=caf\xe9\nconnector.class=EchoSink\ntopics=t\n")
    assert load_connector(path).config.name == "café"


def test_a_connector_file_given_as_the_worker_file_says_the_worker_file_comes_first(
    tmp_path: Path,
) -> None:
    path = tmp_path / "sink.properties"
    path.write_text("name=a\nconnector.class=EchoSink\ntopics=t\n")
    with pytest.raises(InvalidConfig) as caught:
        load_worker(path)
    text = [str(p) for p in caught.value.problems]
    assert text[-1] == (
        f"{path}: this looks like a connector config (it sets connector.class, name, topics),"
        " given where the worker config goes: the worker config comes first, then the"
        " connector configs; expected connectd standalone WORKER.properties"
        " CONNECTOR.properties ..."
    )
    assert sum("comes first" in t for t in text) == 1
