"""SASL/OAUTHBEARER tokens for the Kafka clients, made as Kafka's login callback handlers do.

Two sources, chosen as Kafka chooses its login callback handler:

- **Unsecured** (Kafka's default, ``OAuthBearerUnsecuredLoginCallbackHandler``): an unsigned JWT
  (``"alg":"none"``) built from the JAAS options ``unsecuredLoginStringClaim_<name>``,
  ``unsecuredLoginNumberClaim_<name>``, ``unsecuredLoginListClaim_<name>`` (the value's first
  character is the list's delimiter), ``unsecuredLoginLifetimeSeconds`` (3600),
  ``unsecuredLoginPrincipalClaimName`` (``sub``), ``unsecuredLoginScopeClaimName`` (``scope``) and
  ``unsecuredLoginExtension_<name>`` (SASL extensions). For development: the broker's default
  OAUTHBEARER validator accepts such tokens.
- **Client credentials** (``OAuthBearerLoginCallbackHandler``, with
  ``sasl.oauthbearer.token.endpoint.url``): an access token from an OAuth 2 token endpoint, asked
  with ``grant_type=client_credentials`` and HTTP Basic authentication from the JAAS options
  ``clientId`` and ``clientSecret`` (``scope`` if given); a ``file:`` URL names a file that holds
  the token instead. The answer is checked as Kafka's ``LoginAccessTokenValidator`` checks it: a
  JWT whose payload has an ``exp`` and a principal claim
  (``sasl.oauthbearer.sub.claim.name``); its signature is the broker's to check.
  ``extension_<name>`` JAAS options are SASL extensions.

One ``TokenSource`` serves every client of the process that has the same settings: it keeps its
token and makes a new one once the refresh time has passed, as Kafka's refreshing login places
it (``sasl.login.refresh.*``). aiokafka authenticates each connection once, with the token of
that moment; a connection outlives its token only until the broker closes it
(``connections.max.reauth.ms``), and the client then reconnects with a fresh token.
"""

from __future__ import annotations

import asyncio
import base64
import json
import logging
import math
import random
import re
import ssl
import time
import urllib.parse
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from aiokafka.abc import AbstractTokenProvider
from aiokafka.conn import AIOKafkaConnection, OAuthAuthenticator

if TYPE_CHECKING:
    import aiohttp

log = logging.getLogger("connectd.oauthbearer")

UNSECURED_PREFIX = "unsecuredLogin"
_STRING_CLAIM = "unsecuredLoginStringClaim_"
_NUMBER_CLAIM = "unsecuredLoginNumberClaim_"
_LIST_CLAIM = "unsecuredLoginListClaim_"
_UNSECURED_EXTENSION = "unsecuredLoginExtension_"
_SECURED_EXTENSION = "extension_"
_RESERVED_CLAIMS = ("iat", "exp")
#: SASL extension names and values Kafka accepts (``OAuthBearerClientInitialResponse``).
_EXTENSION_KEY = re.compile(r"[A-Za-z]+")
_EXTENSION_VALUE = re.compile(r"[\x21-\x7E \t\r\n]+")
_AUTH_KEY = "auth"
#: HTTP answers of a token endpoint that are not worth asking again (Kafka's list).
UNRETRYABLE_HTTP = frozenset(
    {400, 401, 402, 403, 404, 405, 406, 407, 409, 410, 411, 412, 413, 414, 415, 501, 505}
)


class OAuthBearerError(Exception):
    """A token could not be made or fetched; the message names the setting or the answer."""


