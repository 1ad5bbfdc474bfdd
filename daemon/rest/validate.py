"""Connect's config-definition and validation answers (``ConfigKeyInfo``, ``ConfigInfos``).

Definitions come from the declarations themselves: the framework's settings from
``settings_of(ConnectorConfig)``, the connector's own from its ``ConfigDef``. Validation runs
the same checks as creating the connector (``parse_connector`` with the registry's resolver,
then the connector's own ``validate``, then what the worker refuses: data locations its Spark
cannot reach, more tasks than ``tasks.max.limit``: ``checks``) and files each problem under its
key.
"""

from __future__ import annotations

import enum
import re
import types
import typing
from collections.abc import Mapping
from datetime import timedelta
from typing import Any

from pydantic import SecretStr

from daemon.config import ConnectorConfig, SettingInfo, parse_connector, settings_of
from daemon.config.definitions import REQUIRED, ConfigKey, ConfigType, ConnectorDefResolver
from daemon.config.problems import Problem, error
from daemon.config.worker_checks import NONE_REFUSED, WorkerChecks
from daemon.connectors.api import SinkConnector
from daemon.connectors.converters import converter_problems
from daemon.connectors.registry import existing_problems_async, off_loop
from daemon.errors import InvalidConfig

_HIGH = {"name", "connector.class", "tasks.max", "topics", "topics.regex"}
_GROUPS = {"": "Common", "Errors": "Error Handling"}
_HIDDEN = "[hidden]"


def _type_name(annotation: Any) -> str:
    """Connect's type name for a framework setting's Python type."""
    base = annotation
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        base = next(a for a in typing.get_args(annotation) if a is not type(None))
    origin = typing.get_origin(base) or base
    if base is bool:
        return "BOOLEAN"
    if base is int:
        return "INT"
    if base is timedelta:
        return "LONG"
    if origin in (tuple, list):
        return "LIST"
    if isinstance(base, type) and issubclass(base, SecretStr):
        return "PASSWORD"
    if isinstance(base, type) and base.__name__ == "Converter":
        return "CLASS"
    return "STRING"


def _text(value: Any) -> str | None:
    """Connect's ``ConfigDef.convertToString`` for a Python value."""
    if value is None or value is REQUIRED:
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, timedelta):
        return str(int(value.total_seconds() * 1000))
    if isinstance(value, list | tuple):
        return ",".join(str(v) for v in value)
    if isinstance(value, enum.Enum):
        return str(value.value)
    if isinstance(value, re.Pattern):
        return str(value.pattern)
    return str(value)


def _framework_default(info: SettingInfo) -> str | None:
    if info.required:
        return None
    if info.default is None and info.forever:
        return "-1"
    return _text(info.default)


def framework_keys() -> list[dict[str, Any]]:
    """``ConfigKeyInfo`` of every framework setting (prefix settings such as
    ``consumer.override.*`` are families of keys, not keys, and are left out)."""
    out = []
    order: dict[str, int] = {}
    for info in settings_of(ConnectorConfig):
        if info.prefix is not None:
            continue
        group = _GROUPS.get(info.group, info.group)
        order[group] = order.get(group, 0) + 1
        out.append(
            {
                "name": info.key,
                "type": _type_name(ConnectorConfig.model_fields[info.name].annotation),
                "required": info.required,
                "default_value": _framework_default(info),
                "importance": "HIGH" if info.key in _HIGH else "LOW",
                "documentation": info.description,
                "group": group,
                "width": "NONE",
                "display_name": info.key,
                "dependents": [],
                "order": order[group],
            }
        )
    return out


def connector_key(key: ConfigKey) -> dict[str, Any]:
    """``ConfigKeyInfo`` of one of a connector's own settings."""
    kind = "LONG" if key.type is ConfigType.MS else key.type.value.upper()
    return {
        "name": key.name,
        "type": kind,
        "required": key.required,
        "default_value": None if key.required else _text(key.default),
        "importance": key.importance.value.upper(),
        "documentation": key.documentation,
        "group": key.group,
        "width": "NONE",
        "display_name": key.display_name or key.name,
        "dependents": [],
        "order": -1,
    }


