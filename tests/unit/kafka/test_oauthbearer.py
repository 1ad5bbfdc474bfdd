"""OAUTHBEARER tokens (daemon.kafka.oauthbearer) and their settings (daemon.config.kafka).

The token endpoint is a real aiohttp server on loopback; the broker's check of the tokens is in
tests/integration/kafka/test_secure_broker.py.
"""

from __future__ import annotations

import asyncio
import base64
import json
import ssl
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web
from support import jwt
from support.tls import TRUST_PASS, Stores, make_stores

from daemon.config.parse import parse_worker
from daemon.errors import InvalidConfig
from daemon.kafka import oauthbearer as ob
from daemon.runtime.clients import security_settings, token_source

MODULE = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required"
HANDLER = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginCallbackHandler"


def _jwt(claims: dict[str, Any]) -> str:
    def b64(value: dict[str, Any]) -> str:
        return base64.urlsafe_b64encode(json.dumps(value).encode()).rstrip(b"=").decode()

    return f"{b64({'alg': 'RS256'})}.{b64(claims)}.c2lnbmF0dXJl"


def test_an_unsecured_tokens_times_are_whole_milliseconds() -> None:
    """The broker refuses an iat past its millisecond clock: a finer one may be, for up to a
    millisecond after it was made."""
    _, claims, _ = jwt.parts(ob.unsecured_token({"unsecuredLoginStringClaim_sub": "a"}, 5.1234567))
    assert (claims["iat"], claims["exp"]) == (5.123, 3605.123)


def test_an_unsecured_token_is_kafkas_unsigned_jwt() -> None:
    options = {
        "unsecuredLoginStringClaim_sub": "alice",
        "unsecuredLoginListClaim_scope": "|read|write",
        "unsecuredLoginNumberClaim_level": "3",
        "unsecuredLoginLifetimeSeconds": "60",
    }
    header, claims, signature = jwt.parts(ob.unsecured_token(options, now=1000.5))
    assert header == {"alg": "none"} and signature == ""
    assert claims == {
        "exp": 1060.5,
        "iat": 1000.5,
        "sub": "alice",
        "scope": ["read", "write"],
        "level": 3.0,
    }


@pytest.mark.parametrize(
    ("value", "items"),
    [
        ("", []),
        ("|", []),
        ("|a", ["a"]),
        (",a,b", ["a", "b"]),
        ("|a||b", ["a", "", "b", ""]),  # Kafka appends one empty element for any empty one
        ("|a|", ["a", ""]),
    ],
)
def test_list_claims_split_as_kafka_splits_them(value: str, items: list[str]) -> None:
    assert ob._list_claim(value) == items


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({}, 'unsecuredLoginStringClaim_sub="<principal>"'),
        ({"unsecuredLoginExtension_x": "y"}, "unsecuredLoginStringClaim_sub"),
        ({"unsecuredLoginStringClaim_exp": "1"}, "cannot explicitly set the 'exp' claim"),
        (
            {"unsecuredLoginStringClaim_sub": "a", "unsecuredLoginLifetimeSeconds": "soon"},
            "unsecuredLoginLifetimeSeconds must be a whole number",
        ),
        ({"unsecuredLoginStringClaim_name": "a"}, "the unsecured token has no principal"),
        (
            {"unsecuredLoginStringClaim_sub": "a", "unsecuredLoginNumberClaim_n": "x"},
            "unsecuredLoginNumberClaim_n must be a number",
        ),
    ],
)
def test_unsecured_options_that_make_no_token_are_named(
    options: dict[str, str], message: str
) -> None:
    with pytest.raises(ob.OAuthBearerError, match=r"sasl\.jaas\.config") as caught:
        ob.unsecured_token(options)
    assert message in str(caught.value)


