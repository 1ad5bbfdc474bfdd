"""Distributed mode's worker: ``Herder`` (the group, the config log, the work here) and
``DistributedWorker`` (the REST API's ``WorkerAPI`` on it, forwarding writes to the leader)."""

from __future__ import annotations

from daemon.runtime.herder.herder import Herder
from daemon.runtime.herder.worker import DistributedWorker

__all__ = ["DistributedWorker", "Herder"]
