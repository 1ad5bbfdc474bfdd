"""The REST front process (``FrontedRestServer``) over a ``FakeWorker``: a real child process,
real sockets, a real HTTP client. Status is answered by the front while the worker's loop is
stuck; everything else reaches the worker unchanged; changes read back at once; a killed front
is replaced; nothing is left running."""

from __future__ import annotations

import asyncio
import base64
import gzip
import json
import logging
import os
import signal
import socket
import ssl
import time
import urllib.request
from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp
import psutil
import pytest
from support.fake_worker import Client, FakeWorker, local_settings, serve

from daemon.config import Listener
from daemon.rest import FrontedRestServer, RestSettings, TlsSettings, create_app
from daemon.rest.auth import hash_password
from daemon.rest.front.child import status_target

NAME = "sink-hang-connector"


@pytest.fixture
async def fronted(worker: FakeWorker) -> AsyncIterator[FrontedRestServer]:
    async with serve(worker, local_settings(), front=True) as server:
        assert isinstance(server, FrontedRestServer)
        yield server
    assert server.pid is None


@pytest.fixture
async def front_client(fronted: FrontedRestServer) -> AsyncIterator[Client]:
    async with aiohttp.ClientSession(fronted.url) as session:
        yield Client(session)


async def _until(check: object, deadline_s: float = 5.0) -> None:
    end = time.monotonic() + deadline_s
    while not check():  # type: ignore[operator]
        assert time.monotonic() < end, "condition not met in time"
        await asyncio.sleep(0.02)


def test_status_paths() -> None:
    assert status_target("/connectors/a/status") == ("a", None)
    assert status_target("/connectors/a/tasks/12/status") == ("a", 12)
    for path in (
        "/connectors//status",
        "/connectors/a/tasks/01/status",
        "/connectors/a/tasks/-1/status",
        "/connectors/a/tasks/x/status",
        "/connectors/a/status/",
        "/connectors/a/tasks/1/status/x",
        "/connectors/a/config",
    ):
        assert status_target(path) is None, path


async def test_status_is_answered_while_the_worker_loop_is_stuck(
    fronted: FrontedRestServer, front_client: Client, worker: FakeWorker
) -> None:
    assert (await front_client.create(NAME, tasks_max=2)).status == 201
    answer = await front_client.get(f"/connectors/{NAME}/status")
    assert answer.status == 200
    assert answer.headers["Content-Type"] == "application/json; charset=utf-8"
    assert answer.json == worker.connector_status(NAME).to_json()
    task = await front_client.get(f"/connectors/{NAME}/tasks/1/status")
    assert task.json == worker.task_status(NAME, 1).to_json()

    def answered_at(path: str) -> tuple[int, float]:
        with urllib.request.urlopen(fronted.url + path, timeout=10) as reply:
            return reply.status, time.perf_counter()

    loop = asyncio.get_running_loop()
    status = loop.run_in_executor(None, answered_at, f"/connectors/{NAME}/status")
    config = loop.run_in_executor(None, answered_at, f"/connectors/{NAME}/config")
    # The load under test: the worker's loop (this one) blocked for 1.5 s, as a long callback
    # would. The front answers status meanwhile; a request it passes on waits for the loop.
    time.sleep(1.5)
    unblocked = time.perf_counter()
    (status_code, status_at), (config_code, config_at) = await status, await config
    assert status_code == 200 and status_at < unblocked, "status waited for the worker's loop"
    assert config_code == 200 and config_at >= unblocked


