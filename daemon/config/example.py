"""``config.example.toml``, generated from the settings' declarations.

Regenerate after changing a setting: ``python -m daemon.config.example > config.example.toml``.
A unit test fails while the file and the declarations disagree.
"""

from __future__ import annotations

import sys
import textwrap

from daemon.config.connector import ConnectorConfig
from daemon.config.fields import SettingInfo, settings_of
from daemon.config.toml import TomlValue, encode, literal
from daemon.config.worker import WorkerConfig

_HEADER = """\
# connectd configuration for `connectd run --config FILE.toml`.
#
# Generated from connectd's settings: python -m daemon.config.example > config.example.toml
# Every worker setting is listed, commented out, with its meaning and default: uncomment what
# you change. `connectd check-config FILE.toml` reports every mistake in one go.
#
# Keys are Kafka Connect's property names, quoted: "bootstrap.servers" = ... ; the same names
# work in a worker .properties file. (TOML reads an unquoted dotted key as nested tables, which
# connectd joins back with dots, so bootstrap.servers = ... works too, except where a key is
# also the start of another, as key.converter and key.converter.schemas.enable: quote those.)
# Durations are Connect's *.ms integers, in milliseconds. Lists are TOML arrays or
# comma-separated strings. A setting ending in .* takes any number of keys under its prefix:
#   "consumer.max.poll.records" = "500"
# Values may use ${env:VAR} or ${file:/path/file.properties:key} once config.providers
# configures those providers; only configured providers resolve, as in Kafka Connect.
# Relative paths are relative to the directory connectd runs in.

# standalone: run the [[connectors]] below; state lives under state.dir.
# distributed: join the cluster named by group.id; state lives in Kafka topics, and connectors
#   are created through the REST API (no [[connectors]] here).
mode = "standalone"

[worker]
"""

_CONNECTORS = """\
# ---------------------------------------------------------------------------------------------
# Connectors (standalone mode). Each entry is a name and a config table, or a file:
#
# [[connectors]]
# name = "sink-hang-connector"
# [connectors.config]
# "connector.class" = "HangSink"
# "tasks.max" = 1
# topics = "some_demo_topic"
#
# [[connectors]]
# file = "examples/parquet-sink.properties"    # .properties or .json, relative to this file
#
# Settings every connector has (the other keys of a config belong to its connector class):
"""


def _wrap(text: str) -> list[str]:
    return textwrap.wrap(text, width=95, initial_indent="# ", subsequent_indent="#   ")


def _shown(info: SettingInfo, value: object) -> TomlValue | None:
    encoded = encode(info, value)
    return None if isinstance(encoded, dict) else encoded


def _default_text(info: SettingInfo) -> str:
    if info.required:
        return "required"
    if info.default_doc is not None:
        return info.default_doc
    shown = _shown(info, info.default)
    if shown is None or shown == []:
        return "unset"
    return literal(shown)


def _setting_lines(info: SettingInfo, indent: str = "") -> list[str]:
    lines = _wrap(f"{info.key}: {info.description}")
    lines += _wrap(f"Expected: {info.expected}. Default: {_default_text(info)}.")
    if info.prefix is not None:
        for name, value in dict(info.example or {"NAME": "VALUE"}).items():
            lines.append(f"#{indent}{literal(info.prefix + str(name))} = {literal(str(value))}")
        return lines
    value = info.example if info.example is not None else _shown(info, info.default)
    if value is None:
        value = ""
    lines.append(f"#{indent}{literal(info.key)} = {literal(value)}")
    return lines


#: The worker's sections in the order the example shows them (``WorkerConfig`` gathers its
#: settings from several models; each section's settings keep their declaration order).
GROUPS = (
    "Kafka",
    "REST API",
    "Converters",
    "Tasks",
    "Startup (connectd)",
    "Storage",
    "Distributed mode",
    "Config providers",
    "Executors (connectd)",
    "Logging (connectd)",
)


def render_example() -> str:
    """The text of ``config.example.toml``."""
    out = [_HEADER]
    infos = settings_of(WorkerConfig)
    order = {g: i for i, g in enumerate(GROUPS)}
    groups = sorted(dict.fromkeys(i.group for i in infos), key=lambda g: order.get(g, len(order)))
    for group in groups:
        out.append(f"# == {group} " + "=" * (90 - len(group)) + "\n")
        for info in infos:
            if info.group == group:
                out.append("\n".join(_setting_lines(info)) + "\n")
    out.append(_CONNECTORS)
    for info in settings_of(ConnectorConfig):
        out.append("\n".join(_setting_lines(info, indent=" ")) + "\n#")
    return "\n".join(out) + "\n"


if __name__ == "__main__":
    sys.stdout.write(render_example())
