"""Connector configs as JSON: the bare map, or Connect's ``{"name": ..., "config": {...}}``.

This is also the shape of the REST API's ``POST /connectors`` body, so the REST layer uses
``connector_map_from_json`` on request bodies. As in Connect, numbers and booleans stand for
their text (``1`` → ``"1"``, ``true`` → ``"true"``); nested objects and arrays are refused.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from daemon.config.problems import Problem, error, warning

# Keys of GET /connectors/<name>: accepted so a saved GET response loads as a config.
_IGNORED_TOP = {"tasks", "type"}


def scalar_text(value: object) -> str | None:
    """The text Connect stores for a JSON scalar; ``None`` for objects, arrays and null."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str | int | float):
        return str(value)
    return None


def config_map(items: Mapping[str, Any], where: str = "") -> tuple[dict[str, str], list[Problem]]:
    """A ``{key: text}`` map from JSON (or TOML) scalars, reporting what is not a scalar."""
    out: dict[str, str] = {}
    problems: list[Problem] = []
    for key, value in items.items():
        text = scalar_text(value)
        if text is not None:
            out[key] = text
        elif value is None:
            problems.append(warning(where + key, "the value is null; the key is ignored"))
        else:
            kind = "an object" if isinstance(value, Mapping) else "an array"
            problems.append(
                error(where + key, f"the value is {kind}", "a string, number or boolean")
            )
    return out, problems


def connector_map_from_json(document: object) -> tuple[dict[str, str], list[Problem]]:
    """The connector's string map from a parsed JSON document, in either form.

    With ``{"name": ..., "config": {...}}`` the top-level ``name`` (trimmed) is put into the
    map; a ``config.name`` that disagrees with it is an error.
    """
    if not isinstance(document, dict):
        return {}, [
            error(
                None,
                "the document is not a JSON object",
                '{"name": ..., "config": {...}} or a map of settings',
            )
        ]
    if "config" not in document:
        return config_map(document)
    problems: list[Problem] = []
    for key in document.keys() - {"name", "config"}:
        if key in _IGNORED_TOP:
            problems.append(
                warning(key, "ignored (part of the REST API's answer, not of a config)")
            )
        else:
            problems.append(error(key, f"unknown top-level key '{key}'", '"name" and "config"'))
    config = document["config"]
    if not isinstance(config, dict):
        return {}, [
            *problems,
            error("config", "the value is not a JSON object", "a map of settings"),
        ]
    out, more = config_map(config)
    problems += more
    if "name" in document:
        name = document["name"]
        if not isinstance(name, str):
            problems.append(error("name", f"{name!r} is not a string", "the connector's name"))
        elif "name" in out and out["name"].strip() != name.strip():
            problems.append(
                error(
                    "name",
                    f"'{name.strip()}' differs from config.name '{out['name'].strip()}'",
                    "the same name in both places, or only one",
                )
            )
        else:
            out["name"] = name.strip()
    return out, problems


def read_connector_json(text: str) -> tuple[dict[str, str], list[Problem]]:
    """Parse JSON text into the connector map. A repeated key keeps its last value (warning)."""
    repeated: list[Problem] = []

    def pairs(items: list[tuple[str, Any]]) -> dict[str, Any]:
        seen: dict[str, Any] = {}
        for key, value in items:
            if key in seen:
                repeated.append(warning(key, "set again; the last value is used"))
            seen[key] = value
        return seen

    try:
        document = json.loads(text, object_pairs_hook=pairs)
    except json.JSONDecodeError as exc:
        return {}, [
            Problem(None, None, f"not valid JSON: {exc.msg} (column {exc.colno})", line=exc.lineno)
        ]
    values, problems = connector_map_from_json(document)
    return values, repeated + problems
