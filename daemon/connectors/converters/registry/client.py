"""A Confluent-compatible Schema Registry, read by schema id: Confluent's client settings (the
``<side>.converter.`` prefix stripped) and the schemas it answers, cached for the converter's life.

Only what a sink's converter needs: ``GET /schemas/ids/{id}`` (and, for a schema with
references, ``GET /subjects/{subject}/versions/{version}`` of each). The client runs on the
event loop (aiohttp), never in the conversion thread: a converter that meets an id it has not
cached raises ``SchemasNeeded`` from ``convert``, the pipeline awaits ``fetch`` and converts
again. An id the registry does not know (404) is remembered as unknown: its records are errant
(CONVERTER stage). A registry that cannot answer (refused, timed out, 5xx, 401/403) raises
``RegistryUnavailable``, a ``RetriableError``: the task stays RUNNING, says why in its status,
and reads the batch again after a backoff, for as long as it takes (Connect's rule for a
retriable error); nothing is skipped.

Settings (Confluent's names):

- ``schema.registry.url``: one URL or several, comma-separated; tried in turn from the last
  one that answered.
- ``basic.auth.credentials.source``: ``URL`` (the credentials in the URL's user info),
  ``USER_INFO`` (``basic.auth.user.info=user:password``); ``SASL_INHERIT`` is refused.
- TLS for ``https`` URLs: ``schema.registry.ssl.truststore.*`` and
  ``schema.registry.ssl.keystore.*`` (``.location``, ``.type`` PEM, PKCS12 or JKS, ``.password``;
  ``schema.registry.ssl.key.password``), read as the Kafka clients read theirs
  (``daemon.tlsstores``; a JKS store costs one keytool run per process);
  ``schema.registry.ssl.endpoint.identification.algorithm=`` (empty) turns off the host name
  check; ``schema.registry.ssl.protocol``, ``.enabled.protocols`` and ``.cipher.suites`` as the
  Kafka clients' (``daemon.tlsprotocols``).
- ``schemas.cache.config`` (default 1000): how many schemas the cache keeps.
- ``http.connect.timeout.ms`` / ``http.read.timeout.ms`` (default 60000 each, as Confluent's
  client): how long a connection and an answer may take before the next URL is tried.
- Serializer-side settings (``auto.register.schemas``, ``use.latest.version``,
  ``*.subject.name.strategy``, ...) do nothing when reading, in Connect as here.
"""

from __future__ import annotations

import base64
import json
import ssl
import urllib.parse
from collections import OrderedDict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from daemon import tlsprotocols
from daemon.config.fields import parse_list
from daemon.config.ignored import SSL_JVM_KEYS, SSL_REFUSED
from daemon.connectors.converters.base import positive_option
from daemon.errors import ConfigError, RetriableError
from daemon.tlsstores import TYPES, Store, client_context, configured

#: Confluent's client defaults (ms) for ``http.connect.timeout.ms`` / ``http.read.timeout.ms``.
CONNECT_TIMEOUT_MS = 60_000
READ_TIMEOUT_MS = 60_000

