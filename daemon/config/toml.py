"""The TOML configuration of ``connectd run --config FILE.toml``: mode, worker and connectors.

One scheme: keys are Kafka Connect's property names, written quoted, in a ``[worker]`` table
and in each ``[[connectors]]`` entry's ``config`` table (``config.example.toml`` shows all of
them). TOML reads an unquoted dotted key (``bootstrap.servers = ...``) as nested tables; those
are joined back with dots, so the unquoted form works wherever no key is also the start of
another (``key.converter`` / ``key.converter.schemas.enable`` must be quoted). Values take
TOML's types (integers, booleans, arrays) or Connect's strings.
"""

from __future__ import annotations

import json
import re
import tomllib
from collections.abc import Mapping
from datetime import date, time, timedelta
from enum import Enum
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, SecretStr

from daemon.config.connector import ConnectorConfig
from daemon.config.definitions import ConnectorDefResolver
from daemon.config.fields import SettingInfo, settings_of
from daemon.config.jsonfile import config_map
from daemon.config.loaders import connector_values
from daemon.config.modes import Mode
from daemon.config.parse import Loaded, parse_connector, parse_worker
from daemon.config.problems import Problem, Severity, error, raise_if_errors, unknown_key
from daemon.config.properties import binary_problem
from daemon.config.worker import WorkerConfig
from daemon.errors import InvalidConfig

TomlValue = str | int | bool | list[str]


class DaemonConfig(BaseModel):
    """Everything ``connectd run`` needs. In distributed mode ``connectors`` is empty: connectors
    are created through the REST API and stored in the cluster's config topic."""

    model_config = ConfigDict(frozen=True)

    mode: Mode = Mode.STANDALONE
    worker: WorkerConfig
    connectors: tuple[ConnectorConfig, ...] = ()


def flatten(
    table: Mapping[str, Any], where: str, prefix: str = ""
) -> tuple[dict[str, Any], list[Problem]]:
    """Nested tables joined into dotted keys; values that are not settings are problems."""
    out: dict[str, Any] = {}
    problems: list[Problem] = []
    for key, value in table.items():
        full = prefix + key
        if isinstance(value, dict):
            more, more_problems = flatten(value, where, full + ".")
            out.update(more)
            problems += more_problems
        elif isinstance(value, date | time) or (
            isinstance(value, list) and not all(isinstance(v, str | int | float) for v in value)
        ):
            problems.append(
                error(
                    full,
                    f"{value!r} is not a setting value",
                    "a string, number, boolean or array of strings",
                )
            )
        else:
            out[full] = value
    return out, problems


_HEADER = re.compile(r"^\s*(\[\[?)\s*([^\]]+?)\s*\]\]?\s*(#.*)?$")
_KEY = re.compile(r"""^\s*("(?:[^"\\]|\\.)*"|'[^']*'|[A-Za-z0-9_.\-"'\s]+?)\s*=""")


def _unquote(dotted: str) -> str:
    parts = re.findall(r"\"[^\"]*\"|'[^']*'|[^.]+", dotted)
    return ".".join(part.strip().strip("\"'") for part in parts)


def key_lines(text: str) -> tuple[dict[str, int], dict[int, dict[str, int]]]:
    """Best-effort line numbers of the ``[worker]`` keys and of each connector's config keys."""
    worker: dict[str, int] = {}
    connectors: dict[int, dict[str, int]] = {}
    table: list[str] = []
    index = -1
    for number, line in enumerate(text.splitlines(), start=1):
        header = _HEADER.match(line)
        if header:
            table = _unquote(header.group(2)).split(".")
            if header.group(1) == "[[" and table == ["connectors"]:
                index += 1
            continue
        key = _KEY.match(line)
        if key is None or line.lstrip().startswith("#"):
            continue
        name = ".".join([*table[1:], _unquote(key.group(1))])
        if table[:1] == ["worker"]:
            worker.setdefault(name, number)
        elif table[:2] == ["connectors", "config"]:
            connectors.setdefault(index, {}).setdefault(name.removeprefix("config."), number)
    return worker, connectors


