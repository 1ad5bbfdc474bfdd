"""connectd's error taxonomy.

Every error connectd raises on purpose is a ``ConnectdError``. The ``retriable`` flag tells the
restart policy whether running the same thing again can help (a timeout, a dead executor) or
cannot (a bad configuration, a missing class). Messages say what was wrong and what to do.
"""

from __future__ import annotations

from collections.abc import Sequence

from daemon.structs import Problem


class ConnectdError(Exception):
    """Base class for every error connectd raises on purpose. ``not_retried_because`` is what
    the restart policy says when it does not restart a failure of this class."""

    retriable: bool = False
    not_retried_because: str = "a restart cannot fix a configuration error or a missing class"


class RetriableError(ConnectdError):
    """Connect's ``RetriableException``, raised by a sink's ``put`` or ``pre_commit``: the same
    records may succeed later (a database briefly unreachable, a lock held elsewhere). The task
    stays RUNNING and the runtime delivers the batch again, for as long as it takes: each wait
    is what the sink asked with ``context.timeout(ms)``, else 0.3 s doubling up to
    ``errors.retry.delay.max.ms``, and ``errors.retry.timeout`` never ends it (Connect's rule
    for ``put``). Each call still runs under its deadline, and a stop ends the retrying."""

    retriable = True


class ConfigError(ConnectdError):
    """A configuration value is missing, malformed or contradictory. Not retriable."""

    retriable = False


class ConnectorNotFound(ConnectdError):
    """No connector with that name, or no connector class with that name or alias."""

    retriable = False


class TaskNotFound(ConnectdError):
    """No task with that id."""

    retriable = False


class JavaUnavailable(ConnectdError):
    """No suitable Java runtime for Spark or the development broker."""

    retriable = False


class ExecutorError(ConnectdError):
    """Base class for failures of the executor pool."""

    retriable = True


class WriteTimeout(ExecutorError):
    """A write ran past its deadline; its executor's process tree was killed and reaped."""

    retriable = True


class ExecutorDied(ExecutorError):
    """An executor process ended on its own (OOM, JVM crash, signal) while serving a write."""

    retriable = True


class ExecutorStartFailed(ExecutorError):
    """An executor could not start (its SparkSession never became ready)."""

    retriable = True


class WriteFailed(ExecutorError):
    """The write function raised inside the executor; the traceback is in the message."""

    retriable = True


class PoolClosed(ExecutorError):
    """The executor pool is shutting down and takes no more writes."""

    retriable = False


class TaskTimeout(ConnectdError):
    """A task step (poll, put, commit) ran past its deadline."""

    retriable = True


class CommitRejected(ConnectdError):
    """The sink's commit log refused a commit: a gap, an overlap, or an older epoch (a zombie).

    ``daemon.storage.commitlog`` says which with a subclass: ``OffsetsDiverged`` (a gap or an
    overlap), ``ZombieEpoch``, ``PartitionsOwned`` (another connector's partition). None is
    retried: the same data and configuration meet the same refusal."""

    retriable = False
    not_retried_because = "a restart would meet the same table and the same refusal"


class InvalidConfig(ConfigError):
    """A configuration has errors; ``problems`` holds every problem found, not just the first.

    ``str()`` is one line per problem. Warnings found alongside the errors are included too, so a
    report shows the whole picture.
    """

    retriable = False

    def __init__(self, problems: Sequence[Problem]) -> None:
        self.problems: tuple[Problem, ...] = tuple(problems)
        super().__init__("\n".join(str(p) for p in self.problems))


class ConversionError(ConnectdError):
    """A record's key or value could not be converted (bad JSON, a missing envelope, a type
    that conflicts with the column's). Reported per record, never for a whole batch."""

    retriable = False


class StorageCorrupt(ConnectdError):
    """Persisted state (a commit-log record, an epoch file) failed its checksum or cannot be
    parsed. Not retriable: the message names the file; restore it or move it aside."""

    retriable = False


class ExecutorUnavailable(ExecutorError):
    """No executor became free for a write within the wait bound (all busy, starting, or the
    pool is backing off after repeated start failures; the message says which)."""

    retriable = True


class ConnectorExists(ConnectdError):
    """A connector with that name exists already (REST answers 409)."""

    retriable = False


class Conflict(ConnectdError):
    """The request conflicts with the connector's current state, e.g. altering offsets of a
    connector that is not STOPPED (REST answers 400 or 409, as Connect does for the case)."""

    retriable = False

    def __init__(self, message: str, *, status: int = 409) -> None:
        super().__init__(message)
        self.status = status


class RemoteError(Conflict):
    """Another worker of the cluster answered a forwarded request with an error, or could not be
    reached; REST passes its status and message on unchanged (distributed mode). ``answered``
    is False when no answer came (the other worker died or timed out)."""

    retriable = True
    answered = True


class StopFailed(ConnectdError):
    """A task's old incarnation could not be reaped (its executor tree would not die within
    the kill deadline), so no new incarnation was started: never two at once."""

    retriable = True


class ServiceUnavailable(ConnectdError):
    """A service the daemon needs at start (the Kafka brokers, a Spark master) did not answer
    within its startup deadline; the CLI exits 69 so systemd's restart policy retries later."""

    retriable = True


class ListenerUnavailable(ServiceUnavailable):
    """A REST listener cannot be bound (e.g. its port is in use): exit 69 (EX_UNAVAILABLE)."""


class RecordRejected(ConnectdError):
    """A sink refused a record (``SinkTask.reject``) and ``errors.tolerance`` is ``none``. Not
    retriable: the same record is refused again. The message names topic, partition and offset."""

    retriable = False


class DeadLetterQueueError(ConnectdError):
    """Producing to, or reading back, the dead-letter topic failed (a broker unreachable, a
    produce timeout). Retriable: a new attempt re-reads the topic, so nothing lands twice."""

    retriable = True
