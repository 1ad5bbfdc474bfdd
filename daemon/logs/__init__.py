"""Logging: one line per event, each carrying the connector and task it concerns.

- ``context``: the connector and task of the lines a task's coroutine logs (context variables
  the runtime sets: ``set_task_context``, ``task_context``).
- ``formats``: ``log.format=text`` (without a time stamp under the journal) and ``json``.
- ``setup``: ``setup_logging``, the root logger's one handler and its writer thread;
  ``flush_logging``.
- ``relay``: the executors' own output (Spark, the JVM) relayed through logging
  (``OutputRelay``), with JSON and under the journal.

aiokafka's broker-outage filter is not here: it reads aiokafka's private state, so it lives in
``daemon.kafka.outages``, and each ``Daemon`` owns one.

What most callers need is importable from the package itself.
"""

from __future__ import annotations

from daemon.logs.context import set_task_context, task_context
from daemon.logs.setup import flush_logging, setup_logging

__all__ = ["flush_logging", "set_task_context", "setup_logging", "task_context"]