def _connector(
    i: int,
    entry: object,
    file: str,
    base: Path,
    lines: Mapping[str, int],
    resolver: ConnectorDefResolver | None,
) -> tuple[ConnectorConfig | None, list[Problem]]:
    """One ``[[connectors]]`` entry. Problems in an inline config are keyed by their TOML path
    (``connectors[0].config.tasks.max``); those of a ``file = ...`` entry name that file."""
    here = f"connectors[{i}]"

    def at(p: Problem) -> Problem:
        key = f"{here}.config.{p.key}" if p.key is not None else here
        return Problem(file, key, p.message, p.expected, p.severity, lines.get(p.key or ""))

    if not isinstance(entry, dict):
        return None, [Problem(file, here, "not a table", "name and config, or file")]
    problems = [
        unknown_key(k, ["name", "config", "file"], Severity.ERROR).located(file)
        for k in entry.keys() - {"name", "config", "file"}
    ]
    problems = [Problem(file, f"{here}.{p.key}", p.message) for p in problems]
    values: dict[str, str] = {}
    inline = "file" not in entry
    if not inline:
        if "config" in entry:
            problems.append(Problem(file, f"{here}.file", "both file and config are set", "one"))
        source = str(base / str(entry["file"]))
        values, source_lines, read = connector_values(source)
        problems += read
    elif isinstance(entry.get("config"), dict):
        flat, flat_problems = flatten(entry["config"], file)
        values, more = config_map(flat)
        problems += [at(p) for p in (*flat_problems, *more)]
    else:
        problems.append(
            Problem(file, f"{here}.config", "missing or not a table", "a config table, or file")
        )
    if "name" in entry:
        name = str(entry["name"]).strip()
        if values.get("name", name).strip() != name:
            message = f"'{name}' differs from the config's name '{values['name'].strip()}'"
            problems.append(Problem(file, f"{here}.name", message, "one name"))
        values["name"] = name
    if any(p.is_error and p.key in (None, f"{here}.config") for p in problems):
        return None, problems
    try:
        if inline:
            loaded = parse_connector(values, resolver=resolver)
        else:
            loaded = parse_connector(values, file=source, lines=source_lines, resolver=resolver)
    except InvalidConfig as exc:
        found = list(exc.problems)
        return None, problems + ([at(p) for p in found] if inline else found)
    return loaded.config, problems + (
        [at(p) for p in loaded.warnings] if inline else loaded.warnings
    )


def parse_daemon_toml(
    text: str,
    file: str = "config.toml",
    base: Path | None = None,
    resolver: ConnectorDefResolver | None = None,
) -> Loaded[DaemonConfig]:
    """A ``DaemonConfig`` from TOML text; ``[[connectors]] file = ...`` is relative to ``base``."""
    try:
        document = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise InvalidConfig([Problem(file, None, f"not valid TOML: {exc}")]) from None
    problems = [
        unknown_key(k, ["mode", "worker", "connectors"], Severity.ERROR).located(file)
        for k in document.keys() - {"mode", "worker", "connectors"}
    ]
    try:
        mode = Mode(str(document.get("mode", "standalone")).strip().lower())
    except ValueError:
        problems.append(
            Problem(
                file, "mode", f"{document['mode']!r} is not a mode", "standalone or distributed"
            )
        )
        mode = Mode.STANDALONE
    worker_lines, connector_lines = key_lines(text)
    worker: WorkerConfig | None = None
    table = document.get("worker", {})
    if not isinstance(table, dict):
        problems.append(Problem(file, "worker", "not a table", "a [worker] table"))
    else:
        flat, flat_problems = flatten(table, file)
        problems += [p.located(file, worker_lines) for p in flat_problems]
        try:
            loaded = parse_worker(flat, file=file, lines=worker_lines, mode=mode)
            worker, warnings = loaded
            problems += warnings
        except InvalidConfig as exc:
            problems += exc.problems
    entries = document.get("connectors", [])
    connectors: list[ConnectorConfig] = []
    if not isinstance(entries, list):
        problems.append(
            Problem(file, "connectors", "not an array of tables", "[[connectors]] entries")
        )
        entries = []
    if entries and mode is Mode.DISTRIBUTED:
        problems.append(
            Problem(
                file,
                "connectors",
                "set in distributed mode",
                "no [[connectors]]: create connectors through the REST API",
            )
        )
    for i, entry in enumerate(entries):
        connector, connector_problems = _connector(
            i, entry, file, base or Path("."), connector_lines.get(i, {}), resolver
        )
        problems += connector_problems
        if connector is not None:
            if any(c.name == connector.name for c in connectors):
                problems.append(
                    Problem(
                        file,
                        f"connectors[{i}].name",
                        f"'{connector.name}' is configured twice",
                        "unique names",
                    )
                )
            connectors.append(connector)
    warnings = raise_if_errors(problems)
    assert worker is not None
    return Loaded(DaemonConfig(mode=mode, worker=worker, connectors=tuple(connectors)), warnings)


