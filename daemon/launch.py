"""From parsed command-line arguments to a configured daemon.

Loads and validates every configuration file first (all problems at once, exit 78), checks that
a Java runtime Spark can use is present (exit 69), and only then runs the daemon until it is
told to stop (``daemon.daemon.Daemon.run``). ``reread`` loads the same files again for a reload
(SIGHUP), all or nothing.
"""

from __future__ import annotations

import argparse
import dataclasses
import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from daemon.config import (
    ConnectorConfig,
    DaemonConfig,
    Mode,
    Problem,
    WorkerConfig,
    load_connector,
    load_daemon_toml,
    load_worker,
)
from daemon.errors import ConnectdError, ConnectorNotFound, InvalidConfig
from daemon.javacheck import find_java

if TYPE_CHECKING:
    from daemon.connectors.api import ConnectorRegistry

log = logging.getLogger("connectd.launch")


@dataclass(frozen=True)
class LaunchPlan:
    """What the command line asked for, validated. The files it came from (if any) are kept
    so that a reload reads them again: ``worker_file`` and ``connector_files`` (standalone and
    distributed), or ``config_file`` (``connectd run --config``)."""

    mode: Mode
    worker: WorkerConfig
    connectors: tuple[ConnectorConfig, ...] = ()
    connector_files: tuple[Path, ...] = ()
    warnings: tuple[Problem, ...] = field(default=())
    worker_file: Path | None = None
    config_file: Path | None = None


def plan(args: argparse.Namespace) -> LaunchPlan:
    """Load the files the command names; raises InvalidConfig with every problem found."""
    warnings: list[Problem] = []
    if args.command == "run":
        loaded_toml = load_daemon_toml(Path(args.config))
        daemon: DaemonConfig = loaded_toml.config
        warnings += loaded_toml.warnings
        return LaunchPlan(
            mode=daemon.mode,
            worker=daemon.worker,
            connectors=daemon.connectors,
            warnings=tuple(warnings),
            config_file=Path(args.config),
        )
    mode = Mode(args.command)
    loaded_worker = load_worker(Path(args.worker), mode)
    warnings += loaded_worker.warnings
    connectors: list[ConnectorConfig] = []
    files = tuple(Path(p) for p in getattr(args, "connectors", []))
    for path in files:
        loaded = load_connector(path)
        warnings += loaded.warnings
        connectors.append(loaded.config)
    return LaunchPlan(
        mode=mode,
        worker=loaded_worker.config,
        connectors=tuple(connectors),
        connector_files=files,
        warnings=tuple(warnings),
        worker_file=Path(args.worker),
    )


def _located(exc: Exception, file: Path, key: str | None = None) -> list[Problem]:
    if isinstance(exc, InvalidConfig):
        return [p.located(str(file)) for p in exc.problems if p.is_error]
    return [Problem(str(file), key, str(exc))]


def reread(current: LaunchPlan, registry: ConnectorRegistry) -> LaunchPlan:
    """``current``'s files read again, each connector validated by its class as the REST API
    would (an unknown class, a missing required key, a bad value); ``InvalidConfig`` carrying
    every error of every file, each naming its file and key. Blocking (file I/O, imports of
    connector classes): run it in a thread."""
    from daemon.runtime.worker import validate_connector

    problems: list[Problem] = []
    worker, connectors = current.worker, list(current.connectors)
    if current.config_file is not None:
        try:
            loaded_toml = load_daemon_toml(current.config_file).config
            worker, connectors = loaded_toml.worker, list(loaded_toml.connectors)
        except ConnectdError as exc:
            problems += _located(exc, current.config_file)
        sources = [current.config_file] * len(connectors)
    else:
        if current.worker_file is not None:
            try:
                worker = load_worker(current.worker_file, current.mode).config
            except ConnectdError as exc:
                problems += _located(exc, current.worker_file)
        connectors, sources = [], []
        for path in current.connector_files:
            try:
                connectors.append(load_connector(path).config)
                sources.append(path)
            except ConnectdError as exc:
                problems += _located(exc, path)
    seen: dict[str, Path] = {}
    for config, path in zip(connectors, sources, strict=True):
        if config.name in seen and seen[config.name] != path:
            problems.append(
                Problem(
                    str(path), "name", f"{config.name!r} is also the name in {seen[config.name]}"
                )
            )
        seen[config.name] = path
        try:
            validate_connector(config.name, config.properties, registry)
        except ConnectorNotFound as exc:
            problems += _located(exc, path, "connector.class")
        except ConnectdError as exc:
            problems += _located(exc, path)
    if problems:
        raise InvalidConfig(problems)
    return dataclasses.replace(current, worker=worker, connectors=tuple(connectors), warnings=())


def launch(args: argparse.Namespace) -> int:
    """Validate, then run the daemon in the requested mode until it is told to stop."""
    launch_plan = plan(args)
    from daemon.logs import setup_logging

    # Logging first, so that the warnings below come out in log.format (one JSON object each).
    setup_logging(launch_plan.worker.log_level.value, launch_plan.worker.log_format.value)
    for problem in launch_plan.warnings:
        log.warning("configuration warning: %s", problem)
    find_java()
    from daemon.daemon import Daemon

    return Daemon(launch_plan).run()
