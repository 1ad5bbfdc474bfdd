"""Basic authentication, ``connectd passwd``, and an access log free of secrets."""

from __future__ import annotations

import base64
import io
import logging
import os
import stat
import time
from pathlib import Path

import pytest
from support.fake_worker import Client, FakeWorker, local_settings, serving_client

from daemon.errors import ConfigError
from daemon.rest import create_app, passwd_main
from daemon.rest.auth import CHALLENGE, hash_password, parse_line, read_credentials

PASSWORD = "correct horse"


def _basic(user: str, password: str) -> dict[str, str]:
    token = base64.b64encode(f"{user}:{password}".encode()).decode()
    return {"Authorization": f"Basic {token}"}


@pytest.fixture
def credentials(tmp_path: Path) -> Path:
    path = tmp_path / "credentials"
    assert (
        passwd_main([str(path), "alice"], stdin=io.StringIO(PASSWORD + "\n"), stdout=io.StringIO())
        == 0
    )
    return path


async def test_every_path_but_health_needs_credentials(credentials: Path) -> None:
    settings = local_settings(credentials_file=credentials)
    async with serving_client(FakeWorker(), settings) as client:
        for path in ("/", "/connectors", "/metrics", "/openapi.json", "/no/such/path"):
            answer = await client.get(path)
            assert answer.error(401).startswith("HTTP 401 Unauthorized")
            assert answer.headers["WWW-Authenticate"] == CHALLENGE
        assert (await client.get("/health")).status == 200
        assert (await client.get("/", headers=_basic("alice", PASSWORD))).status == 200
        answer = await client.call("POST", "/connectors", json={})
        answer.error(401)  # credentials are checked before the body


@pytest.mark.parametrize(
    "headers",
    [
        _basic("alice", "wrong"),
        _basic("mallory", PASSWORD),
        {"Authorization": "Basic !!!not-base64"},
        {"Authorization": "Bearer abc"},
        {"Authorization": "Basic " + base64.b64encode(b"no-colon").decode()},
    ],
)
async def test_bad_credentials_are_401(credentials: Path, headers: dict[str, str]) -> None:
    async with serving_client(FakeWorker(), local_settings(credentials_file=credentials)) as client:
        answer = await client.get("/connectors", headers=headers)
        answer.error(401)
        assert answer.headers["WWW-Authenticate"] == CHALLENGE


async def test_passed_credentials_are_cheap_the_second_time(credentials: Path) -> None:
    async with serving_client(FakeWorker(), local_settings(credentials_file=credentials)) as client:
        headers = _basic("alice", PASSWORD)
        assert (await client.get("/connectors", headers=headers)).status == 200
        start = time.perf_counter()
        for _ in range(20):
            assert (await client.get("/connectors", headers=headers)).status == 200
        per_request = (time.perf_counter() - start) / 20
        assert per_request < 0.02, f"{per_request * 1000:.1f} ms per request: no cache?"


async def test_users_added_later_are_accepted_without_restart(credentials: Path) -> None:
    async with serving_client(FakeWorker(), local_settings(credentials_file=credentials)) as client:
        (await client.get("/", headers=_basic("bob", "hunter2"))).error(401)
        assert (
            passwd_main(
                [str(credentials), "bob"], stdin=io.StringIO("hunter2\n"), stdout=io.StringIO()
            )
            == 0
        )
        assert (await client.get("/", headers=_basic("bob", "hunter2"))).status == 200
        assert (await client.get("/", headers=_basic("alice", PASSWORD))).status == 200


async def test_a_broken_file_locks_everybody_out(credentials: Path) -> None:
    async with serving_client(FakeWorker(), local_settings(credentials_file=credentials)) as client:
        assert (await client.get("/", headers=_basic("alice", PASSWORD))).status == 200
        credentials.write_text("alice:garbage\n")
        (await client.get("/", headers=_basic("alice", PASSWORD))).error(401)


