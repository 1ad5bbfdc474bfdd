"""connectd's configuration: models, loaders, config providers and ``check-config``.

Settings are declared once: the framework's as fields of ``WorkerConfig`` and ``ConnectorConfig``
named by their Kafka Connect property, a connector's own in its ``ConfigDef``. The
``.properties``, JSON and TOML loaders, ``config.example.toml`` and ``check-config`` all derive
from those declarations. Every loader returns ``Loaded(config, warnings)`` or raises
``InvalidConfig`` (a ``ConfigError``) carrying every problem found.
"""

from __future__ import annotations

from daemon.config.check import check_main
from daemon.config.connector import ConnectorConfig, ErrorTolerance, effective_converter
from daemon.config.definitions import (
    ConfigDef,
    ConfigKey,
    ConfigType,
    ConnectorConfigDef,
    ConnectorDefResolver,
)
from daemon.config.fields import SettingInfo, settings_of
from daemon.config.jsonfile import connector_map_from_json
from daemon.config.loaders import Kind, connector_values, kind_of, load_connector, load_worker
from daemon.config.modes import Mode, mode_problems
from daemon.config.parse import Loaded, parse_connector, parse_worker
from daemon.config.problems import Problem, Severity
from daemon.config.providers import ConfigProvider, Providers, resolve
from daemon.config.toml import DaemonConfig, dump_daemon_toml, load_daemon_toml, parse_daemon_toml
from daemon.config.values import (
    Converter,
    Listener,
    LogFormat,
    LogLevel,
    SaslMechanism,
    SecurityProtocol,
    parse_converter,
)
from daemon.config.worker import DEFAULT_STATE_DIR, WorkerConfig

__all__ = [
    "DEFAULT_STATE_DIR",
    "ConfigDef",
    "ConfigKey",
    "ConfigProvider",
    "ConfigType",
    "ConnectorConfig",
    "ConnectorConfigDef",
    "ConnectorDefResolver",
    "Converter",
    "DaemonConfig",
    "ErrorTolerance",
    "Kind",
    "Listener",
    "Loaded",
    "LogFormat",
    "LogLevel",
    "Mode",
    "Problem",
    "Providers",
    "SaslMechanism",
    "SecurityProtocol",
    "SettingInfo",
    "Severity",
    "WorkerConfig",
    "check_main",
    "connector_map_from_json",
    "connector_values",
    "dump_daemon_toml",
    "effective_converter",
    "kind_of",
    "load_connector",
    "load_daemon_toml",
    "load_worker",
    "mode_problems",
    "parse_connector",
    "parse_converter",
    "parse_daemon_toml",
    "parse_worker",
    "resolve",
    "settings_of",
]