def test_extensions_are_checked_as_kafka_checks_them() -> None:
    assert ob.extensions({"unsecuredLoginExtension_traceId": "123"}, secured=False) == {
        "traceId": "123"
    }
    assert ob.extensions({"extension_logicalCluster": "lkc-1"}, secured=True) == {
        "logicalCluster": "lkc-1"
    }
    for bad in ({"extension_auth": "x"}, {"extension_a1": "x"}, {"extension_a": "\x01"}):
        with pytest.raises(ob.OAuthBearerError, match="extension"):
            ob.extensions(bad, secured=True)


def test_refresh_time_follows_kafkas_window_buffer_and_min_period() -> None:
    """ExpiringCredentialRefreshingLogin.refreshMs, branch by branch."""
    plain = ob.Refresh(window_factor=0.8, window_jitter=0.0, min_period=60, buffer=300)
    assert plain.due(0, 3600, now=0) == 2880  # 80 % of an hour
    assert ob.Refresh(0.8, 0.0, 60, 1000).due(0, 3600, now=0) == 2600  # 1000 s before the end
    # What remains cannot hold min period + buffer: that fraction of what remains.
    assert plain.due(0, 320, now=0) == 256
    assert plain.due(0, 30, now=0) == 24
    assert plain.due(0, 1000, now=900) == 980
    assert ob.Refresh(0.5, 0.0, 600, 0).due(0, 1000, now=0) == 600  # not sooner than min period
    assert plain.due(0, 100, now=150) == 150  # expired: replaced at once
    jittered = ob.Refresh(0.8, 0.05, 0, 0)
    assert all(2880 <= jittered.due(0, 3600, now=0) <= 3060 for _ in range(50))


def _config(**values: str) -> dict[str, str]:
    return {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "OAUTHBEARER", **values}


def _error(values: dict[str, str]) -> str:
    with pytest.raises(InvalidConfig) as caught:
        parse_worker(values, file="w.properties")
    [error] = [str(p) for p in caught.value.problems if p.is_error]
    return error


def test_an_unsecured_oauthbearer_worker_is_accepted_and_its_clients_share_one_source() -> None:
    jaas = f'{MODULE} unsecuredLoginStringClaim_sub="alice";'
    config, warnings = parse_worker(_config(**{"sasl.jaas.config": jaas}))
    assert warnings == []
    settings = config.oauth_settings()
    assert settings.endpoint is None and dict(settings.jaas) == {
        "unsecuredLoginStringClaim_sub": "alice"
    }
    one, two = security_settings(config), security_settings(config)
    assert one["sasl_mechanism"] == "OAUTHBEARER"
    assert one["sasl_oauth_token_provider"] is two["sasl_oauth_token_provider"]
    assert "sasl_plain_username" not in one


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ({}, "sasl.jaas.config: OAUTHBEARER needs org.apache.kafka.common.security.oauthbearer"),
        ({"sasl.jaas.config": f"{MODULE};"}, "sasl.jaas.config: an unsecured OAUTHBEARER login"),
        (
            {
                "sasl.jaas.config": f'{MODULE} unsecuredLoginStringClaim_sub="a";',
                "sasl.login.callback.handler.class": "com.example.MyHandler",
            },
            "sasl.login.callback.handler.class: com.example.MyHandler is a Java class",
        ),
        (
            {
                "sasl.jaas.config": f'{MODULE} clientId="c" clientSecret="s";',
                "sasl.login.callback.handler.class": HANDLER,
            },
            "sasl.oauthbearer.token.endpoint.url: " + HANDLER + " needs the token endpoint's URL",
        ),
        (
            {
                "sasl.jaas.config": f'{MODULE} clientId="c" clientSecret="s";',
                "sasl.oauthbearer.token.endpoint.url": "https://idp/token",
            },
            "sasl.login.callback.handler.class: sasl.oauthbearer.token.endpoint.url is set",
        ),
        (
            {
                "sasl.jaas.config": f'{MODULE} clientId="c";',
                "sasl.login.callback.handler.class": HANDLER,
                "sasl.oauthbearer.token.endpoint.url": "https://idp/token",
            },
            "sasl.oauthbearer.client.credentials.client.secret: the client credentials grant",
        ),
        (
            {
                "sasl.jaas.config": f'{MODULE} clientId="c" clientSecret="s";',
                "sasl.login.callback.handler.class": HANDLER,
                "sasl.oauthbearer.token.endpoint.url": "ftp://idp/token",
            },
            "sasl.oauthbearer.token.endpoint.url: 'ftp://idp/token' is not an http",
        ),
        (
            {"sasl.jaas.config": f'{MODULE} unsecuredLoginStringClaim_sub="a";',
             "sasl.login.class": "com.example.Login"},
            "sasl.login.class: a Java class that Kafka's clients load",
        ),
        (
            {"sasl.jaas.config": f'{MODULE} unsecuredLoginStringClaim_sub="a";',
             "sasl.oauthbearer.assertion.file": "/a.jwt"},
            "sasl.oauthbearer.assertion.file: the JWT bearer grant (KIP-1139)",
        ),
        (
            {"sasl.jaas.config": f'{MODULE} unsecuredLoginStringClaim_sub="a";',
             "sasl.login.refresh.window.factor": "0.3"},
            "sasl.login.refresh.window.factor: '0.3' is out of range",
        ),
    ],
)  # fmt: skip
def test_oauthbearer_settings_connectd_cannot_honour_are_refused_by_name(
    values: dict[str, str], message: str
) -> None:
    assert message in _error(_config(**values))