async def test_changes_read_back_at_once(
    fronted: FrontedRestServer, front_client: Client, worker: FakeWorker
) -> None:
    created = await front_client.create(NAME, tasks_max=2)
    assert created.headers["Location"] == f"{fronted.url}/connectors/{NAME}"
    assert (await front_client.get(f"/connectors/{NAME}/status")).json["tasks"][1]["id"] == 1
    assert (await front_client.call("PUT", f"/connectors/{NAME}/pause")).status == 202
    status = (await front_client.get(f"/connectors/{NAME}/status")).json
    assert status["connector"]["state"] == "PAUSED"
    assert (await front_client.call("PUT", f"/connectors/{NAME}/resume")).status == 202
    status = (await front_client.get(f"/connectors/{NAME}/status")).json
    assert status["connector"]["state"] == "RUNNING"
    assert (await front_client.call("DELETE", f"/connectors/{NAME}")).status == 204
    (await front_client.get(f"/connectors/{NAME}/status")).error(404)
    (await front_client.get(f"/connectors/{NAME}/tasks/0/status")).error(404)


async def test_changes_made_elsewhere_reach_the_front(
    front_client: Client, worker: FakeWorker
) -> None:
    await front_client.create(NAME)
    worker.fail_task(NAME, 0, "ValueError: boom")
    states: list[str] = []

    async def failed() -> bool:
        task = (await front_client.get(f"/connectors/{NAME}/tasks/0/status")).json
        states.append(task["state"])
        return task["state"] == "FAILED" and task["trace"] == "ValueError: boom"

    end = time.monotonic() + 2.0
    while not await failed():
        assert time.monotonic() < end, states
        await asyncio.sleep(0.02)


async def test_errors_pass_through_unchanged(front_client: Client) -> None:
    await front_client.create(NAME)
    (await front_client.get("/connectors/nope/status")).error(404)
    (await front_client.get(f"/connectors/{NAME}/tasks/7/status")).error(404)
    (await front_client.get(f"/connectors/{NAME}/tasks/01/status")).error(404)
    (await front_client.call("DELETE", "/")).error(405)
    (await front_client.get(f"/connectors/{NAME}/status", headers={"Accept": "text/html"})).error(
        406
    )
    too_big = b"{" + b" " * (1 << 20) + b"}"
    answer = await front_client.call(
        "POST", "/connectors", data=too_big, headers={"Content-Type": "application/json"}
    )
    assert "rest.request.max.bytes" in answer.error(413)
    answer = await front_client.call(
        "POST", "/connectors", data=b"{", headers={"Content-Type": "application/json"}
    )
    assert "not valid JSON" in answer.error(400)
    answer = await front_client.call("POST", "/connectors", data=b"{}")
    answer.error(415)
    # The front's snapshot is not reachable by clients, whatever headers they send.
    guess = {"X-Connectd-Front-Token": "guess"}
    (await front_client.get("/_connectd/snapshot", headers=guess)).error(404)


async def test_basic_auth_is_kept(tmp_path: Path, worker: FakeWorker) -> None:
    credentials = tmp_path / "passwd"
    credentials.write_text(f"alice:{hash_password('s3cret')}\n")
    settings = local_settings(credentials_file=credentials)
    async with (
        serve(worker, settings, front=True) as server,
        aiohttp.ClientSession(server.url) as anonymous,
        aiohttp.ClientSession(server.url, headers=_basic("alice", "s3cret")) as alice,
        aiohttp.ClientSession(server.url, headers=_basic("alice", "wrong")) as mallory,
    ):
        assert (await Client(alice).create(NAME)).status == 201
        for session in (anonymous, mallory):
            for path in (f"/connectors/{NAME}/status", f"/connectors/{NAME}/tasks/0/status"):
                answer = await Client(session).get(path)
                answer.error(401)
                assert answer.headers["WWW-Authenticate"].startswith("Basic")
        assert (await Client(alice).get(f"/connectors/{NAME}/status")).status == 200
        assert (await Client(anonymous).get("/health")).status == 200


