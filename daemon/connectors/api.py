"""The sink connector API: Kafka Connect's sink lifecycle, in Python, on asyncio.

A connector provides a ``SinkConnector`` (describes and validates its settings, splits its
configuration into task configurations) and a ``SinkTask`` (receives batches of records). The
runtime calls them; they call back through the ``SinkTaskContext``.

Guarantees the runtime gives every ``SinkTask`` incarnation (one instance):

- All callbacks run on the event loop, in the task's own coroutine, one at a time, never
  concurrently, in Connect's order: ``start`` → (``open`` → (``put`` | ``pre_commit``)* →
  ``close``)* → ``stop``. ``pre_commit`` also runs right before each ``close`` caused by a
  rebalance and before ``stop``, with ``context.is_closing`` true (KIP-275).
- Each call runs under a deadline; past it, or when the task is being stopped, the call is
  cancelled at its current await (``asyncio.CancelledError``: let it propagate) and an executor
  it was using is killed with its whole process tree. Nothing blocking may run in a callback:
  Spark work and file I/O go to ``context.run_in_executor`` (or a thread under a deadline).
- At most one incarnation of a task id is alive at any instant, and each has a larger
  ``context.epoch`` than every earlier incarnation of every task of the connector. A sink that
  records the epoch with its commits (``daemon.storage.CommitLog``) refuses a zombie's commits.
- An exception from a callback fails the task (recorded in its status, restart policy applies);
  it never takes the worker down. Raise ``ConnectdError`` subclasses with ``retriable`` set.

Exactly-once sinks keep their progress in the sink: ``open`` reads the offsets committed with
the data and seeks there with ``context.offset(...)``; ``put`` writes and commits (rows + offset
ranges + epoch, atomically); ``pre_commit`` returns the offsets durable in the sink, which the
runtime commits to the consumer group for lag tools only.
"""

from __future__ import annotations

import enum
import importlib
import sys
from abc import ABC, abstractmethod
from collections.abc import Callable, Collection, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, Protocol, overload

import pyarrow as pa

from daemon.connectors.records import RecordBatch, TopicPartition
from daemon.errors import ConnectorNotFound, InvalidConfig

if TYPE_CHECKING:
    from daemon.config.definitions import ConnectorSetting
    from daemon.config.problems import Problem


# --- connector settings ----------------------------------------------------------------------


class ConfigType(enum.StrEnum):
    """Types of connector settings (Connect's ``ConfigDef.Type``, plus ``ms`` durations)."""

    STRING = "string"
    INT = "int"
    LONG = "long"
    DOUBLE = "double"
    BOOLEAN = "boolean"
    LIST = "list"
    PASSWORD = "password"
    MS = "ms"


class Importance(enum.StrEnum):
    HIGH = "high"
    MEDIUM = "medium"
    LOW = "low"


#: ``ConfigKey.default`` for a required setting.
REQUIRED: Any = object()

Validator = Callable[[Any], None]
"""Checks a parsed value; raises ``ValueError`` with a message saying what is wrong."""


def _parse(kind: ConfigType, text: str) -> Any:
    text = text.strip()
    if kind in (ConfigType.INT, ConfigType.LONG, ConfigType.MS):
        try:
            number = int(text, 10)
        except ValueError:
            raise ValueError(f"{text!r} is not an integer") from None
        if kind is ConfigType.INT and not -(2**31) <= number < 2**31:
            raise ValueError(f"{number} does not fit in a 32-bit int")
        if kind is ConfigType.MS and number < 0:
            raise ValueError(f"{number} is negative")
        return number
    if kind is ConfigType.DOUBLE:
        return float(text)
    if kind is ConfigType.BOOLEAN:
        if text.lower() not in ("true", "false"):
            raise ValueError(f"{text!r} is not true or false")
        return text.lower() == "true"
    if kind is ConfigType.LIST:
        return [item.strip() for item in text.split(",") if item.strip()]
    return text