@dataclass(frozen=True)
class Refresh:
    """When a token is replaced (Kafka's ``sasl.login.refresh.*``, in seconds)."""

    window_factor: float = 0.8
    window_jitter: float = 0.05
    min_period: float = 60.0
    buffer: float = 300.0

    def due(self, issued: float, expires: float, now: float) -> float:
        """The time to replace a token issued at ``issued`` that expires at ``expires``, as
        Kafka's ``ExpiringCredentialRefreshingLogin.refreshMs`` places it: at ``window_factor``
        (plus up to ``window_jitter``) of its lifetime, no later than ``buffer`` before it
        expires and no sooner than ``min_period`` from now; when what remains of it cannot hold
        both, at that fraction of what remains. A token already expired is replaced now."""
        if now >= expires:
            return now
        pct = self.window_factor + random.uniform(0, self.window_jitter)
        if now + self.min_period + self.buffer > expires:
            return now + (expires - now) * pct
        proposed = issued + (expires - issued) * pct
        if proposed > expires - self.buffer:
            return expires - self.buffer
        return max(proposed, now + self.min_period)


@dataclass(frozen=True)
class Endpoint:
    """An OAuth 2 token endpoint and how to ask it (``sasl.oauthbearer.*``, ``sasl.login.*``)."""

    url: str
    client_id: str = ""
    client_secret: str = ""
    scope: str = ""
    urlencode_header: bool = False
    connect_timeout: float | None = None
    read_timeout: float | None = None
    retry_backoff: float = 0.1
    retry_backoff_max: float = 10.0
    #: An https endpoint's TLS settings: the ``ssl.*`` options of the JAAS line, as Kafka's
    #: client takes them (``JaasOptionsUtils.createSSLSocketFactory``), sorted.
    tls: tuple[tuple[str, str], ...] = ()
    ssl_context: ssl.SSLContext | None = field(default=None, compare=False, hash=False)

    def file(self) -> Path | None:
        """The token file of a ``file:`` URL."""
        parsed = urllib.parse.urlparse(self.url)
        return Path(urllib.parse.unquote(parsed.path)) if parsed.scheme == "file" else None


@dataclass
class _Token:
    value: str
    due: float


class _Authenticator(OAuthAuthenticator):  # type: ignore[misc]
    """aiokafka's OAUTHBEARER exchange, finished as RFC 7628 (section 3.2.2) and Kafka's
    broker expect: a refused token draws a challenge (the broker's error, as JSON) that the
    client must answer with ``\x01`` to get the failure itself. aiokafka 0.14 stops at the
    challenge and takes the connection as authenticated, so a refused token surfaced later as
    "Did we not perform bootstrap?"; answered, it fails the connection with the broker's
    SaslAuthenticationFailed and its reason."""

    def __init__(self, *, sasl_oauth_token_provider: AbstractTokenProvider) -> None:
        super().__init__(sasl_oauth_token_provider=sasl_oauth_token_provider)
        self._answered_error = False

    async def step(self, payload: bytes | None) -> tuple[bytes, bool] | None:
        if self._token_sent and payload and not self._answered_error:
            self._answered_error = True
            log.warning("the broker refused the OAUTHBEARER token: %s", _text(payload))
            return b"\x01", True
        result: tuple[bytes, bool] | None = await super().step(payload)
        return result


def _text(payload: bytes) -> str:
    return payload.decode("utf-8", errors="replace")


def install_authenticator() -> None:
    """Make aiokafka's connections use ``_Authenticator`` (idempotent)."""
    if getattr(AIOKafkaConnection.authenticator_oauth, "_connectd", False):
        return

    def authenticator_oauth(self: AIOKafkaConnection) -> _Authenticator:
        return _Authenticator(sasl_oauth_token_provider=self._sasl_oauth_token_provider)

    authenticator_oauth._connectd = True  # type: ignore[attr-defined]
    AIOKafkaConnection.authenticator_oauth = authenticator_oauth


