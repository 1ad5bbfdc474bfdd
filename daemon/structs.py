"""Plain value types every layer may import: the bottom of the layer graph.

Like aiokafka's ``structs.py``: frozen records and enums with no behaviour beyond formatting,
and no imports from the rest of connectd, so storage, the executor and config can name a
topic-partition, a task or a configuration problem without reaching up into connectors or the
runtime. The higher layers re-export them where connector authors and callers expect them
(``daemon.connectors.records``, ``daemon.connectors.api``, ``daemon.runtime.model``,
``daemon.config.problems``).
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Mapping
from dataclasses import dataclass

# --- Kafka coordinates ---------------------------------------------------------------------


@dataclass(frozen=True, order=True, slots=True)
class TopicPartition:
    """A Kafka topic-partition. Hashable and ordered (by topic, then partition)."""

    topic: str
    partition: int

    def __str__(self) -> str:
        return f"{self.topic}-{self.partition}"


@dataclass(frozen=True, order=True, slots=True)
class OffsetRange:
    """The offsets ``[start, end)`` of one topic-partition that a batch or a commit covers.

    ``end`` is exclusive: it is the next offset to consume after this range. Ranges of
    consecutive batches of one partition chain: each ``start`` is the previous ``end``, even when
    offsets are missing in between (compacted topics, transaction markers, records dropped as
    bad), so ranges come from consumer positions, not only from the records' own offsets.
    """

    topic: str
    partition: int
    start: int
    end: int

    def __post_init__(self) -> None:
        if self.start < 0 or self.end < self.start:
            raise ValueError(f"invalid offset range {self.start}..{self.end} for {self.tp}")

    @property
    def tp(self) -> TopicPartition:
        return TopicPartition(self.topic, self.partition)

    def __len__(self) -> int:
        return self.end - self.start


# --- connectors and tasks ------------------------------------------------------------------


@dataclass(frozen=True, order=True, slots=True)
class TaskId:
    """A task's id: its connector's name and its number. ``str()`` is Connect's ``name-0``."""

    connector: str
    task: int

    def __str__(self) -> str:
        return f"{self.connector}-{self.task}"


class State(enum.StrEnum):
    """Connect's connector and task states."""

    UNASSIGNED = "UNASSIGNED"
    RUNNING = "RUNNING"
    PAUSED = "PAUSED"
    STOPPED = "STOPPED"
    FAILED = "FAILED"
    RESTARTING = "RESTARTING"


class TargetState(enum.StrEnum):
    """What an operator asked a connector to be (Connect's target state)."""

    RUNNING = "RUNNING"
    PAUSED = "PAUSED"
    STOPPED = "STOPPED"


# --- configuration problems ----------------------------------------------------------------


class Severity(enum.StrEnum):
    """How bad a problem is: errors stop the load, warnings are reported and the load goes on."""

    ERROR = "error"
    WARNING = "warning"


@dataclass(frozen=True)
class Problem:
    """One thing wrong with a configuration (``daemon.errors.InvalidConfig`` carries them).

    ``str()`` gives one line: ``file[:line]: key: message[; expected ...]``, for example
    ``worker.properties:7: offset.flush.interval.ms: 'abc' is not a number; expected
    milliseconds as an integer ≥ 0``. The severity is not part of ``str()``; printers prefix it.
    """

    file: str | None
    key: str | None
    message: str
    expected: str | None = None
    severity: Severity = Severity.ERROR
    line: int | None = None

    @property
    def is_error(self) -> bool:
        return self.severity is Severity.ERROR

    def __str__(self) -> str:
        parts = []
        if self.file is not None:
            parts.append(self.file if self.line is None else f"{self.file}:{self.line}")
        if self.key is not None:
            parts.append(self.key)
        parts.append(
            self.message if self.expected is None else f"{self.message}; expected {self.expected}"
        )
        return ": ".join(parts)

    def located(self, file: str | None, lines: Mapping[str, int] | None = None) -> Problem:
        """This problem with ``file`` (if it has none) and the key's line number filled in."""
        line = self.line
        if line is None and lines is not None and self.key is not None:
            line = lines.get(self.key)
        return dataclasses.replace(
            self, file=self.file if self.file is not None else file, line=line
        )
