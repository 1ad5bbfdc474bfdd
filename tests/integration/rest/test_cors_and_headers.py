"""Connect's CORS, configured response headers and ``admin.listeners=`` (empty) on a real
daemon, served by the REST front process and, with ``rest.front.process=false``, by the
worker's own loop. The expected answers are those a real Connect 4.1.2 worker gave for the
same settings (Jetty 12's CrossOriginHandler and HeaderFilter; transcripts in the closing note
of the change)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from support.daemon import ProcessFactory, wait_until, worker_properties
from support.kafka import free_port

pytestmark = pytest.mark.integration

ORIGIN = "https://a.example.com"


@pytest.mark.parametrize("front", ["true", "false"])
async def test_cors_headers_and_a_disabled_admin_api_as_connect_answers_them(
    daemon_process: ProcessFactory, kafka_bootstrap: str, tmp_path: Path, front: str
) -> None:
    worker = worker_properties(
        kafka_bootstrap,
        tmp_path / "state",
        **{
            "rest.front.process": front,
            "access.control.allow.origin": "https://a\\.example\\.com,https://.*\\.corp\\.test",
            "access.control.allow.methods": "GET,PUT",
            "response.http.headers.config": (
                'add X-Frame-Options: DENY, set Cache-Control: no-store, "add X-List: a, b",'
                " setDate Expires: 3600000"
            ),
            "admin.listeners": "",
        },
    )
    sink = {"name": "echo", "connector.class": "EchoSink", "topics": "cors-topic"}
    p = daemon_process(worker, [sink])

    async with aiohttp.ClientSession(base_url=p.url) as http:

        async def ask(method: str, path: str, **headers: str) -> aiohttp.ClientResponse:
            async with http.request(method, path, headers=headers) as answer:
                await answer.read()
                return answer

        async def running() -> bool:
            answer = await ask("GET", "/connectors/echo/status")
            return answer.status == 200

        await wait_until(running, 60, "the connector's status", interval=0.2)

        def configured(answer: aiohttp.ClientResponse) -> None:
            assert answer.headers["X-Frame-Options"] == "DENY"
            assert answer.headers["Cache-Control"] == "no-store"
            assert answer.headers["X-List"] == "a, b"  # a quoted rule keeps its comma
            assert answer.headers["Expires"].endswith(" GMT")

        # (a) an allowed origin, on the API's answers and its errors, mirror-served or not
        for path, status in (("/", 200), ("/connectors/echo/status", 200), ("/connectors/x", 404)):
            answer = await ask("GET", path, Origin=ORIGIN)
            assert answer.status == status, path
            assert answer.headers["Vary"] == "Origin"
            assert answer.headers["Access-Control-Allow-Origin"] == ORIGIN
            assert "Access-Control-Allow-Methods" not in answer.headers
            configured(answer)
        # a pattern is a regular expression over the whole origin, case-insensitive
        answer = await ask("GET", "/", Origin="HTTPS://EU.CORP.TEST")
        assert answer.headers["Access-Control-Allow-Origin"] == "HTTPS://EU.CORP.TEST"
        # (b) another origin, (d) no origin: answered as usual, Vary only
        for headers in ({"Origin": "https://a.example.com:443"}, {}):
            answer = await ask("GET", "/", **headers)
            assert answer.status == 200
            assert answer.headers["Vary"] == "Origin"
            assert "Access-Control-Allow-Origin" not in answer.headers
            configured(answer)
        # (c) a preflight: answered by the API's OPTIONS, whatever method it asks for
        for method in ("PUT", "DELETE"):
            answer = await ask(
                "OPTIONS", "/connectors", Origin=ORIGIN, **{"Access-Control-Request-Method": method}
            )
            assert answer.status == 200
            assert set(answer.headers["Allow"].split(",")) >= {"GET", "POST", "OPTIONS"}
            assert answer.headers["Access-Control-Allow-Origin"] == ORIGIN
            assert answer.headers["Access-Control-Allow-Methods"] == "GET,PUT"
            assert answer.headers["Access-Control-Allow-Headers"] == "Content-Type"
            assert answer.headers["Access-Control-Max-Age"] == "60"
            configured(answer)
        # HEAD answers carry them too.
        async with http.head("/connectors", headers={"Origin": ORIGIN}) as head:
            assert head.status == 200
            assert head.headers["Access-Control-Allow-Origin"] == ORIGIN
            configured(head)
        # admin.listeners empty: /admin is an unknown path, Jersey's 404
        for method, path in (("GET", "/admin/loggers"), ("PUT", "/admin/loggers/root")):
            async with http.request(method, path, json={"level": "DEBUG"}) as answer:
                assert answer.status == 404
                assert json.loads(await answer.read()) == {
                    "error_code": 404,
                    "message": "HTTP 404 Not Found",
                }
                configured(answer)
    assert "Traceback" not in p.log()


@pytest.mark.parametrize(
    ("settings", "said"),
    [
        (
            {"response.http.headers.config": "set X-A: b:c"},
            [
                "response.http.headers.config: Invalid format of header name and header value"
                " pair 'X-A: b:c'. Expected: '[header name]:[header value]'"
            ],
        ),
        (
            {
                "admin.listeners": "http://127.0.0.1:18084,",
                "admin.listeners.https.ssl.keystore.location": "/etc/admin.p12",
            },
            [
                "admin.listeners: Empty URL found when parsing admin.listeners list.",
                "admin.listeners.https.ssl.keystore.location: connectd's admin listeners use",
            ],
        ),
    ],
    ids=["header-rule", "admin-listeners"],
)
async def test_bad_values_are_refused_with_connects_messages(
    daemon_process: ProcessFactory,
    kafka_bootstrap: str,
    tmp_path: Path,
    settings: dict[str, str],
    said: list[str],
) -> None:
    worker = worker_properties(kafka_bootstrap, tmp_path / "state", **settings)
    p = daemon_process(worker, [], wait=False)
    assert p.wait(60) == 78
    log = p.log()
    for message in said:
        assert message in log, log


@pytest.mark.parametrize("front", ["true", "false"])
async def test_separate_admin_listeners_serve_admin_and_nothing_else(
    daemon_process: ProcessFactory, kafka_bootstrap: str, tmp_path: Path, front: str
) -> None:
    """As a Connect 4.1.2 worker answered: /admin/loggers only on the admin listener, Jersey's
    404 for every other path there and for /admin on the main listener; no CORS or configured
    headers on the admin listener."""
    admin_port = free_port()
    worker = worker_properties(
        kafka_bootstrap,
        tmp_path / "state",
        **{
            "rest.front.process": front,
            "admin.listeners": f"http://127.0.0.1:{admin_port}",
            "access.control.allow.origin": "*",
            "response.http.headers.config": "add X-Frame-Options: DENY",
        },
    )
    p = daemon_process(worker, [])
    admin = f"http://127.0.0.1:{admin_port}"
    not_found = {"error_code": 404, "message": "HTTP 404 Not Found"}
    async with aiohttp.ClientSession() as http:

        async def ask(
            method: str, url: str, body: Any = None
        ) -> tuple[int, Any, aiohttp.typedefs.LooseHeaders]:
            async with http.request(method, url, json=body, headers={"Origin": ORIGIN}) as r:
                return r.status, json.loads(await r.read() or b"null"), r.headers

        status, body, headers = await ask("GET", f"{admin}/admin/loggers")
        assert status == 200 and "root" in body, body
        assert "Vary" not in headers and "X-Frame-Options" not in headers
        status, body, _ = await ask("PUT", f"{admin}/admin/loggers/connectd.admintest", {
            "level": "DEBUG"})  # fmt: skip
        assert status == 200 and "connectd.admintest" in body, body
        for path in ("/", "/connectors", "/nope"):
            status, body, _ = await ask("GET", admin + path)
            assert (status, body) == (404, not_found), path
        status, body, headers = await ask("GET", f"{p.url}/admin/loggers")
        assert (status, body) == (404, not_found)
        # A client cannot pass for the admin listener on the main one.
        async with http.get(
            f"{p.url}/admin/loggers", headers={"X-Connectd-Admin-Listener": "1"}
        ) as r:
            assert r.status == 404
        assert headers["X-Frame-Options"] == "DENY" and headers["Vary"] == "Origin"
        status, _, _ = await ask("GET", f"{p.url}/connectors")
        assert status == 200
    assert "Traceback" not in p.log()