class TokenSource(AbstractTokenProvider):  # type: ignore[misc]
    """aiokafka's token provider for one set of OAUTHBEARER settings (see the module)."""

    def __init__(
        self,
        jaas: Mapping[str, str],
        *,
        endpoint: Endpoint | None = None,
        principal_claim: str = "sub",
        scope_claim: str = "scope",
        refresh: Refresh = Refresh(),
    ) -> None:
        self.jaas = dict(jaas)
        self.endpoint = endpoint
        self.principal_claim = principal_claim
        self.scope_claim = scope_claim
        self.refresh = refresh
        self._extensions = extensions(self.jaas, secured=endpoint is not None)
        self._token: _Token | None = None
        self._locks: dict[asyncio.AbstractEventLoop, asyncio.Lock] = {}
        install_authenticator()
        if endpoint is None:
            unsecured_token(self.jaas)  # the options' errors, at once

    async def token(self) -> str:
        loop = asyncio.get_running_loop()
        lock = self._locks.get(loop)
        if lock is None:  # one per event loop (a lock belongs to the loop that first waits)
            self._locks = {k: v for k, v in self._locks.items() if not k.is_closed()}
            lock = self._locks[loop] = asyncio.Lock()
        async with lock:
            now = time.time()
            if self._token is None or now >= self._token.due:
                self._token = await self._new(now)
            return self._token.value

    def extensions(self) -> dict[str, str]:
        return dict(self._extensions)

    async def _new(self, now: float) -> _Token:
        if self.endpoint is None:
            value = unsecured_token(self.jaas, now)
            claims = payload(value)
        else:
            path = self.endpoint.file()
            if path is not None:
                value = (await asyncio.to_thread(_read_token_file, path)).strip()
            else:
                value = await fetch_token(self.endpoint)
            claims = checked_claims(value, self.principal_claim, self.scope_claim)
        expires = float(claims["exp"])
        issued = float(claims.get("iat", now))
        principal = self.principal_claim if self.endpoint else unsecured_principal(self.jaas)
        log.info(
            "OAUTHBEARER token for principal %s, expires in %.0f s",
            claims.get(principal),
            expires - now,
        )
        return _Token(value, self.refresh.due(issued, expires, now))


