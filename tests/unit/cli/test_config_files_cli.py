"""Issue 13, item 14 through real ``connectd`` processes: the files a new user gets wrong.

- the connector file given first: the answer says that the worker file comes first;
- a UTF-8 byte order mark (Windows editors) is not part of the first key;
- ``check-config`` on a binary file says it is not a text file, without printing its bytes.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

from support.cli import BARE_ENV
from support.cli import connectd as run_connectd

ROOT = Path(__file__).resolve().parents[3]


def connectd(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return run_connectd(*args, cwd=cwd, env=BARE_ENV)


def _worker(tmp_path: Path, prefix: bytes = b"") -> Path:
    worker = tmp_path / "worker.properties"
    worker.write_bytes(
        prefix + f"bootstrap.servers=127.0.0.1:1\nstate.dir={tmp_path / 'state'}\n".encode()
    )
    return worker


def _connector(tmp_path: Path, prefix: bytes = b"") -> Path:
    connector = tmp_path / "sink.properties"
    connector.write_bytes(prefix + b"name=sink\nconnector.class=EchoSink\ntopics=t\n")
    return connector


def test_connector_file_first_says_the_worker_file_comes_first(tmp_path: Path) -> None:
    worker, connector = _worker(tmp_path), _connector(tmp_path)
    result = connectd("standalone", str(connector), str(worker), cwd=tmp_path)
    assert result.returncode == 78
    assert (
        f"{connector}: this looks like a connector config (it sets connector.class, name,"
        " topics), given where the worker config goes: the worker config comes first"
    ) in result.stderr
    assert "connectd standalone WORKER.properties CONNECTOR.properties" in result.stderr


def test_a_byte_order_mark_is_not_part_of_the_first_key(tmp_path: Path) -> None:
    bom = b"\xef\xbb\xbf"
    worker, connector = _worker(tmp_path, bom), _connector(tmp_path, bom)
    result = connectd("check-config", str(worker), str(connector), cwd=tmp_path)
    assert result.returncode == 0, result.stdout
    assert "\ufeff" not in result.stdout
    assert f"{connector}: checking as a connector config (it sets connector.class)" in (
        result.stdout
    )
    assert result.stdout.splitlines()[-1] == "OK: 2 files checked, 0 error(s), 0 warning(s)"


def test_check_config_on_a_binary_file_says_it_is_not_text(tmp_path: Path) -> None:
    binary = tmp_path / "connectd.jar"
    binary.write_bytes(b"PK\x03\x04\x14\x00\x08\x00" + bytes(range(256)) * 4)
    result = connectd("check-config", str(binary), cwd=tmp_path)
    assert result.returncode == 78
    assert (
        f"error: {binary}: not a text file (byte 2 is 0x03, a control character);"
        " expected a text file of key=value lines"
    ) in result.stdout.splitlines()
    assert "\x00" not in result.stdout and "\x03" not in result.stdout
    assert "unknown key" not in result.stdout