def _unknown_key(name: str) -> dict[str, Any]:
    return {
        "name": name,
        "type": "STRING",
        "required": False,
        "default_value": None,
        "importance": "LOW",
        "documentation": "",
        "group": None,
        "width": "NONE",
        "display_name": name,
        "dependents": [],
        "order": -1,
    }


def _problems(
    config: Mapping[str, str],
    connector: SinkConnector,
    resolver: ConnectorDefResolver,
    existing: list[Problem] | None = None,
    checks: WorkerChecks = NONE_REFUSED,
) -> list[Problem]:
    found: list[Problem] = list(existing or [])
    try:
        found += parse_connector(config, resolver=resolver).warnings
    except InvalidConfig as exc:
        found += exc.problems
    try:
        found += connector.validate(config)
        found += checks.problems(connector.config_def(), config)
        found += converter_problems(config)
    except Exception as exc:  # a connector's bug must not turn validation into a 500
        found.append(error("connector.class", f"the connector's validate() raised {exc!r}"))
    unique: dict[tuple[str | None, str], Problem] = {}
    for problem in found:
        if problem.is_error:
            unique.setdefault((problem.key, problem.message), problem)
    return list(unique.values())


async def validate_async(
    name: str,
    config: Mapping[str, str],
    connector: SinkConnector,
    resolver: ConnectorDefResolver,
    checks: WorkerChecks = NONE_REFUSED,
) -> dict[str, Any]:
    """``validate`` plus the connector's ``check_existing`` (a table another connector writes
    …), run in a thread under a deadline, when the configuration is otherwise valid: the same
    checks as creating the connector. ``name`` is what the answer names (Connect: the class);
    the connector is ``config["name"]``."""
    existing: list[Problem] = []
    what = f"connector {config.get('name', name)}"
    if not await off_loop(lambda: _problems(config, connector, resolver, None, checks), what):
        owner = config.get("name", "")
        existing = await existing_problems_async(type(connector), owner, config)
    return await off_loop(
        lambda: validate(name, config, connector, resolver, existing, checks), what
    )


def validate(
    name: str,
    config: Mapping[str, str],
    connector: SinkConnector,
    resolver: ConnectorDefResolver,
    existing: list[Problem] | None = None,
    checks: WorkerChecks = NONE_REFUSED,
) -> dict[str, Any]:
    """Connect's ``ConfigInfos`` for ``config`` checked as a configuration of ``connector``
    (with ``existing``: problems ``check_existing`` found, filed under their keys) for a
    worker that refuses what ``checks`` says."""
    definitions = framework_keys()
    known = {d["name"] for d in definitions}
    for own in connector.config_def().keys.values():
        if own.name not in known:
            definitions.append(connector_key(own))
            known.add(own.name)
    errors: dict[str, list[str]] = {}
    for problem in _problems(config, connector, resolver, existing, checks):
        key = problem.key or "connector.class"
        text = problem.message
        if problem.expected is not None:
            text += f"; expected {problem.expected}"
        errors.setdefault(key, []).append(text)
        if key not in known:
            definitions.append(_unknown_key(key))
            known.add(key)
    configs = []
    for definition in definitions:
        key = definition["name"]
        value = config.get(key, definition["default_value"])
        if value is not None and definition["type"] == "PASSWORD":
            value = _HIDDEN
        configs.append(
            {
                "definition": definition,
                "value": {
                    "name": key,
                    "value": value,
                    "recommended_values": [],
                    "errors": errors.get(key, []),
                    "visible": True,
                },
            }
        )
    groups = list(dict.fromkeys(d["group"] for d in definitions if d["group"] is not None))
    return {
        "name": name,
        "error_count": sum(len(e) for e in errors.values()),
        "groups": groups,
        "configs": configs,
    }