def _read_token_file(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except OSError as exc:
        raise OAuthBearerError(
            f"sasl.oauthbearer.token.endpoint.url: cannot read the token file {path}: {exc}"
        ) from exc


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def _json(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def unsecured_token(options: Mapping[str, str], now: float | None = None) -> str:
    """An unsigned JWT from the ``unsecuredLogin*`` JAAS options, as Kafka's
    ``OAuthBearerUnsecuredLoginCallbackHandler`` builds it (``OAuthBearerError`` if the options
    make none)."""
    if not any(k.startswith(UNSECURED_PREFIX) for k in options) or all(
        k.startswith(_UNSECURED_EXTENSION) for k in options if k.startswith(UNSECURED_PREFIX)
    ):
        raise OAuthBearerError(
            "sasl.jaas.config: an unsecured OAUTHBEARER login needs its claims as"
            ' unsecuredLoginStringClaim_sub="<principal>" (or a sasl.oauthbearer.token.endpoint.url'
            " with sasl.login.callback.handler.class=org.apache.kafka.common.security.oauthbearer."
            "OAuthBearerLoginCallbackHandler)"
        )
    # Whole milliseconds, as Kafka's clock gives them: the broker's validator refuses an iat
    # past its own millisecond clock (no skew allowed by default), which a finer time can be.
    now = math.floor((time.time() if now is None else now) * 1000) / 1000
    lifetime_text = options.get("unsecuredLoginLifetimeSeconds", "3600")
    try:
        lifetime = int(lifetime_text)
    except ValueError:
        raise OAuthBearerError(
            f"sasl.jaas.config: unsecuredLoginLifetimeSeconds must be a whole number of"
            f" seconds, not {lifetime_text!r}"
        ) from None
    claims: dict[str, Any] = {"exp": now + lifetime, "iat": now}  # seconds as doubles, as Kafka
    for key, value in options.items():
        for prefix in (_STRING_CLAIM, _NUMBER_CLAIM, _LIST_CLAIM):
            if key.startswith(prefix) and len(key) > len(prefix):
                name = key[len(prefix) :]
                if name in _RESERVED_CLAIMS:
                    raise OAuthBearerError(
                        f"sasl.jaas.config: {key}: cannot explicitly set the '{name}' claim"
                    )
                claims[name] = _claim(key, prefix, value)
    principal = unsecured_principal(options)
    if not isinstance(claims.get(principal), str) or not claims[principal].strip():
        raise OAuthBearerError(
            f"sasl.jaas.config: the unsecured token has no principal: set"
            f' unsecuredLoginStringClaim_{principal}="<principal>"'
        )
    return f"{_b64(_json({'alg': 'none'}).encode())}.{_b64(_json(claims).encode())}."


def unsecured_principal(options: Mapping[str, str]) -> str:
    """The claim naming an unsecured token's principal (``unsecuredLoginPrincipalClaimName``)."""
    return options.get("unsecuredLoginPrincipalClaimName", "").strip() or "sub"


def _claim(key: str, prefix: str, value: str) -> Any:
    if prefix == _STRING_CLAIM:
        return value
    if prefix == _NUMBER_CLAIM:
        try:
            return float(value)
        except ValueError:
            raise OAuthBearerError(
                f"sasl.jaas.config: {key} must be a number, not {value!r}"
            ) from None
    return _list_claim(value)


def _list_claim(value: str) -> list[str]:
    """Kafka's list claim: the first character delimits the rest (Java's ``split``, which
    drops trailing empty elements, plus one empty element if any element was empty)."""
    if len(value) <= 1:
        return []
    delimiter, text = value[0], value[1:]
    items = text.split(delimiter)
    while items and items[-1] == "":
        items.pop()
    if text.startswith(delimiter) or text.endswith(delimiter) or delimiter * 2 in text:
        items.append("")
    return items


def extensions(options: Mapping[str, str], *, secured: bool) -> dict[str, str]:
    """The SASL extensions of the JAAS options, checked as Kafka checks them."""
    prefix = _SECURED_EXTENSION if secured else _UNSECURED_EXTENSION
    found = {k[len(prefix) :]: v for k, v in options.items() if k.startswith(prefix)}
    for name, value in found.items():
        if name == _AUTH_KEY or not _EXTENSION_KEY.fullmatch(name):
            raise OAuthBearerError(
                f"sasl.jaas.config: {prefix}{name}: an extension name is letters only and not"
                f" '{_AUTH_KEY}'"
            )
        if not _EXTENSION_VALUE.fullmatch(value):
            raise OAuthBearerError(
                f"sasl.jaas.config: {prefix}{name}: an extension value is printable ASCII"
            )
    return found


def payload(token: str) -> dict[str, Any]:
    """A JWT's claims (its signature unchecked)."""
    parts = token.split(".")
    if len(parts) != 3:
        raise OAuthBearerError(
            f"the access token is not a JWT: {len(parts)} dot-separated parts instead of 3"
        )
    try:
        text = base64.urlsafe_b64decode(parts[1] + "=" * (-len(parts[1]) % 4))
        claims = json.loads(text)
    except (ValueError, UnicodeDecodeError) as exc:
        raise OAuthBearerError(f"the access token's payload is not base64url JSON: {exc}") from None
    if not isinstance(claims, dict):
        raise OAuthBearerError("the access token's payload is not a JSON object")
    return claims


def checked_claims(token: str, principal_claim: str, scope_claim: str = "scope") -> dict[str, Any]:
    """A fetched token's claims, checked as Kafka's ``LoginAccessTokenValidator`` does: a
    numeric ``exp`` (and ``iat`` if there), a principal, and a scope claim that, as a string or
    a list, holds non-empty scopes without duplicates (another type counts as no scope)."""
    claims = payload(token)
    exp = claims.get("exp")
    if isinstance(exp, bool) or not isinstance(exp, int | float):
        raise OAuthBearerError("the access token has no numeric 'exp' claim")
    principal = claims.get(principal_claim)
    if not isinstance(principal, str) or not principal.strip():
        raise OAuthBearerError(
            f"the access token has no '{principal_claim}' claim (sasl.oauthbearer.sub.claim.name)"
        )
    if "iat" in claims and (
        isinstance(claims["iat"], bool) or not isinstance(claims["iat"], int | float)
    ):
        raise OAuthBearerError("the access token's 'iat' claim is not a number")
    scope = claims.get(scope_claim)
    scopes = [scope] if isinstance(scope, str) else scope if isinstance(scope, list) else []
    seen: set[str] = set()
    for item in scopes:
        if not isinstance(item, str) or not item.strip():
            raise OAuthBearerError(
                f"the access token's '{scope_claim}' claim (sasl.oauthbearer.scope.claim.name)"
                " holds an empty scope"
            )
        if item.strip() in seen:
            raise OAuthBearerError(
                f"the access token's '{scope_claim}' claim holds {item.strip()!r} twice"
            )
        seen.add(item.strip())
    return claims


def authorization(endpoint: Endpoint) -> str:
    """The HTTP Basic header Kafka sends (client id and secret trimmed, URL-encoded when
    ``sasl.oauthbearer.header.urlencode`` is true)."""
    client_id, secret = endpoint.client_id.strip(), endpoint.client_secret.strip()
    if endpoint.urlencode_header:
        client_id = urllib.parse.quote_plus(client_id)
        secret = urllib.parse.quote_plus(secret)
    return "Basic " + base64.b64encode(f"{client_id}:{secret}".encode()).decode("ascii")


def request_body(scope: str) -> str:
    body = "grant_type=client_credentials"
    if scope.strip():
        body += "&scope=" + urllib.parse.quote_plus(scope.strip())
    return body


async def fetch_token(endpoint: Endpoint) -> str:
    """The ``access_token`` of a client-credentials request, retried as Kafka retries it:
    backoff from ``retry_backoff`` doubling, for up to ``retry_backoff_max`` seconds in all;
    an answer in ``UNRETRYABLE_HTTP`` ends it at once."""
    import aiohttp  # here: the executor processes import the settings, never this

    headers = {
        "Authorization": authorization(endpoint),
        "Accept": "application/json",
        "Cache-Control": "no-cache",
        "Content-Type": "application/x-www-form-urlencoded",
    }
    timeout = aiohttp.ClientTimeout(
        sock_connect=endpoint.connect_timeout, sock_read=endpoint.read_timeout
    )
    loop = asyncio.get_running_loop()
    end = loop.time() + endpoint.retry_backoff_max
    pause = endpoint.retry_backoff
    async with aiohttp.ClientSession(timeout=timeout) as session:
        while True:
            try:
                return await _ask(session, endpoint, headers)
            except _Retriable as exc:
                if loop.time() + pause > end:
                    raise OAuthBearerError(str(exc)) from None
                log.warning("%s; asking again in %.1f s", exc, pause)
            await asyncio.sleep(pause)
            pause = min(pause * 2, endpoint.retry_backoff_max)


class _Retriable(Exception):
    pass


async def _ask(session: aiohttp.ClientSession, endpoint: Endpoint, headers: dict[str, str]) -> str:
    import aiohttp

    where = f"token endpoint {endpoint.url}"
    try:
        async with session.post(
            endpoint.url,
            data=request_body(endpoint.scope),
            headers=headers,
            ssl=endpoint.ssl_context if endpoint.ssl_context is not None else True,
        ) as answer:
            text = await answer.text()
            status = answer.status
    except (aiohttp.ClientError, TimeoutError, OSError) as exc:
        raise _Retriable(f"{where} could not be reached: {exc!r}") from None
    if status not in (200, 201):
        message = f"{where} answered {status} {_oauth_error(text)}"
        if status in UNRETRYABLE_HTTP:
            raise OAuthBearerError(message)
        raise _Retriable(message)
    try:
        body = json.loads(text)
    except ValueError:
        raise OAuthBearerError(f"{where} answered {status} with a body that is not JSON") from None
    token = body.get("access_token") if isinstance(body, dict) else None
    if not isinstance(token, str) or not token.strip():
        raise OAuthBearerError(f"{where} answered without an access_token")
    return token.strip()


def _oauth_error(text: str) -> str:
    """RFC 6749's error fields of an answer (never anything else of it: it may hold secrets)."""
    try:
        body = json.loads(text)
    except ValueError:
        return "{}"
    if isinstance(body, dict) and "error" in body:
        return f"{{{body.get('error')} - {body.get('error_description')}}}"
    return "{}"
