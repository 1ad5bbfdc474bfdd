"""``/connector-plugins``: installed connector classes (and converters, transforms and
predicates), their settings, and configuration validation in Connect's ``ConfigInfos`` shape.

Only installed plugins are looked up — by class name, simple class name or alias (with or
without the ``Connector`` suffix, any case) — so a request can never make the worker import an
arbitrary module.
"""

from __future__ import annotations

from aiohttp import web

import daemon
from daemon.config import transforms as tf
from daemon.connectors.api import ConnectorRegistry, PluginInfo, SinkConnector
from daemon.connectors.converters import list_converters
from daemon.rest import models as m
from daemon.rest.api import Query, Reply, Routes, body, query
from daemon.rest.context import context
from daemon.rest.errors import bad_request, json_reply, not_found
from daemon.rest.validate import connector_key, validate_async

routes = Routes("connector-plugins")

_SUFFIX = "Connector"
_JSON_CONVERTER_KEYS = [
    {
        "name": "schemas.enable",
        "type": "BOOLEAN",
        "required": False,
        "default_value": "true",
        "importance": "HIGH",
        "documentation": 'Values are {"schema": ..., "payload": ...} envelopes.',
        "group": None,
        "width": "NONE",
        "display_name": "schemas.enable",
        "dependents": [],
        "order": -1,
    }
]

#: Confluent's Schema Registry converters' settings connectd honours (``registry/client.py``).
_REGISTRY_CONVERTER_KEYS = [
    {
        **_JSON_CONVERTER_KEYS[0],
        "name": name,
        "display_name": name,
        "type": kind,
        "required": name == "schema.registry.url",
        "default_value": default,
        "importance": "HIGH" if name == "schema.registry.url" else "MEDIUM",
        "documentation": doc,
    }
    for name, kind, default, doc in (
        ("schema.registry.url", "LIST", None, "The registry's URLs, comma-separated."),
        ("basic.auth.credentials.source", "STRING", "URL", "URL or USER_INFO."),
        ("basic.auth.user.info", "PASSWORD", None, "user:password, with USER_INFO."),
        ("schemas.cache.config", "INT", "1000", "How many schemas the cache keeps."),
        ("http.connect.timeout.ms", "INT", "60000", "Connecting to the registry, at most."),
        ("http.read.timeout.ms", "INT", "60000", "The registry's answer, at most."),
        ("schema.registry.ssl.truststore.location", "STRING", None, "The trusted CAs."),
        ("schema.registry.ssl.truststore.type", "STRING", None, "PEM, PKCS12 or JKS."),
        ("schema.registry.ssl.truststore.password", "PASSWORD", None, "The store's password."),
        ("schema.registry.ssl.keystore.location", "STRING", None, "A key and its chain."),
        ("schema.registry.ssl.keystore.type", "STRING", None, "PEM, PKCS12 or JKS."),
        ("schema.registry.ssl.keystore.password", "PASSWORD", None, "The store's password."),
        ("schema.registry.ssl.key.password", "PASSWORD", None, "The key's password."),
    )
]


def _normalized(name: str) -> str:
    """Connect's ``normalizedPluginName``: drop a ``Connector`` suffix."""
    return name[: -len(_SUFFIX)] if name.endswith(_SUFFIX) and len(name) > len(_SUFFIX) else name


def find_plugin(registry: ConnectorRegistry, name: str) -> tuple[PluginInfo, str] | None:
    """The installed plugin called ``name``, and an alias that resolves to it."""
    wanted = {name.strip().lower(), _normalized(name.strip()).lower()}
    for plugin in registry.list_plugins():
        simple = plugin.class_name.rsplit(".", 1)[-1]
        names = {plugin.class_name, simple, _normalized(simple), *plugin.aliases}
        names |= {_normalized(alias) for alias in plugin.aliases}
        if wanted & {n.lower() for n in names}:
            return plugin, plugin.aliases[0]
    return None