def test_client_credentials_settings_of_kafka_4_1_win_over_the_jaas_options() -> None:
    config, _ = parse_worker(
        _config(
            **{
                "sasl.jaas.config": f'{MODULE} clientId="old" clientSecret="old" scope="a";',
                "sasl.login.callback.handler.class": HANDLER,
                "sasl.oauthbearer.token.endpoint.url": "http://127.0.0.1:1/token",
                "sasl.oauthbearer.client.credentials.client.id": "new-id",
                "sasl.oauthbearer.client.credentials.client.secret": "new-secret",
                "sasl.oauthbearer.scope": "kafka",
                "sasl.login.retry.backoff.max.ms": "2000",
                "sasl.login.retry.backoff.ms": "50",
                "sasl.login.connect.timeout.ms": "500",
                "sasl.login.read.timeout.ms": "700",
                "sasl.oauthbearer.header.urlencode": "true",
                "sasl.oauthbearer.sub.claim.name": "client_id",
                "sasl.oauthbearer.scope.claim.name": "scp",
                "sasl.login.refresh.window.factor": "0.9",
                "sasl.login.refresh.window.jitter": "0.1",
                "sasl.login.refresh.min.period.seconds": "30",
                "sasl.login.refresh.buffer.seconds": "120",
            }
        )
    )
    settings = config.oauth_settings()
    endpoint = settings.endpoint
    assert endpoint is not None
    assert (endpoint.client_id, endpoint.client_secret, endpoint.scope) == (
        "new-id",
        "new-secret",
        "kafka",
    )
    assert (endpoint.retry_backoff_max, endpoint.connect_timeout) == (2.0, 0.5)
    assert (endpoint.retry_backoff, endpoint.read_timeout, endpoint.urlencode_header) == (
        0.05,
        0.7,
        True,
    )
    assert (settings.principal_claim, settings.scope_claim) == ("client_id", "scp")
    assert settings.refresh == ob.Refresh(0.9, 0.1, 30.0, 120.0)
    source = token_source(config)
    assert (source.principal_claim, source.scope_claim, source.refresh) == (
        "client_id",
        "scp",
        settings.refresh,
    )