def load_daemon_toml(
    path: str | Path, resolver: ConnectorDefResolver | None = None
) -> Loaded[DaemonConfig]:
    """Load ``connectd run``'s TOML file. Raises ``InvalidConfig`` with every problem found."""
    try:
        data = Path(path).read_bytes()
        binary = binary_problem(data, str(path))
        if binary is not None:
            raise InvalidConfig([binary])
        text = data.decode("utf-8-sig")  # a byte order mark is not TOML
    except (OSError, UnicodeDecodeError) as exc:
        raise InvalidConfig([Problem(str(path), None, f"cannot read the file: {exc}")]) from None
    return parse_daemon_toml(text, str(path), Path(path).parent, resolver)


def encode(info: SettingInfo, value: object) -> TomlValue | dict[str, str] | None:
    """A setting's value in TOML's native types; ``None`` when it is unset."""
    if value is None:
        return -1 if info.forever else None
    if isinstance(value, Enum):
        return str(value.value)
    if isinstance(value, bool | int | str):
        return value
    if isinstance(value, timedelta):
        return int(value / timedelta(milliseconds=1))
    if isinstance(value, SecretStr):
        return value.get_secret_value()
    if isinstance(value, tuple | list):
        return [str(item) for item in value]
    if isinstance(value, dict):
        return {str(k): str(v) for k, v in value.items()}
    if isinstance(value, re.Pattern):
        return str(value.pattern)
    return str(value)  # Path, Listener


def literal(value: TomlValue) -> str:
    """A TOML literal. JSON's string syntax is TOML's basic string, but for U+007F."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, list):
        return "[" + ", ".join(literal(v) for v in value) + "]"
    return json.dumps(value, ensure_ascii=False).replace("\x7f", "\\u007f")


def worker_items(worker: WorkerConfig, only_set: bool = True) -> dict[str, TomlValue]:
    """The worker's settings as flat ``{connect.key: TOML value}``."""
    out: dict[str, TomlValue] = {}
    for info in settings_of(WorkerConfig):
        if only_set and info.name not in worker.model_fields_set:
            continue
        value = encode(info, getattr(worker, info.name))
        if isinstance(value, dict):
            out.update({f"{info.prefix}{k}": v for k, v in value.items()})
        elif value is not None:
            out[info.key] = value
    return out


def dump_daemon_toml(config: DaemonConfig) -> str:
    """TOML that ``parse_daemon_toml`` reads back as ``config`` (worker settings that were set,
    and each connector's stored map as it is, references unresolved)."""
    lines = [f"mode = {literal(config.mode.value)}", "", "[worker]"]
    lines += [f"{literal(k)} = {literal(v)}" for k, v in worker_items(config.worker).items()]
    for connector in config.connectors:
        lines += ["", "[[connectors]]", f"name = {literal(connector.name)}", "[connectors.config]"]
        lines += [
            f"{literal(k)} = {literal(v)}" for k, v in connector.properties.items() if k != "name"
        ]
    return "\n".join(lines) + "\n"
