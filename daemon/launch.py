"""From parsed command-line arguments to a configured daemon.

Loads and validates every configuration file first (all problems at once, exit 78), checks that
a Java runtime Spark can use is present (exit 69), and only then runs the daemon until it is
told to stop (``daemon.daemon.Daemon.run``).
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass, field
from pathlib import Path

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
from daemon.javacheck import find_java


@dataclass(frozen=True)
class LaunchPlan:
    """What the command line asked for, validated."""

    mode: Mode
    worker: WorkerConfig
    connectors: tuple[ConnectorConfig, ...] = ()
    connector_files: tuple[Path, ...] = ()
    warnings: tuple[Problem, ...] = field(default=())


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
    )


def launch(args: argparse.Namespace) -> int:
    """Validate, then run the daemon in the requested mode until it is told to stop."""
    launch_plan = plan(args)
    for problem in launch_plan.warnings:
        print(f"connectd: warning: {problem}", file=sys.stderr)
    find_java()
    from daemon.daemon import Daemon

    return Daemon(launch_plan).run()