async def test_the_principal_claim_name_chooses_which_claim_names_the_principal(
    endpoint_server: Callable[[Handler], Any],
) -> None:
    token = _jwt({"client_id": "svc", "exp": 4_000_000_000})

    async def handler(request: web.Request) -> web.Response:
        return web.json_response({"access_token": token})

    url = await endpoint_server(handler)
    with pytest.raises(ob.OAuthBearerError, match="no 'sub' claim"):
        await ob.TokenSource({}, endpoint=ob.Endpoint(url, "c", "s")).token()
    source = ob.TokenSource({}, endpoint=ob.Endpoint(url, "c", "s"), principal_claim="client_id")
    assert await source.token() == token


async def test_an_answer_slower_than_the_read_timeout_is_asked_again_then_given_up(
    endpoint_server: Callable[[Handler], Any],
) -> None:
    """sasl.login.read.timeout.ms bounds each answer; the retries end at retry.backoff.max."""
    asked: list[float] = []

    async def slow(request: web.Request) -> web.Response:
        asked.append(1.0)
        await asyncio.sleep(1.0)  # the server's slowness, not the test's synchronisation
        return web.json_response({})

    url = await endpoint_server(slow)
    endpoint = ob.Endpoint(
        url, "c", "s", read_timeout=0.2, retry_backoff=0.05, retry_backoff_max=0.6
    )
    with pytest.raises(ob.OAuthBearerError, match="could not be reached"):
        await ob.fetch_token(endpoint)
    assert len(asked) >= 2  # asked again after a timed-out answer


Handler = Callable[[web.Request], Any]


@pytest.fixture
async def endpoint_server() -> AsyncIterator[Callable[[Handler], Any]]:
    runners: list[web.AppRunner] = []

    async def start(handler: Handler) -> str:
        app = web.Application()
        app.router.add_post("/token", handler)
        runner = web.AppRunner(app)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        runners.append(runner)
        port = runner.addresses[0][1]
        return f"http://127.0.0.1:{port}/token"

    yield start
    for runner in runners:
        await runner.cleanup()


async def test_a_token_is_asked_with_kafkas_request_and_kept_until_its_refresh_time(
    endpoint_server: Callable[[Handler], Any],
) -> None:
    seen: list[tuple[str | None, str]] = []
    token = _jwt({"sub": "svc", "exp": 4_000_000_000, "iat": 3_999_999_000})

    async def handler(request: web.Request) -> web.Response:
        seen.append((request.headers.get("Authorization"), await request.text()))
        return web.json_response({"access_token": token, "token_type": "Bearer"})

    url = await endpoint_server(handler)
    source = ob.TokenSource(
        {"extension_tenant": "t1"},
        endpoint=ob.Endpoint(url, "my id", "s&cret", "kafka write", urlencode_header=True),
    )
    assert await source.token() == token
    assert await source.token() == token  # kept: one request
    basic = base64.b64encode(b"my+id:s%26cret").decode()
    assert seen == [(f"Basic {basic}", "grant_type=client_credentials&scope=kafka+write")]
    assert source.extensions() == {"tenant": "t1"}