_SSL = "schema.registry.ssl."
#: Settings a reader takes and that change nothing it does (Confluent's serializer side, and
#: Connect-schema details that do not reach a table column).
_READER_IGNORES = frozenset(
    (
        "auto.register.schemas",
        "use.latest.version",
        "use.latest.with.metadata",
        "latest.compatibility.strict",
        "normalize.schemas",
        "use.schema.id",
        "key.subject.name.strategy",
        "value.subject.name.strategy",
        "connect.meta.data",
        "avro.use.logical.type.converters",
        "avro.remove.java.properties",
        "context.name.strategy",
        "id.compatibility.strict",
        "latest.cache.size",
        "latest.cache.ttl.sec",
        "schemas.cache.ttl.sec",
        "scrub.invalid.names",
        "enhanced.protobuf.schema.support",  # Connect schema names (full or simple)
        "ignore.default.for.nullables",
        # Java's TLS machinery (connectd's TLS is OpenSSL's; Kafka's clients take them alike).
        *(_SSL + key for key in SSL_JVM_KEYS),
        # Confluent's serializer side and its client's tuning (connectd retries on its own):
        # taken, with nothing to do for a reader (checked against Confluent's *Config classes).
        "use.schema.guid",
        "key.schema.id.serializer",
        "value.schema.id.serializer",
        "max.schemas.per.subject",
        "schema.format",
        "schema.reflection",
        "propagate.schema.tags",
        "avro.reflection.allow.null",
        "avro.fail.on.trailing.data",
        "specific.avro.reader",
        "specific.avro.key.type",
        "specific.avro.value.type",
        "json.indent.output",
        "json.write.dates.iso8601",
        "json.schema.spec.version",
        "json.oneof.for.nullables",
        "json.default.property.inclusion",
        "json.schema.scan.packages",
        "json.envelope.detection",
        "json.fail.unknown.properties",
        "json.key.type",
        "json.value.type",
        "json.type.allowed.packages",
        "json.validate.before.domain.rules",
        "type.property",
        "discard.type.doc.default",
        "decimal.format",  # how JSON Schema's converter writes a Decimal; a reader parses it
        "missing.cache.size",
        "missing.id.cache.ttl.sec",
        "missing.schema.cache.ttl.sec",
        "missing.version.cache.ttl.sec",
        "max.retries",
        "retries.wait.ms",
        "retries.max.wait.ms",
        "url.randomize",
        "use.apache.http.client",
        "execution.environment",
        "rule.metrics.enable",
        "rule.service.loader.enable",
        "validation.rules.fail.fast",
        "validation.rules.execution",
    )
)
#: Confluent settings that change what a reader gives Connect, and that connectd does not do:
#: refused whatever their value (data contracts' rules decrypt or transform fields; a schema id
#: read from a header instead of the payload's prefix; custom request headers, bearer tokens and
#: proxies for the registry).
_REFUSED_PREFIXES = (
    "bearer.auth.",
    "proxy.",
    "rule.executors",
    "rule.actions",
    "request.header.",
)
_REFUSED = frozenset(
    (
        "key.schema.id.deserializer",
        "value.schema.id.deserializer",
        *(_SSL + key for key in SSL_REFUSED),
    )
)
#: Confluent settings connectd reads only at their defaults: another value is refused.
_DEFAULT_ONLY = {
    "flatten.singleton.unions": "true",
    "allow.optional.map.keys": "false",
    "object.additional.properties": "true",
    "ignore.modern.dialects": "false",
    "json.fail.invalid.schema": "false",
}
_KNOWN = frozenset(
    (
        "schema.registry.url",
        "basic.auth.credentials.source",
        "basic.auth.user.info",
        "schemas.cache.config",
        "http.connect.timeout.ms",
        "http.read.timeout.ms",
        f"{_SSL}truststore.location",
        f"{_SSL}truststore.type",
        f"{_SSL}truststore.password",
        f"{_SSL}keystore.location",
        f"{_SSL}keystore.type",
        f"{_SSL}keystore.password",
        f"{_SSL}key.password",
        f"{_SSL}endpoint.identification.algorithm",
        f"{_SSL}protocol",
        f"{_SSL}enabled.protocols",
        f"{_SSL}cipher.suites",
    )
)


if TYPE_CHECKING:
    import aiohttp


class RegistryUnavailable(RetriableError):
    """The Schema Registry did not answer (or not with a schema): the batch is read again."""


class SchemasNeeded(Exception):
    """Raised by a registry converter's ``convert`` for schema ids it has not cached: await
    ``fetch()`` on the event loop, then convert again."""

    def __init__(
        self, client: RegistryClient, ids: Iterable[int], keep: Iterable[int] = ()
    ) -> None:
        self.client = client
        self.ids = frozenset(ids)
        self.keep = frozenset(keep)  # every id of the poll: none leaves the cache for these
        super().__init__(f"schema ids not fetched yet: {sorted(self.ids)}")

    async def fetch(self) -> None:
        await self.client.fetch(self.ids, keep=self.keep)


