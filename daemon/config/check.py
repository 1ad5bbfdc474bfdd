"""``connectd check-config``: load configuration files and report every problem in them.

Exit status: 0 when no file has an error (warnings allowed), 78 (EX_CONFIG) when one has,
64 (EX_USAGE) for bad arguments. The files are checked together as a command line would give
them: two connector files that define one ``name`` differently are an error naming both files
(``connectd standalone`` refuses any two files of one name). A connector file checked with a
worker file, and a TOML file's connectors, are also checked against what that worker refuses: a
local table path with a cluster master, more tasks than its ``tasks.max.limit``
(``daemon.config.worker_checks``).
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, NoReturn, TextIO

from daemon.config.connector import ConnectorConfig
from daemon.config.definitions import ConnectorDefResolver
from daemon.config.loaders import (
    CONNECTOR_MARKERS,
    Kind,
    connector_values,
    kind_of,
    load_connector,
    load_worker,
)
from daemon.config.modes import Mode
from daemon.config.names import duplicate_names
from daemon.config.parse import Loaded
from daemon.config.problems import Problem
from daemon.config.properties import read_properties
from daemon.config.toml import DaemonConfig, load_daemon_toml
from daemon.config.worker import WorkerConfig
from daemon.config.worker_checks import WorkerChecks
from daemon.errors import InvalidConfig

EX_OK, EX_USAGE, EX_CONFIG = 0, 64, 78


class _UsageError(Exception):
    pass


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        raise _UsageError(message)


class _Files(argparse.Action):
    """Collects every file with its kind (``None``: decide from the file)."""

    def __call__(
        self, parser: Any, namespace: argparse.Namespace, values: Any, option: Any = None
    ) -> None:
        kind = self.const
        items = list(getattr(namespace, "items", None) or [])
        items += [(kind, v) for v in (values if isinstance(values, list) else [values])]
        namespace.items = items


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="connectd check-config",
        description="Check connectd and Kafka Connect configuration files; report every problem.",
        epilog=(
            "A FILE's kind comes from its name: .toml is a connectd run config, .json a "
            "connector; a .properties file is a connector's if it sets connector.class, name, "
            "tasks.max, topics or topics.regex, else a worker's. Exit status: 0 no errors, "
            "78 errors found, 64 bad arguments."
        ),
    )
    parser.add_argument(
        "files", nargs="*", metavar="FILE", action=_Files, const=None, help="file to check"
    )
    parser.add_argument(
        "--worker",
        metavar="FILE",
        action=_Files,
        const=Kind.WORKER,
        help="check FILE as a worker config",
    )
    parser.add_argument(
        "--connector",
        metavar="FILE",
        action=_Files,
        const=Kind.CONNECTOR,
        help="check FILE as a connector config",
    )
    parser.add_argument(
        "--mode",
        choices=[m.value for m in Mode],
        help="mode to check worker files for (default: distributed if the file sets group.id)",
    )
    return parser


def _check_one(
    path: str, kind: Kind | None, mode: Mode | None, resolver: ConnectorDefResolver | None
) -> tuple[str, Callable[[], Loaded[Any]]]:
    """What the file is taken for (and why), and the check to run on it."""
    keys: dict[str, str] | None = None
    if kind is not None:
        why = "as asked"
    elif Path(path).suffix.lower() in (".toml", ".json"):
        kind, why = kind_of(path), "from its name"
    else:
        keys = read_properties(path).values
        kind = kind_of(path, keys)
        marker = next((k for k in CONNECTOR_MARKERS if k in keys), None)
        why = f"it sets {marker}" if marker else "no connector keys"
    if kind is Kind.DAEMON:
        return f"a connectd run config ({why})", lambda: load_daemon_toml(path, resolver)
    if kind is Kind.CONNECTOR:
        return f"a connector config ({why})", lambda: load_connector(path, resolver)
    if mode is None:
        keys = keys if keys is not None else read_properties(path).values
        mode = Mode.DISTRIBUTED if "group.id" in keys else Mode.STANDALONE
        why += "; " + ("it sets group.id" if "group.id" in keys else "no group.id")
    worker_mode = mode
    return f"a {mode.value} worker config ({why})", lambda: load_worker(path, worker_mode)


def _same_name(path: str, named: dict[str, tuple[str, dict[str, str]]]) -> list[Problem]:
    """An error if an earlier file names the same connector differently (or the same file is
    given twice), as ``connectd standalone`` refuses it; the same connector written twice
    identically (e.g. a ``.json`` and a ``.properties`` form, as in ``examples/``) is not."""
    try:
        values = connector_values(path)[0]
    except (OSError, ValueError):
        return []
    name = values.get("name", "").strip()
    if not name:
        return []
    if name not in named:
        named[name] = (path, values)
        return []
    first, first_values = named[name]
    if first_values == values and Path(first) != Path(path):
        return []
    return duplicate_names([(name, first), (name, path)])


def _worker_problems(
    loaded: Sequence[tuple[str, object]], resolver: ConnectorDefResolver
) -> list[Problem]:
    """Each connector file against each worker file checked with it (a command line runs them
    together), and a TOML file's connectors against its own worker: what that worker refuses
    (a data location its Spark cannot reach, more tasks than its bound)."""
    workers = [WorkerChecks.of(c) for _, c in loaded if isinstance(c, WorkerConfig)]
    found: dict[str, Problem] = {}
    for path, config in loaded:
        if isinstance(config, ConnectorConfig):
            lines = connector_values(path)[1]
            definition = resolver(config.connector_class)
            for checks in dict.fromkeys(workers):
                for p in checks.problems(definition, config.properties):
                    located = p.located(path, lines)
                    found.setdefault(str(located), located)
        elif isinstance(config, DaemonConfig):
            checks = WorkerChecks.of(config.worker)
            for i, c in enumerate(config.connectors):
                for p in checks.problems(resolver(c.connector_class), c.properties):
                    located = Problem(
                        path, f"connectors[{i}].config.{p.key}", p.message, p.expected
                    )
                    found.setdefault(str(located), located)
    return list(found.values())


def check_main(
    argv: Sequence[str],
    out: TextIO,
    err: TextIO,
    *,
    resolver: ConnectorDefResolver | None = None,
) -> int:
    """Check each file in ``argv`` (files, ``--worker F``, ``--connector F``, ``--mode M``).

    Prints, to ``out``, which kind each file was taken for, every problem (``error: ...`` or
    ``warning: ...``, naming file, line, key, what is wrong and what is expected) and a summary.
    Returns 78 if any file has an error, else 0; 64 for bad arguments (message to ``err``).
    ``resolver`` (connector class → its settings) checks connector-specific keys when given.
    """
    parser = build_parser()
    try:
        args = parser.parse_intermixed_args(list(argv))
    except _UsageError as exc:
        err.write(f"{parser.format_usage()}connectd check-config: error: {exc}\n")
        return EX_USAGE
    items: list[tuple[Kind | None, str]] = getattr(args, "items", None) or []
    if not items:
        err.write(f"{parser.format_usage()}connectd check-config: error: no file to check\n")
        return EX_USAGE
    mode = Mode(args.mode) if args.mode else None
    errors = warnings = 0
    named: dict[str, tuple[str, dict[str, str]]] = {}  # connector name → first file, its keys
    loaded: list[tuple[str, object]] = []  # each file that loaded, with what it holds
    for kind, path in items:
        taken_for, check = _check_one(path, kind, mode, resolver)
        out.write(f"{path}: checking as {taken_for}\n")
        try:
            config, problems = check()
            loaded.append((path, config))
        except InvalidConfig as exc:
            problems = list(exc.problems)
        if taken_for.startswith("a connector config"):
            problems += _same_name(path, named)
        for problem in problems:
            out.write(f"{problem.severity.value}: {problem}\n")
        errors += sum(p.is_error for p in problems)
        warnings += sum(not p.is_error for p in problems)
    for problem in _worker_problems(loaded, resolver) if resolver is not None else []:
        out.write(f"{problem.severity.value}: {problem}\n")
        errors += 1
    files = f"{len(items)} file" + ("s" if len(items) != 1 else "")
    verdict = "FAILED" if errors else "OK"
    out.write(f"{verdict}: {files} checked, {errors} error(s), {warnings} warning(s)\n")
    return EX_CONFIG if errors else EX_OK