async def test_an_endpoint_that_fails_is_asked_again_and_a_refusal_ends_it_at_once(
    endpoint_server: Callable[[Handler], Any],
) -> None:
    answers = [web.Response(status=503), web.Response(status=502)]
    token = _jwt({"sub": "svc", "exp": 4_000_000_000})

    async def flaky(request: web.Request) -> web.Response:
        return answers.pop(0) if answers else web.json_response({"access_token": token})

    url = await endpoint_server(flaky)
    endpoint = ob.Endpoint(url, "c", "s", retry_backoff=0.01, retry_backoff_max=5.0)
    assert await ob.fetch_token(endpoint) == token and answers == []

    calls: list[int] = []

    async def refusing(request: web.Request) -> web.Response:
        calls.append(1)
        body = {"error": "invalid_client", "error_description": "bad secret", "secret": "x"}
        return web.json_response(body, status=401)

    url = await endpoint_server(refusing)
    with pytest.raises(ob.OAuthBearerError) as caught:
        await ob.fetch_token(ob.Endpoint(url, "c", "s", retry_backoff=0.01))
    assert "answered 401 {invalid_client - bad secret}" in str(caught.value)
    assert 'secret"' not in str(caught.value) and calls == [1]


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ({"token_type": "Bearer"}, "answered without an access_token"),
        ({"access_token": "not-a-jwt"}, "not a JWT"),
        ({"access_token": _jwt({"sub": "svc"})}, "no numeric 'exp' claim"),
        ({"access_token": _jwt({"exp": 4_000_000_000})}, "no 'sub' claim"),
        (
            {"access_token": _jwt({"sub": "s", "exp": 4_000_000_000, "scope": ["a", " "]})},
            "'scope' claim .* holds an empty scope",
        ),
        (
            {"access_token": _jwt({"sub": "s", "exp": 4_000_000_000, "scope": ["a", "a "]})},
            "holds 'a' twice",
        ),
    ],
)
async def test_an_answer_without_a_usable_token_is_named(
    endpoint_server: Callable[[Handler], Any], body: dict[str, Any], message: str
) -> None:
    async def handler(request: web.Request) -> web.Response:
        return web.json_response(body)

    url = await endpoint_server(handler)
    with pytest.raises(ob.OAuthBearerError, match=message):
        await ob.TokenSource({}, endpoint=ob.Endpoint(url, "c", "s")).token()


async def test_a_file_url_reads_the_token_from_the_file(tmp_path: Path) -> None:
    token = _jwt({"sub": "svc", "exp": 4_000_000_000})
    path = tmp_path / "token.jwt"
    path.write_text(token + "\n")
    source = ob.TokenSource({}, endpoint=ob.Endpoint(path.as_uri()))
    assert await source.token() == token
    with pytest.raises(ob.OAuthBearerError, match="cannot read the token file"):
        await ob.TokenSource({}, endpoint=ob.Endpoint((tmp_path / "gone").as_uri())).token()


def test_the_shared_source_is_per_settings() -> None:
    jaas = f'{MODULE} unsecuredLoginStringClaim_sub="%s";'
    one, _ = parse_worker(_config(**{"sasl.jaas.config": jaas % "a"}))
    two, _ = parse_worker(_config(**{"sasl.jaas.config": jaas % "b"}))
    assert token_source(one) is token_source(one) and token_source(one) is not token_source(two)


async def test_the_scope_claim_name_chooses_which_claim_is_checked(
    endpoint_server: Callable[[Handler], Any],
) -> None:
    """sasl.oauthbearer.scope.claim.name: the same token passes or fails by which claim holds
    the scopes (Kafka's LoginAccessTokenValidator checks the named one only)."""
    token = _jwt({"sub": "s", "exp": 4_000_000_000, "scp": ["a", "a"], "scope": "kafka"})

    async def handler(request: web.Request) -> web.Response:
        return web.json_response({"access_token": token})

    url = await endpoint_server(handler)
    assert await ob.TokenSource({}, endpoint=ob.Endpoint(url, "c", "s")).token() == token
    source = ob.TokenSource({}, endpoint=ob.Endpoint(url, "c", "s"), scope_claim="scp")
    with pytest.raises(ob.OAuthBearerError, match="'scp' claim holds 'a' twice"):
        await source.token()


@pytest.fixture(scope="module")
def stores(tmp_path_factory: pytest.TempPathFactory) -> Stores:
    return make_stores(tmp_path_factory.mktemp("stores"))


