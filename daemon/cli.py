"""The `connectd` command line: standalone | distributed | run | check-config | passwd |
fetch-jars.

Exit codes follow sysexits and tell systemd what happened: 0 clean, 2 a usage error (no
command), 78 a configuration error (not worth restarting; two connector files naming the same
connector is one, a pyspark of no supported Spark line another), 69 a required service
unavailable at start (no usable Java; no Kafka broker answering within
``startup.kafka.timeout.ms``; a ``spark://`` master not accepting connections within
``executor.start.timeout.ms``, or running another Spark line than the installed pyspark; a REST
listener's port in use; no ``mvn`` for ``fetch-jars``), 75 the ``state.dir`` held by another
running daemon (temporary: it is free once that one stops), 1 anything else.

A run goes from parsed arguments to a configured daemon: every configuration file is loaded and
validated first (all problems at once, exit 78, ``daemon.config.plan``), then a Java runtime
Spark can use must be present (exit 69), and only then the daemon runs until it is told to stop
(``daemon.daemon.Daemon.run``).
"""

from __future__ import annotations

import argparse
import logging
import signal
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING

from daemon import __version__
from daemon.errors import ConfigError, ConnectdError, JavaUnavailable, ServiceUnavailable
from daemon.storage.statelock import StateDirLocked

if TYPE_CHECKING:
    from daemon.config import WorkerConfig
    from daemon.config.plan import LaunchPlan
    from daemon.structs import Problem

log = logging.getLogger("connectd.launch")

EX_OK = 0
EX_SOFTWARE = 1
EX_USAGE = 2  # argparse's own code for a usage error
EX_UNAVAILABLE = 69
EX_TEMPFAIL = 75
EX_CONFIG = 78


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="connectd",
        description=(
            "A Kafka Connect worker for sink connectors: moves Kafka records into Spark tables. "
            "A hung task is killed outright and reaped before its replacement starts."
        ),
    )
    parser.add_argument("--version", action="version", version=f"connectd {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    standalone = sub.add_parser(
        "standalone",
        help="run one worker from a worker .properties file and connector files",
        description="The same arguments as Kafka Connect's connect-standalone.sh.",
    )
    standalone.add_argument("worker", metavar="WORKER.properties")
    standalone.add_argument("connectors", nargs="*", metavar="CONNECTOR.properties|CONNECTOR.json")
    standalone.add_argument("--until-caught-up", action="store_true", help=_UNTIL)

    distributed = sub.add_parser(
        "distributed",
        help="run a worker that shares connectors with the workers of its group.id",
        description="The same argument as Kafka Connect's connect-distributed.sh.",
    )
    distributed.add_argument("worker", metavar="WORKER.properties")

    run = sub.add_parser("run", help="run from a TOML file (see config.example.toml)")
    run.add_argument("--config", required=True, metavar="FILE.toml")
    run.add_argument("--until-caught-up", action="store_true", help=_UNTIL)

    check = sub.add_parser(
        "check-config",
        help="report every problem in worker, connector or TOML files; exit 78 on errors",
    )
    check.add_argument(
        "files",
        nargs=argparse.REMAINDER,
        metavar="FILE",
        help="files to check; --worker F / --connector F / --mode M force how a file is read",
    )
    passwd = sub.add_parser(
        "passwd",
        help="add or change a user in a REST basic-auth credentials file",
        description="connectd passwd FILE USER: the password is read from the terminal or stdin.",
    )
    passwd.add_argument("args", nargs=argparse.REMAINDER, metavar="FILE USER")
    jars = sub.add_parser(
        "fetch-jars",
        help="fetch the jars of table formats (delta, iceberg) from Maven Central",
        description=(
            "Copy the jars a table format's executors need from Maven Central (with mvn; jars"
            " already there are skipped). Executors find them in executor.jars.dir."
        ),
    )
    jars.add_argument("formats", nargs="*", metavar="FORMAT", help="default: every format")
    jars.add_argument(
        "--dir",
        type=Path,
        metavar="DIR",
        help="where to put them (default: $XDG_CACHE_HOME/connectd/jars or ~/.cache/connectd/jars)",
    )
    jars.add_argument(
        "--timeout", type=float, default=300.0, metavar="SECONDS", help="per jar (default 300)"
    )
    jars.add_argument(
        "--spark-line",
        metavar="LINE",
        help="the Spark line whose builds to fetch: 3.5, 4.0 or 4.1 (default: the installed"
        " pyspark's)",
    )
    return parser


_UNTIL = (
    "stop once every connector's sink has committed what its topics held at start: exit 0,"
    " or 1 naming a connector that failed (standalone mode)"
)


def _say(message: str) -> None:
    """The last word on stderr, after every log line logged so far and in one write, so a line
    from the log writer thread never lands inside it."""
    from daemon.logs import flush_logging

    flush_logging()
    sys.stderr.write(message + "\n")
    sys.stderr.flush()


