"""Finding connector classes: aliases imported lazily, and validating a connector config.

``validate_connector`` sits beside the registry because checking a config means resolving its
class: the framework's keys first (``daemon.config.parse_connector``), then the class's own
(``validate``), then, where asked, the class's check against what exists
(``check_existing``: a table another connector writes …), which may block on I/O and so runs
in a thread under ``EXISTING_CHECK_TIMEOUT`` (``validate_connector_async`` from the event loop).
A registry ``bound`` to a worker also refuses what that worker cannot run
(``daemon.config.worker_checks``: a local table path with a cluster master, more tasks than
``tasks.max.limit``).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import copy
import importlib
import logging
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

from daemon.config import parse_connector
from daemon.config.definitions import ConfigDef
from daemon.config.problems import error, raise_if_errors
from daemon.config.worker_checks import NONE_REFUSED, WorkerChecks
from daemon.connectors.base import SinkConnector
from daemon.connectors.converters.lookup import converter_problems
from daemon.errors import ConfigError, ConnectorNotFound, InvalidConfig
from daemon.structs import Problem

log = logging.getLogger("connectd.connectors")

#: Seconds a connector's ``check_existing`` may take; past them it is skipped with a warning
#: (the check is a courtesy: the sink's own state refuses the same thing at run time).
EXISTING_CHECK_TIMEOUT = 10.0


@dataclass(frozen=True)
class PluginInfo:
    """One installed connector class, as ``GET /connector-plugins`` lists it."""

    class_name: str
    version: str
    aliases: tuple[str, ...] = ()
    type: str = "sink"

    def to_rest(self) -> dict[str, str]:
        return {"class": self.class_name, "type": self.type, "version": self.version}


class ConnectorRegistry:
    """Connector classes by alias, imported lazily (uvicorn-style): an alias may name a module
    that does not exist yet, or fails to import, without hurting any other alias.

    ``checks``: what the worker validating through it refuses (``bound``); the default refuses
    no location and bounds tasks at the default ``tasks.max.limit``."""

    def __init__(self, aliases: Mapping[str, str] | None = None) -> None:
        self._aliases: dict[str, str] = {}
        self.checks = NONE_REFUSED
        for alias, target in (aliases or {}).items():
            self.register_alias(alias, target)

    def bound(self, checks: WorkerChecks) -> ConnectorRegistry:
        """This registry for a worker that refuses what ``checks`` says: the same alias table
        (an alias registered into either is in both), and validation refuses what that worker
        cannot run. A daemon validates through one of these."""
        view = copy.copy(self)  # shallow: shares ``_aliases``
        view.checks = checks
        return view

    def register_alias(self, alias: str, target: str, *, replace: bool = False) -> None:
        """Map ``alias`` (e.g. ``ParquetSink``) to ``"package.module:Class"``."""
        if ":" not in target:
            raise ValueError(f"alias target {target!r} must look like 'package.module:Class'")
        if alias in self._aliases and self._aliases[alias] != target and not replace:
            raise ValueError(f"alias {alias!r} already points to {self._aliases[alias]}")
        self._aliases[alias] = target

    def aliases(self) -> dict[str, str]:
        return dict(self._aliases)

    def resolve(self, name: str) -> type[SinkConnector]:
        """The class for an alias (also ``<alias>Connector``, any case), a
        ``package.module:Class`` or a ``package.module.Class``. ``ConnectorNotFound`` if none."""
        name = name.strip()
        target = self._alias_target(name)
        if target is None:
            if ":" in name:
                target = name
            elif "." in name:
                module, _, cls = name.rpartition(".")
                target = f"{module}:{cls}"
            else:
                raise ConnectorNotFound(f"no connector class or alias {name!r}; {self._known()}")
        return self._load(name, target)

    def config_def(self, name: str) -> ConfigDef | None:
        """The config layer's ``ConnectorDefResolver``: the class's ``ConfigDef``, or ``None``."""
        try:
            return self.resolve(name)().config_def()
        except ConnectorNotFound:
            return None

    def validate(self, name: str, config: Mapping[str, str]) -> dict[str, str]:
        """``validate_connector`` with this registry, ``check_existing`` included (the config
        layer's reload asks for it, in a thread; it may block up to the deadline)."""
        return validate_connector(name, config, self, existing=True)

    def list_plugins(self) -> list[PluginInfo]:
        """Every alias that imports, with its class name and version; broken ones are left out."""
        found: dict[str, PluginInfo] = {}
        for alias, target in sorted(self._aliases.items()):
            try:
                cls = self._load(alias, target)
                version = cls().version()
            except Exception:  # a broken plugin must not hide the others
                continue
            class_name = f"{cls.__module__}.{cls.__qualname__}"
            prior = found.get(class_name)
            aliases = (*prior.aliases, alias) if prior else (alias,)
            found[class_name] = PluginInfo(class_name, version, aliases)
        return sorted(found.values(), key=lambda p: p.class_name)

    def _alias_target(self, name: str) -> str | None:
        for candidate in (name, name.removesuffix("Connector")):
            for alias, target in self._aliases.items():
                if alias.lower() == candidate.lower():
                    return target
        return None

    def _known(self) -> str:
        known = ", ".join(sorted(self._aliases)) or "none registered"
        return f"known aliases: {known}; or give a Python path 'package.module:Class'"

    def _load(self, name: str, target: str) -> type[SinkConnector]:
        module_name, _, attr = target.partition(":")
        try:
            obj: Any = importlib.import_module(module_name)
            for part in attr.split("."):
                obj = getattr(obj, part)
        except Exception as e:  # ImportError, AttributeError, or the module's own error
            raise ConnectorNotFound(
                f"connector {name!r} ({target}) cannot be loaded: {type(e).__name__}: {e}; "
                + self._known()
            ) from e
        if not (isinstance(obj, type) and issubclass(obj, SinkConnector)):
            raise ConnectorNotFound(f"{target} is not a SinkConnector subclass; {self._known()}")
        return obj


#: The process's registry; the runtime registers the built-in aliases into it.
default_registry = ConnectorRegistry()
register_alias = default_registry.register_alias
resolve_connector_class = default_registry.resolve
list_plugins = default_registry.list_plugins


def validate_connector(
    name: str,
    config: Mapping[str, str],
    registry: ConnectorRegistry = default_registry,
    *,
    existing: bool = False,
) -> dict[str, str]:
    """A connector config as stored (``name`` filled in), checked by the framework and by the
    connector class; ``InvalidConfig`` with every problem (REST answers 400). ``existing``:
    also the class's ``check_existing``, waited for here (blocks: not on the event loop; there
    use ``validate_connector_async``)."""
    checked = _validated(name, config, registry)
    if existing:
        future = _check_existing(registry.resolve(checked["connector.class"]), name, checked)
        try:
            problems = future.result(timeout=EXISTING_CHECK_TIMEOUT)
        except concurrent.futures.TimeoutError:
            problems = _timed_out(name)
        raise_if_errors(problems)
    return checked


async def validate_connector_async(
    name: str, config: Mapping[str, str], registry: ConnectorRegistry = default_registry
) -> dict[str, str]:
    """``validate_connector`` with ``check_existing``, for the event loop: both run in a
    thread of their own (a class's ``validate`` may ``stat`` a path on a filesystem that does
    not answer), the loop keeps serving meanwhile."""
    checked = await off_loop(lambda: _validated(name, config, registry), f"connector {name}")
    cls = registry.resolve(checked["connector.class"])
    raise_if_errors(await existing_problems_async(cls, name, checked))
    return checked


async def existing_problems_async(
    cls: type[SinkConnector], name: str, config: Mapping[str, str]
) -> list[Problem]:
    """``cls().check_existing(name, config)`` off the event loop, under
    ``EXISTING_CHECK_TIMEOUT`` (no problems if it passed)."""
    future = _check_existing(cls, name, config)
    try:
        async with asyncio.timeout(EXISTING_CHECK_TIMEOUT):
            return await asyncio.wrap_future(future)
    except TimeoutError:
        return _timed_out(name)


_T = TypeVar("_T")


async def off_loop(fn: Callable[[], _T], what: str) -> _T:
    """``fn()`` (a configuration check) in a daemon thread, awaited under
    ``EXISTING_CHECK_TIMEOUT``: past it, ``ConfigError`` saying so, and the thread is
    abandoned (it holds neither the loop nor a pool)."""
    future = _in_thread(fn)
    try:
        async with asyncio.timeout(EXISTING_CHECK_TIMEOUT):
            return await asyncio.wrap_future(future)
    except TimeoutError:
        raise ConfigError(
            f"{what}: checking the configuration took over {EXISTING_CHECK_TIMEOUT:g} s (a path"
            " on a filesystem that does not answer?); try again once it answers"
        ) from None


def _check_existing(
    cls: type[SinkConnector], name: str, checked: Mapping[str, str]
) -> concurrent.futures.Future[list[Problem]]:
    def check() -> list[Problem]:
        try:
            return list(cls().check_existing(name, dict(checked)))
        except Exception as exc:  # a courtesy check: its own failure must not refuse a config
            log.warning("Connector %s: check_existing() raised %r; not checked", name, exc)
            return []

    return _in_thread(check)


def _in_thread(fn: Callable[[], _T]) -> concurrent.futures.Future[_T]:
    """``fn()`` in a daemon thread of its own: a read hung on a dead filesystem is abandoned
    at the deadline and holds neither the event loop, nor a pool, nor the process's exit."""
    future: concurrent.futures.Future[_T] = concurrent.futures.Future()

    def body() -> None:
        if not future.set_running_or_notify_cancel():
            return
        try:
            future.set_result(fn())
        except BaseException as exc:
            future.set_exception(exc)

    threading.Thread(target=body, name="check-existing", daemon=True).start()
    return future


def _timed_out(name: str) -> list[Problem]:
    log.warning(
        "Connector %s: checking it against existing state took over %g s; not checked",
        name,
        EXISTING_CHECK_TIMEOUT,
    )
    return []


def _validated(name: str, config: Mapping[str, str], registry: ConnectorRegistry) -> dict[str, str]:
    checked = {str(k): str(v) for k, v in config.items()}
    if "name" in checked and checked["name"] != name:
        raise InvalidConfig(
            [error("name", f"{checked['name']!r} differs from the connector's name {name!r}")]
        )
    checked["name"] = name
    parse_connector(checked, resolver=registry.config_def)
    cls = registry.resolve(checked["connector.class"])
    if cls.validate is not SinkConnector.validate:  # the class checks more than its keys
        raise_if_errors(cls().validate(checked))
    raise_if_errors(registry.checks.problems(cls().config_def(), checked))
    converters = converter_problems(checked)
    raise_if_errors(converters)
    for problem in converters:  # a mistyped converter setting: said, not refused
        log.warning("Connector %s: configuration warning: %s", name, problem)
    return checked