async def test_an_https_endpoint_is_trusted_by_the_jaas_lines_tls_options_as_in_kafka(
    stores: Stores, caplog: pytest.LogCaptureFixture
) -> None:
    """Kafka's token client takes its TLS settings from the JAAS line's ssl.* options
    (JaasOptionsUtils.createSSLSocketFactory), not from the client's own ssl.* (the brokers'):
    the endpoint's certificate is checked against the JAAS trust store, and without it
    against the system's CAs, which refuse the test CA's certificate."""
    token = _jwt({"sub": "svc", "exp": 4_000_000_000, "iat": 3_999_999_000})

    async def handler(request: web.Request) -> web.Response:
        return web.json_response({"access_token": token, "token_type": "Bearer"})

    server = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    server.maximum_version = ssl.TLSVersion.TLSv1_2  # so that a TLSv1.3-only client fails
    server.load_cert_chain(stores.pem)
    app = web.Application()
    app.router.add_post("/token", handler)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0, ssl_context=server)
    await site.start()
    url = f"https://localhost:{runner.addresses[0][1]}/token"
    try:

        def worker(tls: str, **extra: str) -> Any:
            jaas = f'{MODULE} clientId="c" clientSecret="s"{tls};'
            values = _config(
                **{
                    "sasl.jaas.config": jaas,
                    "sasl.login.callback.handler.class": HANDLER,
                    "sasl.oauthbearer.token.endpoint.url": url,
                    "sasl.login.retry.backoff.max.ms": "200",
                    **extra,
                }
            )
            return parse_worker(values).config

        trusted = worker(
            f' ssl.truststore.location="{stores.trust_jks}"'
            f' ssl.truststore.type="jks" ssl.truststore.password="{TRUST_PASS}"'
        )
        assert await token_source(trusted).token() == token
        # The worker's own trust store is the brokers': the token endpoint does not use it.
        brokers_only = worker(
            "",
            **{
                "ssl.truststore.location": str(stores.trust_jks),
                "ssl.truststore.password": TRUST_PASS,
            },
        )
        with pytest.raises(ob.OAuthBearerError, match="CERTIFICATE_VERIFY_FAILED"):
            await token_source(brokers_only).token()
        assert "ssl.truststore.location is the brokers' trust store" in caplog.text
        # ssl.endpoint.identification.algorithm="" turns the host name check off, as in Kafka.
        unchecked = worker(
            f' ssl.truststore.location="{stores.trust_jks}"'
            f' ssl.truststore.password="{TRUST_PASS}" ssl.endpoint.identification.algorithm=""'
        )
        context = token_source(unchecked).endpoint.ssl_context  # type: ignore[union-attr]
        assert context is not None and not context.check_hostname
        # The JAAS line's TLS versions: TLSv1.3 only, which the endpoint (TLS 1.2 at most)
        # cannot speak.
        capped = worker(
            f' ssl.truststore.location="{stores.trust_jks}"'
            f' ssl.truststore.password="{TRUST_PASS}" ssl.enabled.protocols="TLSv1.3"'
        )
        with pytest.raises(ob.OAuthBearerError, match="could not be reached"):
            await token_source(capped).token()
    finally:
        await runner.cleanup()


def test_tls_options_the_token_client_cannot_take_are_refused_by_name() -> None:
    def refused(options: str) -> str:
        return _error(
            _config(
                **{
                    "sasl.jaas.config": f'{MODULE} clientId="c" clientSecret="s" {options};',
                    "sasl.login.callback.handler.class": HANDLER,
                    "sasl.oauthbearer.token.endpoint.url": "https://idp/token",
                }
            )
        )

    assert "sasl.jaas.config ssl.protocol: 'SSLv3' is not a TLS protocol" in refused(
        'ssl.protocol="SSLv3"'
    )
    jaas = f'{MODULE} clientId="c" clientSecret="s" ssl.provider="X";'
    found = _error(
        _config(
            **{
                "sasl.jaas.config": jaas,
                "sasl.login.callback.handler.class": HANDLER,
                "sasl.oauthbearer.token.endpoint.url": "https://idp/token",
            }
        )
    )
    assert found.startswith("w.properties: sasl.jaas.config: ssl.provider: connectd's token")