_EXPECTED = {
    ConfigType.INT: "a 32-bit integer",
    ConfigType.LONG: "an integer",
    ConfigType.DOUBLE: "a number",
    ConfigType.BOOLEAN: "true or false",
    ConfigType.LIST: "a comma-separated list",
    ConfigType.MS: "milliseconds as an integer ≥ 0",
}
_SETTING_TYPE: dict[ConfigType, Literal["int", "bool", "list", "ms", "password"]] = {
    ConfigType.INT: "int",
    ConfigType.LONG: "int",
    ConfigType.BOOLEAN: "bool",
    ConfigType.LIST: "list",
    ConfigType.MS: "ms",
    ConfigType.PASSWORD: "password",
}


@dataclass(frozen=True)
class ConfigKey:
    """One connector-specific setting (Connect's ``ConfigDef.ConfigKey``)."""

    name: str
    type: ConfigType
    default: Any = REQUIRED
    importance: Importance = Importance.MEDIUM
    documentation: str = ""
    validator: Validator | None = None
    group: str | None = None
    display_name: str | None = None

    @property
    def required(self) -> bool:
        return self.default is REQUIRED


@dataclass
class ConfigDef:
    """A connector's settings: what ``SinkConnector.config_def()`` returns.

    Implements ``daemon.config.connector.ConnectorConfigDef`` (``settings`` and ``validate``),
    so the config layer checks connector keys with it. ``parse`` gives typed values.
    """

    keys: dict[str, ConfigKey] = field(default_factory=dict)

    def define(
        self,
        name: str,
        type: ConfigType,
        default: Any = REQUIRED,
        importance: Importance = Importance.MEDIUM,
        documentation: str = "",
        *,
        validator: Validator | None = None,
        group: str | None = None,
        display_name: str | None = None,
    ) -> ConfigDef:
        """Add a setting; returns ``self`` so definitions chain, as in Connect."""
        if name in self.keys:
            raise ValueError(f"setting {name!r} is defined twice")
        key = ConfigKey(
            name, type, default, importance, documentation, validator, group, display_name
        )
        self.keys[name] = key
        return self

    @property
    def settings(self) -> Mapping[str, ConnectorSetting]:
        """The settings in the config layer's shape (``ConnectorConfigDef`` protocol)."""
        from daemon.config.definitions import ConnectorSetting

        return {
            k.name: ConnectorSetting(
                description=k.documentation,
                type=_SETTING_TYPE.get(k.type, "string"),
                default=None if k.required or k.default is None else str(k.default),
                required=k.required,
            )
            for k in self.keys.values()
        }

    def validate(self, config: Mapping[str, str]) -> list[Problem]:
        """Every problem with the keys this definition knows; other keys are not looked at.
        Never raises for a bad value."""
        from daemon.config.problems import error

        problems = []
        for key in self.keys.values():
            try:
                self._value(key, config)
            except ValueError as e:
                problems.append(error(key.name, str(e), _EXPECTED.get(key.type)))
        return problems

    def parse(self, config: Mapping[str, str]) -> dict[str, Any]:
        """Typed values of every defined key (defaults filled in); ``InvalidConfig`` if any is
        wrong, listing every problem."""
        problems = self.validate(config)
        if problems:
            raise InvalidConfig(problems)
        return {key.name: self._value(key, config) for key in self.keys.values()}

    @staticmethod
    def _value(key: ConfigKey, config: Mapping[str, str]) -> Any:
        if key.name not in config:
            if key.required:
                raise ValueError(
                    "required setting is missing"
                    + (f": {key.documentation}" if key.documentation else "")
                )
            return key.default
        value = _parse(key.type, config[key.name])
        if key.validator is not None:
            key.validator(value)
        return value


def in_range(low: float | None = None, high: float | None = None) -> Validator:
    """A validator: the number is within ``[low, high]``."""

    def check(value: Any) -> None:
        if (low is not None and value < low) or (high is not None and value > high):
            raise ValueError(f"{value} is not within [{low}, {high}]")

    return check


