"""Value types of the worker's settings: REST listeners, broker addresses, logging, security."""

from __future__ import annotations

import enum
import re
from typing import Annotated, Literal
from urllib.parse import urlsplit

from pydantic import BaseModel, BeforeValidator, ConfigDict, SecretStr

from daemon.config.fields import Expect, choice, parse_list


class Listener(BaseModel):
    """One REST listener. ``host`` is empty for "every interface"; port 0 picks a free port."""

    model_config = ConfigDict(frozen=True)

    scheme: Literal["http", "https"]
    host: str
    port: int

    def __str__(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{self.scheme}://{host}:{self.port}"


def parse_listener(text: str) -> Listener:
    """A ``Listener`` from ``http://HOST:PORT`` or ``https://HOST:PORT`` (HOST may be empty)."""
    try:
        parts = urlsplit(text)
        port = parts.port
    except ValueError:
        raise ValueError(f"{text!r} is not a valid URL") from None
    scheme = parts.scheme.lower()
    if scheme not in ("http", "https"):
        raise ValueError(f"{text!r} is not an http or https URL")
    if port is None:
        raise ValueError(f"{text!r} has no port")
    if parts.path not in ("", "/") or parts.query or parts.fragment or parts.username:
        raise ValueError(f"{text!r} has more than a scheme, host and port")
    return Listener(
        scheme="https" if scheme == "https" else "http", host=parts.hostname or "", port=port
    )


def _parse_listeners(value: object) -> tuple[Listener, ...]:
    if isinstance(value, tuple) and all(isinstance(v, Listener) for v in value):
        return value
    listeners = tuple(parse_listener(text) for text in parse_list(value))
    if not listeners:
        raise ValueError("no listener given")
    return listeners


Listeners = Annotated[
    tuple[Listener, ...],
    BeforeValidator(_parse_listeners),
    Expect("a comma-separated list of http://HOST:PORT or https://HOST:PORT URLs"),
]


def _parse_admin_listeners(value: object) -> tuple[Listener, ...] | None:
    if value is None:
        return None
    if isinstance(value, tuple) and all(isinstance(v, Listener) for v in value):
        return value
    if isinstance(value, str) and value.strip() and value.strip().endswith(","):
        raise ValueError("Empty URL found when parsing admin.listeners list.")  # Connect's
    return tuple(parse_listener(text) for text in parse_list(value))


AdminListeners = Annotated[
    tuple[Listener, ...] | None,
    BeforeValidator(_parse_admin_listeners),
    Expect("empty, or a comma-separated list of http://HOST:PORT or https://HOST:PORT URLs"),
]

_HOST_PORT = re.compile(r"^(?:\[(?P<v6>[0-9A-Fa-f:.]+)\]|(?P<host>[^:\s\[\]]+)):(?P<port>\d{1,5})$")


def _parse_host_ports(value: object) -> tuple[str, ...]:
    servers = parse_list(value)
    if not servers:
        raise ValueError("no broker address given")
    for server in servers:
        match = _HOST_PORT.match(server)
        if match is None or not 0 < int(match["port"]) < 65536:
            raise ValueError(f"{server!r} is not HOST:PORT")
    return servers


HostPorts = Annotated[
    tuple[str, ...],
    BeforeValidator(_parse_host_ports),
    Expect("a comma-separated list of HOST:PORT"),
]

_SPARK_MASTER = re.compile(r"^(local(\[(\*|[1-9]\d*)(,\d+)?\])?|spark://\S+|yarn|k8s://\S+)$")


def _parse_spark_master(value: object) -> str:
    text = value.strip() if isinstance(value, str) else value
    if not isinstance(text, str) or not _SPARK_MASTER.match(text):
        raise ValueError(f"{value!r} is not a Spark master URL")
    return text


SparkMaster = Annotated[
    str,
    BeforeValidator(_parse_spark_master),
    Expect("local, local[N], local[*], spark://HOST:PORT, yarn or k8s://URL"),
]


class LogLevel(enum.StrEnum):
    DEBUG = "DEBUG"
    INFO = "INFO"
    WARNING = "WARNING"
    ERROR = "ERROR"


LogLevelName = Annotated[
    LogLevel,
    BeforeValidator(choice(LogLevel, {"TRACE": "DEBUG", "WARN": "WARNING", "FATAL": "ERROR"})),
    Expect("DEBUG, INFO, WARNING or ERROR (log4j's TRACE, WARN and FATAL are accepted)"),
]


class LogFormat(enum.StrEnum):
    TEXT = "text"
    JSON = "json"


LogFormatName = Annotated[LogFormat, BeforeValidator(choice(LogFormat)), Expect("text or json")]


class SecurityProtocol(enum.StrEnum):
    PLAINTEXT = "PLAINTEXT"
    SSL = "SSL"
    SASL_PLAINTEXT = "SASL_PLAINTEXT"
    SASL_SSL = "SASL_SSL"


SecurityProtocolName = Annotated[
    SecurityProtocol,
    BeforeValidator(choice(SecurityProtocol)),
    Expect("PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL"),
]


class SaslMechanism(enum.StrEnum):
    PLAIN = "PLAIN"
    SCRAM_SHA_256 = "SCRAM-SHA-256"
    SCRAM_SHA_512 = "SCRAM-SHA-512"
    GSSAPI = "GSSAPI"
    OAUTHBEARER = "OAUTHBEARER"


SaslMechanismName = Annotated[
    SaslMechanism,
    BeforeValidator(choice(SaslMechanism)),
    Expect("PLAIN, SCRAM-SHA-256, SCRAM-SHA-512, GSSAPI or OAUTHBEARER"),
]


def _parse_store_type(value: object) -> str:
    """Kafka's key and trust store types (``daemon.tlsstores``), case-insensitive."""
    if isinstance(value, str) and value.strip().upper() in ("PEM", "PKCS12", "JKS"):
        return value.strip().upper()
    raise ValueError(f"{value!r} is not a key store type connectd reads")


StoreType = Annotated[
    str,
    BeforeValidator(_parse_store_type),
    Expect("PEM, PKCS12 or JKS"),
]


def _parse_identification(value: object) -> str:
    if isinstance(value, str) and value.strip().lower() in ("https", ""):
        return value.strip().lower()
    raise ValueError(f"{value!r} is neither https nor empty")


EndpointIdentification = Annotated[
    str,
    BeforeValidator(_parse_identification),
    Expect("https (check the broker's host name) or an empty string (do not)"),
]

#: An option name is one of Kafka's JAAS parser's words (a StreamTokenizer's: letters, digits,
#: ``.``, ``-``, ``_``, ``$``), e.g. ``ssl.truststore.location``.
_JAAS_OPTION = re.compile(
    r"""(?<![\w.$-])([\w.$-]+)\s*=\s*(?:"((?:[^"\\]|\\.)*)"|(\S+?))(?=[\s;]|$)"""
)


def secret(value: SecretStr | None) -> str | None:
    """A secret setting's text, or None when unset."""
    return None if value is None else value.get_secret_value()


def jaas_options(jaas: str) -> dict[str, str]:
    """The ``name="value"`` options of a ``sasl.jaas.config`` line (login module name dropped).

    ``org.apache.kafka.common.security.plain.PlainLoginModule required username="u"
    password="p";`` gives ``{"username": "u", "password": "p"}``.
    """
    options = {}
    for match in _JAAS_OPTION.finditer(jaas):
        quoted, bare = match.group(2), match.group(3)
        value = bare if quoted is None else re.sub(r"\\(.)", r"\1", quoted)
        options[match.group(1)] = value
    return options


class Converter(enum.StrEnum):
    """The record converters connectd has, by short name. Connect's class names map onto them."""

    STRING = "string"
    JSON = "json"
    BYTEARRAY = "bytearray"
    LONG = "long"
    INTEGER = "integer"
    SHORT = "short"
    FLOAT = "float"
    DOUBLE = "double"
    BOOLEAN = "boolean"
    AVRO = "avro"
    JSONSCHEMA = "jsonschema"
    PROTOBUF = "protobuf"


_CONVERTER_NAMES: dict[str, Converter] = {
    "org.apache.kafka.connect.storage.stringconverter": Converter.STRING,
    "stringconverter": Converter.STRING,
    "org.apache.kafka.connect.json.jsonconverter": Converter.JSON,
    "jsonconverter": Converter.JSON,
    "org.apache.kafka.connect.converters.bytearrayconverter": Converter.BYTEARRAY,
    "bytearrayconverter": Converter.BYTEARRAY,
    "io.confluent.connect.avro.avroconverter": Converter.AVRO,
    "avroconverter": Converter.AVRO,
    "io.confluent.connect.json.jsonschemaconverter": Converter.JSONSCHEMA,
    "jsonschemaconverter": Converter.JSONSCHEMA,
    "io.confluent.connect.protobuf.protobufconverter": Converter.PROTOBUF,
    "protobufconverter": Converter.PROTOBUF,
    **{
        name: kind
        for kind in (
            Converter.LONG,
            Converter.INTEGER,
            Converter.SHORT,
            Converter.FLOAT,
            Converter.DOUBLE,
            Converter.BOOLEAN,
        )
        for name in (
            f"org.apache.kafka.connect.converters.{kind.value}converter",
            f"{kind.value}converter",
        )
    },
    **{c.value: c for c in Converter},
}


#: A converter of your own: ``package.module:Class`` (loaded by the connectors layer, which
#: checks that it is a ``daemon.connectors.converters.Converter`` when a connector or the
#: worker is configured).
_PYTHON_PATH = re.compile(r"^[A-Za-z_][\w.]*:[A-Za-z_][\w.]*$")


def parse_converter(value: object) -> Converter | str:
    """A ``Converter`` from a short name or Connect's class name (any letter case), or a Python
    path ``package.module:Class`` as it is."""
    if isinstance(value, Converter):
        return value
    if isinstance(value, str) and value.strip().lower() in _CONVERTER_NAMES:
        return _CONVERTER_NAMES[value.strip().lower()]
    if isinstance(value, str) and _PYTHON_PATH.match(value.strip()):
        return value.strip()
    raise ValueError(f"{value!r} is not a converter connectd has")


_CONVERTER_EXPECTED = (
    "string, json, bytearray, long, integer, short, float, double, boolean, avro, protobuf or "
    "jsonschema (or Connect's StringConverter, JsonConverter, ByteArrayConverter, "
    "LongConverter, IntegerConverter, ShortConverter, FloatConverter, DoubleConverter, "
    "BooleanConverter class names, or Confluent's io.confluent.connect.avro.AvroConverter, "
    "io.confluent.connect.protobuf.ProtobufConverter and "
    "io.confluent.connect.json.JsonSchemaConverter), or a converter of your own as "
    "package.module:Class"
)
ConverterName = Annotated[
    Converter | str, BeforeValidator(parse_converter), Expect(_CONVERTER_EXPECTED)
]
OptConverterName = Annotated[
    Converter | str | None,
    BeforeValidator(lambda v: None if v is None else parse_converter(v)),
    Expect(_CONVERTER_EXPECTED),
]


class HeaderConverter(enum.StrEnum):
    """What the ``headers`` column's values are (``header.converter``): the bytes as they came,
    their text, or the JSON text of what Connect's JsonConverter reads from them."""

    BYTEARRAY = "bytearray"
    STRING = "string"
    SIMPLE = "simple"
    JSON = "json"


_HEADER_CONVERTER_NAMES: dict[str, HeaderConverter] = {
    "org.apache.kafka.connect.converters.bytearrayconverter": HeaderConverter.BYTEARRAY,
    "bytearrayconverter": HeaderConverter.BYTEARRAY,
    "org.apache.kafka.connect.storage.stringconverter": HeaderConverter.STRING,
    "stringconverter": HeaderConverter.STRING,
    "org.apache.kafka.connect.storage.simpleheaderconverter": HeaderConverter.SIMPLE,
    "simpleheaderconverter": HeaderConverter.SIMPLE,
    "org.apache.kafka.connect.json.jsonconverter": HeaderConverter.JSON,
    "jsonconverter": HeaderConverter.JSON,
    **{c.value: c for c in HeaderConverter},
}


def parse_header_converter(value: object) -> HeaderConverter | None:
    """A ``HeaderConverter`` from Connect's class name or a short name (any letter case)."""
    if value is None or isinstance(value, HeaderConverter):
        return value
    if isinstance(value, str) and value.strip().lower() in _HEADER_CONVERTER_NAMES:
        return _HEADER_CONVERTER_NAMES[value.strip().lower()]
    raise ValueError(
        f"{value!r} is not a header converter connectd has (a table's headers column holds "
        "each header's bytes, its text or its JSON)"
    )


OptHeaderConverterName = Annotated[
    HeaderConverter | None,
    BeforeValidator(parse_header_converter),
    Expect(
        "org.apache.kafka.connect.storage.SimpleHeaderConverter or StringConverter (the "
        "headers' text), org.apache.kafka.connect.json.JsonConverter (their JSON), or "
        "org.apache.kafka.connect.converters.ByteArrayConverter (their bytes)"
    ),
]