def main(argv: Sequence[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    if args.command is None:  # a usage error, as argparse reports a bad one
        parser.print_help(sys.stderr)
        return EX_USAGE
    try:
        if args.command == "check-config":
            from daemon.config.check import check_main
            from daemon.connectors.api import default_registry

            return check_main(
                args.files, sys.stdout, sys.stderr, resolver=default_registry.config_def
            )
        if args.command == "passwd":
            from daemon.rest import passwd_main

            return passwd_main(args.args)
        if args.command == "fetch-jars":
            return fetch_jars(args)
        return launch(args)
    except ConfigError as exc:
        _say(f"connectd: configuration error: {exc}")
        return EX_CONFIG
    except (JavaUnavailable, ServiceUnavailable) as exc:
        _say(f"connectd: {exc}")
        return EX_UNAVAILABLE
    except StateDirLocked as exc:
        _say(f"connectd: {exc}")
        return EX_TEMPFAIL
    except ConnectdError as exc:
        _say(f"connectd: {exc}")
        return EX_SOFTWARE
    except KeyboardInterrupt:
        return EX_OK


def fetch_jars(args: argparse.Namespace) -> int:
    """``connectd fetch-jars [FORMAT ...] [--dir DIR]``: 0 once every jar is there; 78 for an
    unknown format (raised as ``ConfigError``); 69 without ``mvn``; 1 when Maven fails."""
    from daemon import sparklines as lines
    from daemon.executor import formats

    names = formats.check_names(args.formats) if args.formats else formats.NAMES
    if args.spark_line is None:
        line = lines.current()
    elif args.spark_line in lines.LINES:
        line = lines.LINES[args.spark_line]
    else:
        raise ConfigError(
            f"--spark-line {args.spark_line}: expected one of {', '.join(lines.LINES)}"
        )
    try:
        formats.fetch(names, args.dir, timeout=args.timeout, report=print, line=line)
    except formats.MavenUnavailable as exc:
        _say(f"connectd: {exc}")
        return EX_UNAVAILABLE
    return EX_OK


def plan(args: argparse.Namespace) -> LaunchPlan:
    """Load the files the command names; raises InvalidConfig with every problem found."""
    from daemon.config.plan import load_plan

    if args.command == "run":
        return load_plan("run", config=Path(args.config))
    return load_plan(
        args.command,
        worker=Path(args.worker),
        connectors=[Path(p) for p in getattr(args, "connectors", [])],
    )


def _check_worker_converters(worker: WorkerConfig) -> list[Problem]:
    """The worker's own key and value converters, configured as a task would configure them
    (a ``package.module:Class`` that does not load, an Avro converter without
    ``schema.registry.url``): ``InvalidConfig`` (exit 78) at start, not a failed task later.
    Returns the warnings (a key none of the converter's settings names)."""
    from daemon.connectors.converters import converter_problems
    from daemon.errors import InvalidConfig

    config: dict[str, str] = {}
    for side in ("key", "value"):
        name = worker.key_converter if side == "key" else worker.value_converter
        config[f"{side}.converter"] = str(name)
        config.update(
            {f"{side}.converter.{k}": v for k, v in worker.converter_config(side).items()}
        )
    if worker.header_converter is not None or worker.header_converter_config:
        config["header.converter"] = str(worker.header_converter or "")
        config.update(
            {f"header.converter.{k}": v for k, v in worker.header_converter_config.items()}
        )
    problems = converter_problems(config)
    if any(p.is_error for p in problems):
        raise InvalidConfig([p for p in problems if p.is_error])
    return problems  # warnings: a key none of the converter's settings names


class EarlyReload:
    """A SIGHUP that comes before the daemon's loop handles signals (while it loads its files
    and imports, a second or two) is recorded and becomes one reload once the daemon runs,
    instead of ending the process (the default action of SIGHUP). systemd sends reloads only
    after READY=1; a shell's ``kill -HUP`` can come at any moment. From ``forward_to`` on, each
    SIGHUP is a reload request at once, until the loop installs its own handler."""

    def __init__(self) -> None:
        self.pending = False
        self._target: Callable[[], None] | None = None
        signal.signal(signal.SIGHUP, self._on_hup)

    def _on_hup(self, signum: int, frame: FrameType | None) -> None:
        if self._target is None:
            self.pending = True
        else:
            self._target()

    def forward_to(self, target: Callable[[], None]) -> None:
        self._target = target
        if self.pending:
            self.pending = False
            target()


def launch(args: argparse.Namespace) -> int:
    """Validate, then run the daemon in the requested mode until it is told to stop."""
    early = EarlyReload()
    launch_plan = plan(args)
    converter_warnings = _check_worker_converters(launch_plan.worker)
    from daemon.logs import setup_logging

    # Logging first, so that the warnings below come out in log.format (one JSON object each).
    setup_logging(launch_plan.worker.log_level.value, launch_plan.worker.log_format.value)
    for problem in [*launch_plan.warnings, *converter_warnings]:
        log.warning("configuration warning: %s", problem)
    from daemon.javacheck import find_java
    from daemon.sparklines import current

    spark = current()  # exit 78 for a pyspark of no supported line, before anything starts
    java = find_java()
    if java.major not in spark.java and java.major > max(spark.java):
        log.warning(
            "Java %s is newer than Spark %s supports (Java %s); its executors may fail to start:"
            " point JAVA_HOME at a Java %d runtime",
            java.version,
            spark.name,
            ", ".join(map(str, spark.java)),
            max(spark.java),
        )
    from daemon.config.modes import Mode
    from daemon.daemon import Daemon

    until = bool(getattr(args, "until_caught_up", False))
    if until and launch_plan.mode is not Mode.STANDALONE:
        raise ConfigError(
            "--until-caught-up: the run's configuration is distributed mode; a run until caught"
            " up is a standalone worker's (mode = standalone)"
        )
    daemon = Daemon(launch_plan, until_caught_up=until)
    early.forward_to(daemon.request_reload)
    return daemon.run()