def one_of(*choices: str) -> Validator:
    """A validator: the string is one of ``choices`` (case-insensitive)."""

    def check(value: Any) -> None:
        if str(value).lower() not in {c.lower() for c in choices}:
            raise ValueError(f"{value!r} is not one of {', '.join(choices)}")

    return check


# --- the task's context ----------------------------------------------------------------------


@dataclass(frozen=True, order=True, slots=True)
class TaskId:
    """A task's id: its connector's name and its number. ``str()`` is Connect's ``name-0``."""

    connector: str
    task: int

    def __str__(self) -> str:
        return f"{self.connector}-{self.task}"


class ExecutorRunner(Protocol):
    """The runtime's hook to the executor pool (a Spark process that can be killed any time).

    ``fn`` is an importable ``"package.module:function"`` called in the executor as
    ``fn(spark, batch, **kwargs)`` (``batch`` handed over as Arrow, not pickled rows); its
    return value must be picklable. Past ``timeout`` seconds (counted from the call, including
    waiting for a free executor) the executor's process tree is killed and reaped and the call
    raises ``WriteTimeout``; ``ExecutorDied`` / ``WriteFailed`` report other failures. When the
    awaiting coroutine is cancelled the executor is killed too: no write outlives its caller.
    """

    async def run_in_executor(
        self, fn: str, batch: pa.Table | None, *, timeout: float, **kwargs: Any
    ) -> Any: ...


class SinkTaskContext(Protocol):
    """What a ``SinkTask`` can ask of the runtime (Connect's ``SinkTaskContext``, plus
    ``is_closing`` from KIP-275, the incarnation's ``epoch`` and the executor).

    Every method is non-blocking and only records a request; the runtime acts on it after the
    current callback returns (seeks before the next fetch, commits at the next opportunity).
    """

    @property
    def task_id(self) -> TaskId: ...

    @property
    def epoch(self) -> int:
        """This incarnation's epoch: larger than every earlier incarnation's of the connector."""
        ...

    @property
    def config(self) -> Mapping[str, str]:
        """The task configuration ``start`` received."""
        ...

    @property
    def is_closing(self) -> bool:
        """True only while ``pre_commit`` runs just before the task's partitions are closed
        (rebalance, stop, restart, shutdown): the last chance to make progress durable."""
        ...

    @overload
    def offset(self, tp: TopicPartition, offset: int, /) -> None: ...
    @overload
    def offset(self, offsets: Mapping[TopicPartition, int], /) -> None: ...
    def offset(self, *args: Any) -> None:
        """Seek: the next record fetched for each partition has this offset."""
        ...

    def pause(self, *partitions: TopicPartition) -> None:
        """Stop fetching from these assigned partitions until ``resume``."""
        ...

    def resume(self, *partitions: TopicPartition) -> None: ...

    def paused(self) -> frozenset[TopicPartition]: ...

    def assignment(self) -> frozenset[TopicPartition]:
        """The partitions currently assigned to this task."""
        ...

    def request_commit(self) -> None:
        """Ask for ``pre_commit`` (and the consumer-group commit) as soon as possible."""
        ...

    async def run_in_executor(
        self, fn: str, batch: pa.Table | None, *, timeout: float, **kwargs: Any
    ) -> Any:
        """Run ``fn`` in an executor process; see ``ExecutorRunner``."""
        ...


