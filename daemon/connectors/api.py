"""The sink connector API: Kafka Connect's sink lifecycle, in Python, on asyncio.

A connector provides a ``SinkConnector`` (describes and validates its settings, splits its
configuration into task configurations) and a ``SinkTask`` (receives batches of records). The
runtime calls them; they call back through the ``SinkTaskContext`` (a task) and the
``ConnectorContext`` (a connector instance).

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
  ``RetriableError`` (Connect's ``RetriableException``) from ``put`` or ``pre_commit`` does not
  fail the task: it stays RUNNING and the batch is delivered again until it succeeds, after the
  wait the task asked with ``context.timeout(ms)`` (else a doubling backoff).

Exactly-once sinks keep their progress in the sink: ``open`` reads the offsets committed with
the data and seeks there with ``context.offset(...)``; ``put`` writes and commits (rows + offset
ranges + epoch, atomically); ``pre_commit`` returns the offsets durable in the sink, which the
runtime commits to the consumer group for lag tools only. Such sinks also override the offsets
hooks (``SinkConnector.read_offsets`` / ``alter_offsets`` / ``reset_offsets``), which Connect's
offsets REST API calls.

This module gathers the public names; each part lives in a module of its own concern:
``protocols`` (``SinkTaskContext``, ``ConnectorContext``, ``ExecutorRunner``), ``base``
(``SinkTask``, ``SinkConnector``), ``registry`` (``ConnectorRegistry``,
``validate_connector``), and the settings schema in ``daemon.config.definitions``. The runtime
implements the contexts (``daemon.runtime.incarnation.context.TaskContext``,
``daemon.runtime.connector``).
"""

from __future__ import annotations

# One import for connector authors; each part lives in a module of its own concern. The
# settings schema is the config layer's.
from daemon.config.definitions import REQUIRED as REQUIRED
from daemon.config.definitions import ConfigDef as ConfigDef
from daemon.config.definitions import ConfigKey as ConfigKey
from daemon.config.definitions import ConfigType as ConfigType
from daemon.config.definitions import Importance as Importance
from daemon.config.definitions import Validator as Validator
from daemon.config.definitions import in_range as in_range
from daemon.config.definitions import one_of as one_of
from daemon.connectors.base import SinkConnector as SinkConnector
from daemon.connectors.base import SinkTask as SinkTask
from daemon.connectors.protocols import ConnectorContext as ConnectorContext
from daemon.connectors.protocols import ExecutorCall as ExecutorCall
from daemon.connectors.protocols import ExecutorRunner as ExecutorRunner
from daemon.connectors.protocols import SinkTaskContext as SinkTaskContext
from daemon.connectors.records import RecordBatch as RecordBatch
from daemon.connectors.registry import ConnectorRegistry as ConnectorRegistry
from daemon.connectors.registry import PluginInfo as PluginInfo
from daemon.connectors.registry import default_registry as default_registry
from daemon.connectors.registry import list_plugins as list_plugins
from daemon.connectors.registry import register_alias as register_alias
from daemon.connectors.registry import resolve_connector_class as resolve_connector_class
from daemon.connectors.registry import validate_connector as validate_connector
from daemon.connectors.transforms.custom import Predicate as Predicate
from daemon.connectors.transforms.custom import Transformation as Transformation
from daemon.errors import ConnectdError as ConnectdError
from daemon.errors import RetriableError as RetriableError
from daemon.structs import TaskId as TaskId
