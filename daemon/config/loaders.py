"""Load configuration files: worker ``.properties``, connector ``.properties`` or ``.json``.

Each loader returns ``Loaded(config, warnings)`` or raises ``InvalidConfig`` (a
``ConfigError``) carrying every problem found, each naming the file, the key and, for
``.properties`` files, the line. These are the arguments of ``connect-standalone.sh`` and
``connect-distributed.sh``, which ``connectd standalone`` and ``connectd distributed`` take too.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TypeVar

from pydantic import BaseModel

from daemon.config.connector import ConnectorConfig
from daemon.config.definitions import ConnectorDefResolver
from daemon.config.jsonfile import read_connector_json
from daemon.config.modes import Mode
from daemon.config.parse import CONNECTOR_MARKERS as CONNECTOR_MARKERS
from daemon.config.parse import Loaded, parse_connector, parse_worker
from daemon.config.problems import Problem, raise_if_errors
from daemon.config.properties import binary_problem, read_properties
from daemon.config.worker import WorkerConfig
from daemon.errors import InvalidConfig

M = TypeVar("M", bound=BaseModel)


class Kind(enum.StrEnum):
    """What a configuration file configures."""

    WORKER = "worker"
    CONNECTOR = "connector"
    DAEMON = "daemon"


def kind_of(path: str | Path, keys: Mapping[str, object] | None = None) -> Kind:
    """A file's kind from its extension, and for ``.properties`` from its keys."""
    suffix = Path(path).suffix.lower()
    if suffix == ".toml":
        return Kind.DAEMON
    if suffix == ".json":
        return Kind.CONNECTOR
    if keys is not None and any(k in keys for k in CONNECTOR_MARKERS):
        return Kind.CONNECTOR
    return Kind.WORKER


def _merge(read: list[Problem], parse: Callable[[], Loaded[M]]) -> Loaded[M]:
    """Parse, reporting reading problems together with the parser's.

    A file-level reading error (unreadable file, not JSON at all) stops here: parsing an empty
    map would only add noise.
    """
    if any(p.is_error and p.key is None for p in read):
        raise InvalidConfig(read)
    try:
        loaded = parse()
    except InvalidConfig as exc:
        # A key whose value could not be read at all is not reported again as missing.
        unreadable = {p.key for p in read if p.is_error}
        raise InvalidConfig(
            [*read, *(p for p in exc.problems if p.key not in unreadable)]
        ) from None
    warnings = raise_if_errors([*read, *loaded.warnings])
    return Loaded(loaded.config, warnings)


def load_worker(path: str | Path, mode: Mode | None = None) -> Loaded[WorkerConfig]:
    """Load a worker ``.properties`` file, checked for ``mode`` if given."""
    file = str(path)
    parsed = read_properties(path)
    return _merge(
        parsed.problems,
        lambda: parse_worker(parsed.values, file=file, lines=parsed.lines, mode=mode),
    )


def load_connector(
    path: str | Path, resolver: ConnectorDefResolver | None = None
) -> Loaded[ConnectorConfig]:
    """Load a connector file: ``.json`` (either form) or ``.properties`` (any other name)."""
    values, lines, read = connector_values(path)
    return _merge(
        read,
        lambda: parse_connector(values, file=str(path), lines=lines, resolver=resolver),
    )


def connector_values(path: str | Path) -> tuple[dict[str, str], dict[str, int], list[Problem]]:
    """A connector file's raw string map (what is stored), key lines, and reading problems."""
    file = str(path)
    if Path(path).suffix.lower() == ".json":
        try:
            data = Path(path).read_bytes()
            binary = binary_problem(data, file)
            if binary is not None:
                return {}, {}, [binary]
            text = data.decode("utf-8-sig")  # a byte order mark is not JSON
        except (OSError, UnicodeDecodeError) as exc:
            return {}, {}, [Problem(file, None, f"cannot read the file: {exc}")]
        values, problems = read_connector_json(text)
        return values, {}, [p.located(file) for p in problems]
    parsed = read_properties(path)
    return parsed.values, parsed.lines, [p.located(file) for p in parsed.problems]
