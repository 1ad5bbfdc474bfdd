"""The hang demo's REST calls (tests/fixtures/hang-demo/calls.toml), sent the way curl sends them.

The demo drives Connect's REST API with curl. Its calls are kept as data in the repository and
replayed here with aiohttp, so the tests that replay it need neither curl nor anything outside
the checkout:

- ``load()`` returns the calls in order, each with its request body already as curl would send
  it (``--data @file`` drops CR and LF) and the answer it must get.
- ``send(session, base, call)`` sends one; ``check(call, status, text)`` compares the answer.
"""

from __future__ import annotations

import json
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "hang-demo"
NAME = "sink-hang-connector"


@dataclass(frozen=True)
class Call:
    what: str
    method: str
    path: str
    status: int
    headers: Mapping[str, str] = field(default_factory=dict)
    data: bytes | None = None
    body: str | None = None
    """The exact answer body, when the demo's answer is fixed text (the restart's empty 204)."""
    json: Any = None
    """The answer as JSON, when the demo shows one (the connector, keys in order)."""


def curl_data(raw: bytes) -> bytes:
    """What ``curl --data @file`` sends: the file without carriage returns and newlines."""
    return raw.replace(b"\r", b"").replace(b"\n", b"")


def load() -> list[Call]:
    spec = tomllib.loads((FIXTURES / "calls.toml").read_text(encoding="utf-8"))
    calls = []
    for entry in spec["call"]:
        data_file = entry.get("data_file")
        json_file = entry.get("json_file")
        calls.append(
            Call(
                what=entry["what"],
                method=entry["method"],
                path=entry["path"],
                status=entry["status"],
                headers=dict(entry.get("headers", {})),
                data=curl_data((FIXTURES / data_file).read_bytes()) if data_file else None,
                body=entry.get("body"),
                json=json.loads((FIXTURES / json_file).read_text()) if json_file else None,
            )
        )
    return calls


def connector() -> dict[str, Any]:
    """The connector the demo submits, as JSON."""
    submit = next(c for c in load() if c.data is not None)
    value: dict[str, Any] = json.loads(submit.data or b"")
    return value


async def send(
    session: aiohttp.ClientSession, base: str, call: Call, *, data: bytes | None = None
) -> tuple[int, str]:
    """Send ``call`` to ``base`` (``http://host:port``); ``data`` replaces its body if given.

    Returns the status and the body as text.
    """
    headers = {"Accept": "*/*", **call.headers}  # curl's default Accept, then the demo's -H
    body = call.data if data is None else data
    async with session.request(
        call.method,
        base + call.path,
        headers=headers,
        data=body,
        timeout=aiohttp.ClientTimeout(total=120),
    ) as response:
        return response.status, await response.text()


def check(call: Call, status: int, text: str) -> Any:
    """Assert the answer is the one the demo expects; returns the JSON body if it has one."""
    assert status == call.status, f"{call.what}: {call.method} {call.path} -> {status}: {text}"
    if call.body is not None:
        assert text == call.body, f"{call.what}: body {text!r}"
    return json.loads(text) if text else None