@dataclass(frozen=True)
class Schema:
    """A schema as the registry answers it: its type (``AVRO``, ``PROTOBUF``, ``JSON``), its
    text, and the texts of the schemas it references (name → text), in dependency order."""

    id: int
    schema_type: str
    text: str
    references: tuple[tuple[str, str], ...] = ()


@dataclass
class RegistrySettings:
    """Confluent's registry client settings for one converter (see the module docstring)."""

    urls: list[str]
    #: (user, password) for HTTP basic authentication, or None.
    auth: tuple[str, str] | None = None
    ssl_context: ssl.SSLContext | None = None
    cache_size: int = 1000
    connect_timeout: float = CONNECT_TIMEOUT_MS / 1000
    read_timeout: float = READ_TIMEOUT_MS / 1000

    @classmethod
    def parse(cls, options: Mapping[str, str], prefix: str) -> RegistrySettings:
        """``options`` with the ``<side>.converter.`` ``prefix`` stripped; ``ConfigError``
        naming the key (with the prefix) when one is missing or wrong."""
        raw = options.get("schema.registry.url", "").strip()
        if not raw:
            raise ConfigError(
                f"{prefix}schema.registry.url is required: the Schema Registry's URL (several "
                "may be given, comma-separated)"
            )
        urls: list[str] = []
        auth: tuple[str, str] | None = None
        source = options.get("basic.auth.credentials.source", "URL").strip().upper()
        if source not in ("URL", "USER_INFO", "SASL_INHERIT"):
            raise ConfigError(
                f"{prefix}basic.auth.credentials.source: {source!r} is not URL or USER_INFO"
            )
        if source == "SASL_INHERIT":
            raise ConfigError(
                f"{prefix}basic.auth.credentials.source=SASL_INHERIT is not supported: give the "
                "registry's credentials with USER_INFO and basic.auth.user.info"
            )
        for url in (u.strip() for u in raw.split(",")):
            parts = urllib.parse.urlsplit(url)
            if parts.scheme not in ("http", "https") or not parts.hostname:
                raise ConfigError(
                    f"{prefix}schema.registry.url: {url!r} is not an http:// or https:// URL"
                )
            if parts.username is not None and source == "URL" and auth is None:
                auth = (
                    urllib.parse.unquote(parts.username),
                    urllib.parse.unquote(parts.password or ""),
                )
            netloc = parts.hostname if parts.port is None else f"{parts.hostname}:{parts.port}"
            if ":" in (parts.hostname or "") and parts.port is None:
                netloc = f"[{parts.hostname}]"
            urls.append(
                urllib.parse.urlunsplit((parts.scheme, netloc, parts.path.rstrip("/"), "", ""))
            )
        if source == "USER_INFO":
            info = options.get("basic.auth.user.info", "")
            user, colon, password = info.partition(":")
            if not colon or not user:
                raise ConfigError(
                    f"{prefix}basic.auth.user.info: expected user:password with "
                    "basic.auth.credentials.source=USER_INFO"
                )
            auth = (user, password)
        cache_size = positive_option(options, "schemas.cache.config", 1000, prefix)
        connect_ms = positive_option(options, "http.connect.timeout.ms", CONNECT_TIMEOUT_MS, prefix)
        read_ms = positive_option(options, "http.read.timeout.ms", READ_TIMEOUT_MS, prefix)
        for key in sorted(options):
            if key.startswith(_REFUSED_PREFIXES) or key in _REFUSED:
                raise ConfigError(
                    f"{prefix}{key}: connectd's Schema Registry converters do not support it"
                    " (bearer tokens, proxies, custom request headers, data contract rules, a"
                    " schema id in a header)"
                )
            default = _DEFAULT_ONLY.get(key)
            if default is not None and options[key].strip().lower() != default:
                raise ConfigError(
                    f"{prefix}{key}={options[key]}: connectd reads records as Confluent's"
                    f" default ({key}={default}) does; another value is not supported"
                )
            if key.startswith(_SSL) and key not in _KNOWN and key not in _READER_IGNORES:
                raise ConfigError(f"{prefix}{key} is not supported (see the converters' docs)")
        context = (
            _ssl_context(options, prefix) if any(u.startswith("https") for u in urls) else None
        )
        return cls(urls, auth, context, cache_size, connect_ms / 1000, read_ms / 1000)