def test_unreadable_or_malformed_file_fails_at_start(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot read"):
        create_app(FakeWorker(), settings=local_settings(credentials_file=tmp_path / "missing"))
    bad = tmp_path / "bad"
    bad.write_text("# users\n\nalice:$scrypt$ln=14,r=8,p=1$AAAA\n")
    with pytest.raises(ConfigError, match=r"bad:3: .*connectd passwd"):
        read_credentials(bad)


def test_hash_format_and_parse() -> None:
    # With spaces: Base64 never holds one, so the password cannot turn up in the hash by
    # chance (a 2-letter one did, once in ~70 runs: "...ftpw$...").
    password = "open sesame"
    hashed = hash_password(password)
    assert hashed.startswith("$scrypt$ln=14,r=8,p=1$")
    credential = parse_line(f"carol:{hashed}")
    assert credential.user == "carol"
    assert credential.matches(password) and not credential.matches("open Sesame")
    assert password not in hashed
    for line in ("nocolon", "a b:" + hashed, ":" + hashed, "x:$md5$a$b$c"):
        with pytest.raises(ValueError):
            parse_line(line)


def test_passwd_adds_changes_and_keeps_others(tmp_path: Path) -> None:
    path = tmp_path / "users"
    out = io.StringIO()
    assert passwd_main([str(path), "alice"], stdin=io.StringIO("one\n"), stdout=out) == 0
    assert "added user alice" in out.getvalue()
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    assert passwd_main([str(path), "bob"], stdin=io.StringIO("two"), stdout=io.StringIO()) == 0
    out = io.StringIO()
    assert passwd_main([str(path), "alice"], stdin=io.StringIO("three\n"), stdout=out) == 0
    assert "changed the password of user alice" in out.getvalue()
    users = read_credentials(path)
    assert set(users) == {"alice", "bob"}
    assert users["alice"].matches("three") and users["bob"].matches("two")
    assert "three" not in path.read_text()


@pytest.mark.parametrize(
    ("user", "stdin", "code"), [("a:b", "pw\n", 64), ("a b", "pw\n", 64), ("ok", "\n", 65)]
)
def test_passwd_refuses_bad_input(tmp_path: Path, user: str, stdin: str, code: int) -> None:
    err = io.StringIO()
    assert passwd_main([str(tmp_path / "u"), user], stdin=io.StringIO(stdin), stderr=err) == code
    assert err.getvalue().startswith("connectd passwd: ")
    assert not (tmp_path / "u").exists()


def test_passwd_prompts_twice_on_a_terminal(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    class Tty(io.StringIO):
        def isatty(self) -> bool:
            return True

    answers = iter(["secret", "other"])
    monkeypatch.setattr("getpass.getpass", lambda prompt: next(answers))
    err = io.StringIO()
    assert passwd_main([str(tmp_path / "u"), "dave"], stdin=Tty(), stderr=err) == 65
    assert "differ" in err.getvalue()
    answers = iter(["secret", "secret"])
    assert passwd_main([str(tmp_path / "u"), "dave"], stdin=Tty(), stdout=io.StringIO()) == 0
    assert read_credentials(tmp_path / "u")["dave"].matches("secret")


async def test_access_log_has_method_path_status_duration_and_no_secrets(
    credentials: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="connectd.rest.access")
    async with serving_client(FakeWorker(), local_settings(credentials_file=credentials)) as client:
        headers = _basic("alice", PASSWORD)
        body = {
            "name": "logged",
            "config": {"connector.class": "HangSink", "topics": "t", "x.password": "hunter2"},
        }
        assert (await client.call("POST", "/connectors", json=body, headers=headers)).status == 201
        await client.get("/connectors?expand=status&token=abc", headers=headers)
        await client.get("/connectors", headers=_basic("alice", "wrong-password"))
    lines = [r.getMessage() for r in caplog.records if r.name == "connectd.rest.access"]
    assert any(line.startswith("POST /connectors 201 ") and line.endswith("ms") for line in lines)
    assert any(line.startswith("GET /connectors 200 ") for line in lines)
    assert any(line.startswith("GET /connectors 401 ") for line in lines)
    text = "\n".join(r.getMessage() for r in caplog.records)
    for secret in ("hunter2", PASSWORD, "wrong-password", "token=abc", "Basic ", "HangSink"):
        assert secret not in text


async def test_control_characters_in_paths_cannot_forge_log_lines(
    client: Client, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="connectd.rest.access")
    await client.get("/connectors/evil%0AGET%20/forged%20200")
    lines = [r.getMessage() for r in caplog.records if r.name == "connectd.rest.access"]
    assert lines and all("\n" not in line for line in lines)