def _basic(user: str, password: str) -> dict[str, str]:
    return {"Authorization": "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()}


async def test_https_and_the_location_it_names(worker: FakeWorker, pem: tuple[Path, Path]) -> None:
    keystore, ca = pem
    settings = RestSettings(
        listeners=(Listener(scheme="https", host="127.0.0.1", port=0),),
        tls=TlsSettings(keystore_location=keystore),
    )
    client_tls = ssl.create_default_context(cafile=str(ca))
    async with (
        serve(worker, settings, front=True) as server,
        aiohttp.ClientSession(server.url, connector=aiohttp.TCPConnector(ssl=client_tls)) as s,
    ):
        assert server.url.startswith("https://")
        created = await Client(s).create(NAME)
        assert created.headers["Location"] == f"{server.url}/connectors/{NAME}"
        assert (await Client(s).get(f"/connectors/{NAME}/status")).status == 200


async def test_a_killed_front_is_replaced(fronted: FrontedRestServer, front_client: Client) -> None:
    await front_client.create(NAME)
    first = fronted.pid
    assert first is not None and psutil.Process(first).ppid() == os.getpid()
    # SIGTERM and SIGINT reach every process of the daemon at once (systemd, a terminal): the
    # front ignores both and ends when the daemon closes its stdin, after the worker stopped.
    status = Path(f"/proc/{first}/status").read_text()
    ignored = int(next(line for line in status.splitlines() if line.startswith("SigIgn:"))[7:], 16)
    assert ignored & (1 << (signal.SIGTERM - 1)) and ignored & (1 << (signal.SIGINT - 1))
    os.kill(first, signal.SIGKILL)
    await _until(lambda: fronted.pid not in (None, first), deadline_s=15.0)
    assert not psutil.pid_exists(first) or psutil.Process(first).status() == "zombie"
    answer = await front_client.get(f"/connectors/{NAME}/status")
    assert answer.status == 200 and fronted.restarts == 1
    second = fronted.pid
    await fronted.close()
    assert fronted.pid is None and second is not None and not psutil.pid_exists(second)


async def test_a_port_in_use_is_refused_with_nothing_left(worker: FakeWorker) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        settings = local_settings(listeners=(Listener(scheme="http", host="127.0.0.1", port=port),))
        token = FrontedRestServer.new_token()
        app = create_app(worker, settings=settings, registry=worker.registry, front_token=token)
        server = FrontedRestServer(app, settings, token=token)
        before = {p.pid for p in psutil.Process().children(recursive=True)}
        with pytest.raises(OSError, match=f"cannot listen on http://127.0.0.1:{port}"):
            await server.start()
        after = {p.pid for p in psutil.Process().children(recursive=True)}
        assert after <= before and server.pid is None


async def test_status_requests_are_logged_by_the_front(
    capfd: pytest.CaptureFixture[str], worker: FakeWorker
) -> None:
    # The front logs request lines when the worker's access logger would (levels change at
    # run time); this worker's process runs at pytest's levels.
    logging.getLogger("connectd.rest.access").setLevel(logging.INFO)
    # Started here, so that the front inherits the captured stderr.
    async with (
        serve(worker, local_settings(), front=True) as server,
        aiohttp.ClientSession(server.url) as session,
    ):
        client = Client(session)
        await client.create(NAME)
        await client.get(f"/connectors/{NAME}/status", headers=_basic("alice", "pw"))
        await client.get(f"/connectors/{NAME}/tasks/0/status")
        lines: list[str] = []

        async def logged() -> bool:
            lines.extend(capfd.readouterr().err.splitlines())
            return any(f"GET /connectors/{NAME}/status 200" in line for line in lines) and any(
                f"GET /connectors/{NAME}/tasks/0/status 200" in line for line in lines
            )

        end = time.monotonic() + 5.0
        while not await logged():
            assert time.monotonic() < end, lines
            await asyncio.sleep(0.05)
    assert not any("Authorization" in line or "Basic" in line for line in lines), lines


def test_snapshot_json_is_what_the_front_serves() -> None:
    from daemon.rest.front.mirror import Mirror

    mirror = Mirror(max_age=60)
    status = {"name": "a", "connector": {"state": "RUNNING"}, "tasks": [{"id": 3, "x": "é"}]}
    assert mirror.install({"seq": 2, "access_log": False, "connectors": {"a": status}})
    assert not mirror.install({"seq": 1, "connectors": {}})  # an older answer arriving late
    assert json.loads(mirror.lookup("a") or b"") == status
    assert mirror.lookup("a", 3) == '{"id":3,"x":"é"}'.encode()
    assert mirror.lookup("a", 0) is None and mirror.lookup("b") is None
    assert mirror.access_log is False
    stale = Mirror(max_age=0.5)
    stale.install({"seq": 1, "connectors": {"a": status}}, taken=time.monotonic() - 1)
    assert stale.lookup("a") is None
    stale.confirm(2, time.monotonic())  # not the snapshot it holds: still stale
    assert stale.lookup("a") is None
    stale.confirm(1, time.monotonic())  # the worker answered "unchanged" (304) just now
    assert stale.lookup("a") is not None


async def _raw(url: str, request: bytes) -> tuple[int, dict[str, str], bytes]:
    """One request as given, byte for byte (no client normalising its path); the answer."""
    host, port = url.removeprefix("http://").rsplit(":", 1)
    reader, writer = await asyncio.open_connection(host, int(port))
    try:
        writer.write(request)
        await writer.drain()
        raw = await asyncio.wait_for(reader.read(), timeout=10)
    finally:
        writer.close()
        await writer.wait_closed()
    head, _, body = raw.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    headers = dict(line.split(": ", 1) for line in lines[1:])
    return int(lines[0].split()[1]), headers, body


async def test_the_front_answers_byte_for_byte_as_the_worker(worker: FakeWorker) -> None:
    """Odd requests, sent as raw bytes to the worker's own server and through the front over the
    same worker: the same status, body and (for HEAD) length."""
    same_answer = [
        b"GET /connectors/x/../y/status HTTP/1.1\r\n\r\n",
        b"GET //foo/connectors HTTP/1.1\r\n\r\n",
        b"GET /connectors/%zz/status HTTP/1.1\r\n\r\n",
        b"GET /connectors?expand=bogus HTTP/1.1\r\n\r\n",
        b"GET /connectors/a%2Fb/status HTTP/1.1\r\n\r\n",
        b"HEAD /connectors HTTP/1.1\r\n\r\n",
        b"HEAD /connectors/" + NAME.encode() + b"/status HTTP/1.1\r\n\r\n",
    ]
    body = {"name": "zipped", "config": {"connector.class": "HangSink", "topics": "t"}}
    zipped = gzip.compress(json.dumps(body).encode())
    create = (
        b"POST /connectors HTTP/1.1\r\nContent-Type: application/json\r\n"
        b"Content-Encoding: gzip\r\nContent-Length: %d\r\n\r\n%s" % (len(zipped), zipped)
    )
    delete = b"DELETE /connectors/zipped HTTP/1.1\r\n\r\n"
    async with (
        serve(worker, local_settings()) as direct,
        serve(worker, local_settings(), front=True) as fronted,
        aiohttp.ClientSession(direct.url) as session,
    ):
        assert (await Client(session).create(NAME)).status == 201
        for case in same_answer:
            want = await _raw(direct.url, _close(case))
            got = await _raw(fronted.url, _close(case))
            assert (got[0], got[2]) == (want[0], want[2]), case
            if case.startswith(b"HEAD"):
                assert got[1].get("Content-Length") == want[1].get("Content-Length"), case
        # A gzip body reaches the worker as sent: created (as the worker alone does), deleted.
        for url in (direct.url, fronted.url):
            assert (await _raw(url, _close(create)))[0] == 201, url
            assert (await _raw(url, _close(delete)))[0] == 204, url


def _close(request: bytes) -> bytes:
    head, _, body = request.partition(b"\r\n\r\n")
    return head + b"\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n" + body
