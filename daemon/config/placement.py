"""Whether a connector's data location can be reached from where Spark runs its writes.

An executor is the driver of its own Spark application. With a ``local`` master the application's
tasks run inside that process, on this host, so a local path (no scheme, or ``file:``) is the
directory the daemon checks and commits in. With a cluster master (``spark://``, ``yarn``,
``k8s://``) the tasks run on the cluster's nodes and each writes its part files under that path on
its own node's filesystem, where the daemon's commit does not see them. So a local location is
refused there, unless the worker says the path is the same directory on every node
(``executor.spark.local.paths.shared``: a shared mount, or a cluster whose workers run here).

Which settings are locations is declared by the connector (``ConfigKey.location``). The check is
run wherever a connector config is validated for a worker: the connector registry bound to the
worker (creation, REST validation, the daemon's start and reload) and ``check-config``.
"""

from __future__ import annotations

import urllib.parse
from collections.abc import Mapping
from dataclasses import dataclass

from daemon.config.definitions import ConnectorConfigDef
from daemon.config.executors import LOCAL_PATHS_SHARED_KEY, SPARK_MASTER_KEY
from daemon.config.problems import Problem, error
from daemon.config.providers import has_reference
from daemon.config.worker import WorkerConfig

#: Filesystems every node of a cluster can reach, as examples for the refusal's hint (the
#: connector's own check says which of them it supports).
_SHARED_EXAMPLES = "hdfs://, s3a://, abfss://"


def is_local(location: str) -> bool:
    """``True`` for a plain path or a ``file:`` URI (a one-letter scheme is a drive, not a
    scheme)."""
    scheme = urllib.parse.urlsplit(location.strip()).scheme
    return scheme.lower() in ("", "file") or len(scheme) == 1


@dataclass(frozen=True)
class SparkPlacement:
    """Where the executors' Spark applications run, as far as a data location cares. The
    default (``local[*]``) refuses nothing."""

    master: str = "local[*]"
    local_paths_shared: bool = False

    @classmethod
    def of(cls, worker: WorkerConfig) -> SparkPlacement:
        return cls(worker.executor_spark_master, worker.executor_spark_local_paths_shared)

    @property
    def reaches_local_paths(self) -> bool:
        """A local path means the same directory to every Spark task of an executor."""
        return self.local_paths_shared or self.master.startswith("local")

    def problems(
        self, definition: ConnectorConfigDef | None, config: Mapping[str, str]
    ) -> list[Problem]:
        """An error for each location setting of ``definition`` whose value in ``config`` is a
        local path this placement's Spark tasks cannot share. A value with a ``${...}``
        reference is not judged (it is resolved only when a task starts)."""
        if definition is None or self.reaches_local_paths:
            return []
        found = []
        for key in definition.keys.values():
            value = config.get(key.name, "").strip()
            if key.location and value and not has_reference(value) and is_local(value):
                found.append(
                    error(
                        key.name,
                        f"{value!r} is a local path, but {SPARK_MASTER_KEY}={self.master} runs"
                        " the writes on the cluster's nodes, each into its own local directory",
                        f"a URI every node reaches ({_SHARED_EXAMPLES} …), or"
                        f" {LOCAL_PATHS_SHARED_KEY}=true in the worker configuration if this"
                        " path is the same directory on every node (a shared mount, or workers"
                        " on this host)",
                    )
                )
        return found


LOCAL = SparkPlacement()
"""A local master: every location is reachable (nothing refused)."""
