"""What the daemon runs: the validated configuration files, and reading them again on reload.

``load_plan`` loads the files a command names (every problem at once, as ``InvalidConfig``);
``reread`` loads the same files again for a reload (SIGHUP), all or nothing, each connector
checked by its class. The command line (``daemon.cli``) turns arguments into a ``LaunchPlan``;
the daemon (``daemon.daemon.Daemon``) runs one.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from daemon.config import (
    ConnectorConfig,
    Mode,
    Problem,
    WorkerConfig,
    load_connector,
    load_daemon_toml,
    load_worker,
)
from daemon.config.names import duplicate_names
from daemon.errors import ConnectdError, ConnectorNotFound, InvalidConfig


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


class ConnectorValidator(Protocol):
    """What a reload asks of the connector registry
    (``daemon.connectors.registry.ConnectorRegistry`` is one): the config as stored, or
    ``InvalidConfig`` / ``ConnectorNotFound``."""

    def validate(self, name: str, config: Mapping[str, str]) -> dict[str, str]: ...


def load_plan(
    command: str,
    *,
    config: Path | None = None,
    worker: Path | None = None,
    connectors: Sequence[Path] = (),
) -> LaunchPlan:
    """Load the files a command names: ``run`` reads the TOML ``config``; ``standalone`` and
    ``distributed`` the ``worker`` properties and the ``connectors`` files. Raises
    ``InvalidConfig`` with every problem found."""
    warnings: list[Problem] = []
    if command == "run":
        if config is None:
            raise ValueError("the run command needs a TOML file")
        loaded_toml = load_daemon_toml(config)
        daemon = loaded_toml.config
        warnings += loaded_toml.warnings
        return LaunchPlan(
            mode=daemon.mode,
            worker=daemon.worker,
            connectors=daemon.connectors,
            warnings=tuple(warnings),
            config_file=config,
        )
    if worker is None:
        raise ValueError(f"the {command} command needs a worker file")
    mode = Mode(command)
    loaded_worker = load_worker(worker, mode)
    warnings += loaded_worker.warnings
    loaded_connectors: list[ConnectorConfig] = []
    files = tuple(connectors)
    for path in files:
        loaded = load_connector(path)
        warnings += loaded.warnings
        loaded_connectors.append(loaded.config)
    duplicates = duplicate_names(
        [(c.name, p) for c, p in zip(loaded_connectors, files, strict=True)]
    )
    if duplicates:
        raise InvalidConfig(duplicates)
    return LaunchPlan(
        mode=mode,
        worker=loaded_worker.config,
        connectors=tuple(loaded_connectors),
        connector_files=files,
        warnings=tuple(warnings),
        worker_file=worker,
    )


def _located(exc: Exception, file: Path, key: str | None = None) -> list[Problem]:
    if isinstance(exc, InvalidConfig):
        return [p.located(str(file)) for p in exc.problems if p.is_error]
    return [Problem(str(file), key, str(exc))]


def reread(current: LaunchPlan, registry: ConnectorValidator) -> LaunchPlan:
    """``current``'s files read again, each connector validated by its class as the REST API
    would (an unknown class, a missing required key, a bad value); ``InvalidConfig`` carrying
    every error of every file, each naming its file and key. Blocking (file I/O, imports of
    connector classes): run it in a thread."""
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
            registry.validate(config.name, config.properties)
        except ConnectorNotFound as exc:
            problems += _located(exc, path, "connector.class")
        except ConnectdError as exc:
            problems += _located(exc, path)
    if problems:
        raise InvalidConfig(problems)
    return dataclasses.replace(current, worker=worker, connectors=tuple(connectors), warnings=())
