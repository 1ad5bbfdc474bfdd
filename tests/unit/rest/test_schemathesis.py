"""schemathesis against ``/openapi.json`` of a real server: no 5xx, no answer off its schema.

Runs schemathesis's CLI (examples, coverage, fuzzing and stateful phases, positive and negative
data) with every check but ``positive_data_acceptance``: a configuration's validity depends on
its connector class, which no JSON Schema can express, so schema-valid bodies may rightly be
refused with 400. Bounded (``--max-examples``, a fixed seed) to stay well under a minute.
"""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path

import pytest
from support.fake_worker import FakeWorker, local_settings, serve

from daemon.rest.auth import hash_password

SCHEMATHESIS = Path(sys.executable).parent / "schemathesis"
pytestmark = pytest.mark.timeout(120)


async def _run(url: str, cwd: Path, *extra: str, exclude: str = "") -> tuple[int, str]:
    process = await asyncio.create_subprocess_exec(
        str(SCHEMATHESIS),
        "run",
        f"{url}/openapi.json",
        "--checks",
        "all",
        "--exclude-checks",
        ",".join(filter(None, ["positive_data_acceptance", exclude])),
        "--seed",
        "1",
        "--workers",
        "1",
        "--request-timeout",
        "10",
        *extra,
        cwd=cwd,  # its hypothesis database goes here, not into the checkout
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
        env={**os.environ, "NO_COLOR": "1", "SCHEMATHESIS_TELEMETRY": "false"},
    )
    try:
        output, _ = await asyncio.wait_for(process.communicate(), timeout=100)
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
    return process.returncode or 0, output.decode(errors="replace")


@pytest.mark.parametrize("front", [False, True], ids=["worker-loop", "front-process"])
async def test_schemathesis_finds_nothing(tmp_path: Path, front: bool) -> None:
    """Also through the REST front process, which answers status itself and passes the rest on:
    what it relays must be what the worker answered, whatever the request looked like."""
    assert SCHEMATHESIS.exists(), f"schemathesis is not installed at {SCHEMATHESIS}"
    async with serve(FakeWorker(), front=front) as server:
        code, output = await _run(server.url, tmp_path, "--max-examples", "15")
    assert code == 0, output
    assert "passed" in output


async def test_schemathesis_with_basic_auth(tmp_path: Path) -> None:
    credentials = tmp_path / "users"
    credentials.write_text(f"fuzzer:{hash_password('s3cret pass')}\n")
    settings = local_settings(credentials_file=credentials)
    async with serve(FakeWorker(), settings) as server:
        code, output = await _run(
            server.url,
            tmp_path,
            "--max-examples",
            "5",
            "--auth",
            "fuzzer:s3cret pass",
            "--phases",
            "examples,coverage,fuzzing",
            # --auth puts valid credentials back into cases meant to lack them, so its
            # "negative" cases are not negative; the run without auth covers that check.
            exclude="negative_data_rejection",
        )
    assert code == 0, output