def _converter(name: str) -> str | None:
    for class_name in list_converters():
        if name.strip().lower() in (class_name.lower(), class_name.rsplit(".", 1)[-1].lower()):
            return class_name
    return None


@routes.op(
    "GET",
    "/connector-plugins",
    "Installed connector classes; with connectorsOnly=false also converters, transforms and"
    " predicates",
    Reply(200, "The plugins", m.PluginList),
    Reply(400, "Invalid query parameter", m.ErrorMessage),
    query=(Query("connectorsOnly", "bool", True, "List only connector classes"),),
)
async def list_plugins(request: web.Request) -> web.Response:
    ctx = context(request)
    out = [p.to_rest() for p in ctx.registry.list_plugins()]
    if not query(request, "connectorsOnly"):
        out += [
            {"class": name, "type": "converter", "version": daemon.__version__}
            for name in list_converters()
        ]
        out += [
            {"class": name, "type": kind, "version": daemon.__version__}
            for kind, names in (("transformation", tf.TRANSFORMS), ("predicate", tf.PREDICATES))
            for name in names
        ]
    return json_reply(out)


def _chain_key(key: tf.Key) -> dict[str, object]:
    """A transform's or predicate's own setting, in Connect's ``ConfigKeyInfo`` shape."""
    return {
        "name": key.name,
        "type": key.type,
        "required": key.required,
        "default_value": key.default,
        "importance": "HIGH" if key.required else "MEDIUM",
        "documentation": key.doc,
        "group": None,
        "width": "NONE",
        "display_name": key.name,
        "dependents": [],
        "order": -1,
    }


@routes.op(
    "GET",
    "/connector-plugins/{plugin}/config",
    "A plugin's own settings",
    Reply(200, "The settings' definitions", m.ConfigKeyInfoList),
    Reply(404, "No such plugin", m.ErrorMessage),
)
async def plugin_config(request: web.Request) -> web.Response:
    ctx = context(request)
    name = request.match_info["plugin"]
    converter = _converter(name)
    if converter is not None:
        keys = (
            _JSON_CONVERTER_KEYS
            if converter.endswith("JsonConverter")
            else _REGISTRY_CONVERTER_KEYS
            if converter.startswith("io.confluent.")
            else []
        )
        return json_reply(keys)
    chained = tf.class_name(name)
    own = tf.TRANSFORMS.get(chained, tf.PREDICATES.get(chained))
    if own is not None:
        return json_reply([_chain_key(k) for k in own])
    found = find_plugin(ctx.registry, name)
    if found is None:
        raise not_found(f"Unknown plugin {name}.")
    connector = ctx.registry.resolve(found[1])()
    return json_reply([connector_key(k) for k in connector.config_def().keys.values()])


@routes.op(
    "PUT",
    "/connector-plugins/{plugin}/config/validate",
    "Check a configuration for a connector class without creating anything",
    Reply(200, "Every setting with its value and errors", m.ConfigInfos),
    Reply(400, "The body names another connector class", m.ErrorMessage),
    Reply(404, "No such plugin", m.ErrorMessage),
    body=m.ConnectorConfigBody,
    body_description="A configuration; connector.class defaults to the plugin in the path.",
)
async def validate_config(request: web.Request) -> web.Response:
    ctx = context(request)
    plugin = request.match_info["plugin"]
    config = dict(body(request, m.ConnectorConfigBody).root)
    included = config.get("connector.class")
    if included is not None and not _normalized(included).endswith(_normalized(plugin)):
        raise bad_request(
            f"Included connector type {included} does not match request type {plugin}"
        )
    config.setdefault("connector.class", plugin)
    class_name = config["connector.class"]
    found = find_plugin(ctx.registry, class_name)
    if found is None:
        raise not_found(f"Unknown plugin {class_name}.")
    connector: SinkConnector = ctx.registry.resolve(found[1])()
    return json_reply(
        await validate_async(
            class_name, config, connector, ctx.registry.config_def, ctx.registry.checks
        )
    )