class TaskContext:
    """The runtime's ``SinkTaskContext``. Methods below the line are for the runtime only."""

    def __init__(
        self, task_id: TaskId, epoch: int, config: Mapping[str, str], runner: ExecutorRunner
    ) -> None:
        self._task_id = task_id
        self._epoch = epoch
        self._config = dict(config)
        self._runner = runner
        self._assignment: frozenset[TopicPartition] = frozenset()
        self._paused: set[TopicPartition] = set()
        self._seeks: dict[TopicPartition, int] = {}
        self._commit_requested = False
        self._closing = False

    @property
    def task_id(self) -> TaskId:
        return self._task_id

    @property
    def epoch(self) -> int:
        return self._epoch

    @property
    def config(self) -> Mapping[str, str]:
        return self._config

    @property
    def is_closing(self) -> bool:
        return self._closing

    @overload
    def offset(self, tp: TopicPartition, offset: int, /) -> None: ...
    @overload
    def offset(self, offsets: Mapping[TopicPartition, int], /) -> None: ...
    def offset(self, *args: Any) -> None:
        if len(args) == 2:
            requests = {args[0]: args[1]}
        elif len(args) == 1 and isinstance(args[0], Mapping):
            requests = dict(args[0])
        else:
            raise TypeError("offset() takes (tp, offset) or ({tp: offset, ...})")
        for tp, off in requests.items():
            if not isinstance(tp, TopicPartition) or not isinstance(off, int) or off < 0:
                raise ValueError(
                    f"cannot seek {tp!r} to {off!r}: need a TopicPartition and an offset ≥ 0"
                )
        self._seeks.update(requests)

    def pause(self, *partitions: TopicPartition) -> None:
        self._paused.update(self._assigned(partitions))

    def resume(self, *partitions: TopicPartition) -> None:
        self._paused.difference_update(self._assigned(partitions))

    def paused(self) -> frozenset[TopicPartition]:
        return frozenset(self._paused)

    def assignment(self) -> frozenset[TopicPartition]:
        return self._assignment

    def request_commit(self) -> None:
        self._commit_requested = True

    async def run_in_executor(
        self, fn: str, batch: pa.Table | None, *, timeout: float, **kwargs: Any
    ) -> Any:
        return await self._runner.run_in_executor(fn, batch, timeout=timeout, **kwargs)

    def _assigned(self, partitions: Collection[TopicPartition]) -> Collection[TopicPartition]:
        stray = set(partitions) - self._assignment
        if stray:
            names = ", ".join(sorted(map(str, stray)))
            raise ValueError(f"{names} not assigned to task {self._task_id}")
        return partitions

    # ---- runtime side ----

    def set_epoch(self, epoch: int) -> None:
        """A newer epoch for this incarnation, drawn when it takes over partitions: whoever owns
        a partition now holds a higher epoch than every earlier owner (the commit log fences on
        it), also when a rebalance moves a partition to a task that started earlier."""
        if epoch < self._epoch:
            raise ValueError(f"task {self._task_id}: epoch {epoch} is older than {self._epoch}")
        self._epoch = epoch

    def set_assignment(self, partitions: Collection[TopicPartition]) -> None:
        """The runtime's new assignment; pauses and pending seeks of lost partitions are dropped."""
        self._assignment = frozenset(partitions)
        self._paused &= self._assignment
        self._seeks = {tp: o for tp, o in self._seeks.items() if tp in self._assignment}

    @contextmanager
    def closing(self) -> Iterator[None]:
        """Wrap the ``pre_commit`` call that precedes a close: ``is_closing`` is true inside."""
        self._closing = True
        try:
            yield
        finally:
            self._closing = False

    def take_seeks(self) -> dict[TopicPartition, int]:
        """The seeks requested since the last call (assigned partitions only), cleared."""
        seeks = {tp: o for tp, o in self._seeks.items() if tp in self._assignment}
        self._seeks.clear()
        return seeks

    def take_commit_request(self) -> bool:
        requested, self._commit_requested = self._commit_requested, False
        return requested


# --- connectors and tasks --------------------------------------------------------------------


def _module_version(obj: object) -> str:
    module = sys.modules.get(type(obj).__module__)
    return str(getattr(module, "__version__", "unknown"))


