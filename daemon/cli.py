"""The `connectd` command line: standalone | distributed | run | check-config.

Exit codes follow sysexits and tell systemd what happened: 0 clean, 78 a configuration error
(not worth restarting), 69 a required service unavailable at start (no usable Java; no Kafka
broker answering within ``startup.kafka.timeout.ms``), 1 anything else.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from daemon import __version__
from daemon.errors import ConfigError, ConnectdError, JavaUnavailable, ServiceUnavailable

EX_OK = 0
EX_SOFTWARE = 1
EX_UNAVAILABLE = 69
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

    distributed = sub.add_parser(
        "distributed",
        help="run a worker that shares connectors with the workers of its group.id",
        description="The same argument as Kafka Connect's connect-distributed.sh.",
    )
    distributed.add_argument("worker", metavar="WORKER.properties")

    run = sub.add_parser("run", help="run from a TOML file (see config.example.toml)")
    run.add_argument("--config", required=True, metavar="FILE.toml")

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
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help(sys.stderr)
        return EX_CONFIG
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
        from daemon.launch import launch

        return launch(args)
    except ConfigError as exc:
        print(f"connectd: configuration error: {exc}", file=sys.stderr)
        return EX_CONFIG
    except (JavaUnavailable, ServiceUnavailable) as exc:
        print(f"connectd: {exc}", file=sys.stderr)
        return EX_UNAVAILABLE
    except ConnectdError as exc:
        print(f"connectd: {exc}", file=sys.stderr)
        return EX_SOFTWARE
    except KeyboardInterrupt:
        return EX_OK