def known_options(own: Iterable[str] = ()) -> frozenset[str]:
    """Every option key a registry converter takes, refuses or reads at its default."""
    return _KNOWN | _READER_IGNORES | _REFUSED | frozenset(_DEFAULT_ONLY) | frozenset(own)


def unknown_options(options: Mapping[str, str], own: Iterable[str] = ()) -> list[str]:
    """The option keys no registry converter setting (connectd's, or a Confluent one connectd
    takes or refuses) names: a mistyped key, which would otherwise change nothing silently."""
    known = known_options(own)
    return [
        key for key in sorted(options) if key not in known and not key.startswith(_REFUSED_PREFIXES)
    ]


def _ssl_context(options: Mapping[str, str], prefix: str) -> ssl.SSLContext:
    """The registry client's TLS: its key and trust stores in any of Kafka's formats (PEM,
    PKCS12, JKS: ``daemon.tlsstores``), built once per process for the same stores."""
    stores: dict[str, Store | None] = {}
    for store in ("truststore", "keystore"):
        location = options.get(f"{_SSL}{store}.location", "").strip()
        kind = options.get(f"{_SSL}{store}.type", "").strip().upper() or None
        if kind is not None and kind not in TYPES:
            raise ConfigError(
                f"{prefix}{_SSL}{store}.type={kind}: expected one of {', '.join(TYPES)}"
            )
        key_password = options.get(f"{_SSL}key.password") or None if store == "keystore" else None
        stores[store] = configured(
            f"{prefix}{_SSL}{store}",
            Path(location) if location else None,
            kind,
            options.get(f"{_SSL}{store}.password") or None,
            key_password,
        )
    check = options.get(f"{_SSL}endpoint.identification.algorithm", "https").strip().lower()
    if check not in ("", "https"):
        raise ConfigError(
            f"{prefix}{_SSL}endpoint.identification.algorithm: {check!r} is not https or empty"
        )
    protocols = tlsprotocols.parse(
        f"{prefix}{_SSL}".rstrip("."),
        options.get(f"{_SSL}protocol"),
        parse_list(options.get(f"{_SSL}enabled.protocols", "")),
        parse_list(options.get(f"{_SSL}cipher.suites", "")),
    )
    return client_context(stores["keystore"], stores["truststore"], check == "https", protocols)