class SinkTask(ABC):
    """A sink task (Connect's ``SinkTask``). See the module docstring for the guarantees."""

    def version(self) -> str:
        """The task's version; by default its module's ``__version__``."""
        return _module_version(self)

    @abstractmethod
    async def start(self, config: Mapping[str, str], context: SinkTaskContext) -> None:
        """Called once, first. Keep ``context``; read the task configuration."""

    async def open(self, partitions: Collection[TopicPartition]) -> None:  # noqa: B027 (optional hook)
        """Partitions were assigned; no ``put`` has delivered their records yet. Exactly-once
        sinks read their committed offsets here and seek with ``context.offset``."""

    @abstractmethod
    async def put(self, batch: RecordBatch) -> None:
        """Write a batch (may be empty). Records of one partition arrive in offset order; a
        batch never repeats records already given unless a seek asked for them."""

    async def reject(self, batch: RecordBatch) -> Mapping[int, BaseException]:
        """Rows of ``batch.table`` this sink will not write, by row index, each with the
        exception that says why (its class and message go to the log and the dead-letter
        headers). Called before each ``put`` of a non-empty batch, under the callback deadline.
        The runtime takes those rows out of the batch ``put`` receives (``ranges`` still cover
        them) and applies ``errors.tolerance`` as to records a converter rejected: ``none``
        fails the task naming the first one's topic, partition and offset; ``all`` skips them
        (to the dead-letter topic, stage ``TASK_PUT``). Must not change the sink's state (a
        retry may call it again with the same rows). Check with vectorised ``pyarrow.compute``,
        not a Python loop over rows. Default: nothing rejected."""
        return {}

    async def flush(self, offsets: Mapping[TopicPartition, int]) -> None:  # noqa: B027 (optional hook)
        """Make everything given to ``put`` durable (Connect's ``flush``)."""

    async def pre_commit(
        self, offsets: Mapping[TopicPartition, int]
    ) -> Mapping[TopicPartition, int]:
        """``offsets``: per partition, the offset after the last record given to ``put``.
        Return the offsets that are durable in the sink (those get committed to the consumer
        group); return fewer or smaller ones for data not yet durable. ``context.is_closing``
        tells whether the partitions are about to be closed. Default: ``flush``, then all."""
        await self.flush(offsets)
        return offsets

    async def close(self, partitions: Collection[TopicPartition]) -> None:  # noqa: B027 (optional hook)
        """The partitions were revoked (after the closing ``pre_commit``): drop their state."""

    @abstractmethod
    async def stop(self) -> None:
        """Called last, once, after ``close`` of every open partition (unless killed)."""


class SinkConnector(ABC):
    """A sink connector (Connect's ``SinkConnector``). Instantiated with no arguments.

    ``config_def``, ``validate``, ``task_class``, ``task_configs`` and ``version`` are cheap and
    synchronous (called from the event loop, also by the REST API on throw-away instances);
    ``start`` and ``stop`` are coroutines with a deadline.
    """

    def __init__(self) -> None:
        self.config: dict[str, str] = {}

    def version(self) -> str:
        """The connector's version; by default its module's ``__version__``."""
        return _module_version(self)

    def config_def(self) -> ConfigDef:
        """The connector's own settings. Default: none."""
        return ConfigDef()

    def validate(self, config: Mapping[str, str]) -> list[Problem]:
        """Problems with ``config`` (the whole connector configuration). Never raises for bad
        values. Default: ``config_def().validate(config)``."""
        return self.config_def().validate(config)

    async def start(self, config: Mapping[str, str]) -> None:
        """Called with the validated configuration before ``task_configs``. Default: keep it."""
        self.config = dict(config)

    @abstractmethod
    def task_class(self) -> type[SinkTask]: ...

    def task_configs(self, max_tasks: int) -> list[dict[str, str]]:
        """At most ``max_tasks`` task configurations. Default: ``max_tasks`` copies of the
        connector's configuration (partitions are spread by the consumer group)."""
        return [dict(self.config) for _ in range(max_tasks)]

    async def stop(self) -> None:  # noqa: B027 (optional hook)
        """Called once when the connector is stopped or deleted, after its tasks stopped."""


# --- finding connector classes ---------------------------------------------------------------


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
    that does not exist yet, or fails to import, without hurting any other alias."""

    def __init__(self, aliases: Mapping[str, str] | None = None) -> None:
        self._aliases: dict[str, str] = {}
        for alias, target in (aliases or {}).items():
            self.register_alias(alias, target)

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