class RegistryClient:
    """Schemas by id from a Schema Registry, cached (see the module docstring). ``schemas`` and
    ``unknown`` are read by the conversion thread and changed only by ``fetch``, which the
    pipeline awaits while no conversion of this converter runs."""

    def __init__(self, settings: RegistrySettings) -> None:
        self.settings = settings
        self.schemas: OrderedDict[int, Schema] = OrderedDict()
        #: Ids the registry answered 404 for, with its message.
        self.unknown: dict[int, str] = {}
        self._session: aiohttp.ClientSession | None = None
        self._preferred = 0

    def cached(self, schema_id: int) -> Schema | None:
        return self.schemas.get(schema_id)

    async def fetch(self, ids: Iterable[int], keep: Iterable[int] = ()) -> None:
        """The schemas of ``ids`` into the cache (an id the registry does not know into
        ``unknown``). The cache keeps ``schemas.cache.config`` schemas, the oldest leaving first,
        but never one of ``ids`` or ``keep`` (the poll's other ids): a poll with more schema ids
        than that still converts."""
        wanted = set(ids) | set(keep)
        for schema_id in sorted(set(ids)):
            if schema_id in self.schemas or schema_id in self.unknown:
                continue
            doc = await self._get(f"/schemas/ids/{schema_id}", schema_id=schema_id)
            if doc is None:
                continue
            self.schemas[schema_id] = await self._schema(schema_id, doc)
        for schema_id in list(self.schemas):
            if len(self.schemas) <= self.settings.cache_size:
                break
            if schema_id not in wanted:
                del self.schemas[schema_id]

    async def _schema(self, schema_id: int, doc: Any) -> Schema:
        if not isinstance(doc, dict) or not isinstance(doc.get("schema"), str):
            raise RegistryUnavailable(
                f"the Schema Registry's answer for schema id {schema_id} holds no schema"
            )
        refs: dict[str, str] = {}
        await self._references(doc.get("references") or [], refs, depth=0)
        return Schema(
            schema_id,
            str(doc.get("schemaType") or "AVRO").upper(),
            doc["schema"],
            tuple(refs.items()),
        )

    async def _references(self, refs: list[Any], out: dict[str, str], depth: int) -> None:
        """The referenced schemas' texts, each after its own references."""
        if depth > 32:
            raise RegistryUnavailable("schema references nest deeper than 32 levels")
        for ref in refs:
            name, subject, version = ref.get("name"), ref.get("subject"), ref.get("version")
            if name in out or not isinstance(subject, str):
                continue
            path = f"/subjects/{urllib.parse.quote(subject, safe='')}/versions/{version}"
            doc = await self._get(path)
            if not isinstance(doc, dict) or not isinstance(doc.get("schema"), str):
                raise RegistryUnavailable(f"reference {name!r} ({subject} v{version}) not found")
            await self._references(doc.get("references") or [], out, depth + 1)
            out[str(name)] = doc["schema"]

    async def _get(self, path: str, *, schema_id: int | None = None) -> Any:
        """The JSON answer for ``path`` from the first URL that answers; ``None`` (and the id
        remembered as unknown) for a 404 about ``schema_id``."""
        import aiohttp  # here: the executors import the converters and need no HTTP client

        if self._session is None:
            headers = {"Accept": "application/vnd.schemaregistry.v1+json, application/json"}
            if self.settings.auth is not None:
                pair = ":".join(self.settings.auth).encode()
                headers["Authorization"] = "Basic " + base64.b64encode(pair).decode()
            self._session = aiohttp.ClientSession(
                timeout=aiohttp.ClientTimeout(
                    sock_connect=self.settings.connect_timeout,
                    sock_read=self.settings.read_timeout,
                ),
                headers=headers,
            )
        urls = self.settings.urls
        problems = []
        for k in range(len(urls)):
            i = (self._preferred + k) % len(urls)
            url = urls[i] + path
            try:
                async with self._session.get(url, ssl=self.settings.ssl_context or True) as r:
                    body = await r.read()
                    if r.status == 200:
                        self._preferred = i
                        return json.loads(body)
                    if r.status == 404 and schema_id is not None:
                        self._preferred = i
                        self.unknown[schema_id] = _message(body) or "not found"
                        return None
                    problems.append(f"{urls[i]}: HTTP {r.status} {_message(body)}".rstrip())
            except (TimeoutError, aiohttp.ClientError, ValueError, OSError) as e:
                problems.append(f"{urls[i]}: {type(e).__name__}: {e}".rstrip(": "))
        raise RegistryUnavailable(
            f"the Schema Registry did not answer GET {path}: {'; '.join(problems)}"
        )

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None


def _message(body: bytes) -> str:
    try:
        doc = json.loads(body)
    except ValueError:
        return body[:200].decode("utf-8", "replace")
    if isinstance(doc, dict) and "message" in doc:
        code = doc.get("error_code")
        return f"{doc['message']} (error_code {code})" if code is not None else str(doc["message"])
    return ""
