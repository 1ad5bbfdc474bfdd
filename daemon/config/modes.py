"""The worker's two modes, and what each needs from the worker's settings."""

from __future__ import annotations

import enum

from daemon.config.problems import Problem, error, warning
from daemon.config.worker import WorkerConfig


class Mode(enum.StrEnum):
    STANDALONE = "standalone"
    DISTRIBUTED = "distributed"


def mode_problems(worker: WorkerConfig, mode: Mode) -> list[Problem]:
    """What ``mode`` needs from ``worker`` that it lacks, and what it will ignore.

    Distributed mode requires ``group.id`` and the three storage topics, as Connect does: two
    clusters that defaulted to the same topics would overwrite each other's configs.
    """
    problems: list[Problem] = []
    distributed_keys = {
        "group.id": worker.group_id,
        "config.storage.topic": worker.config_storage_topic,
        "offset.storage.topic": worker.offset_storage_topic,
        "status.storage.topic": worker.status_storage_topic,
    }
    for key, value in distributed_keys.items():
        if mode is Mode.DISTRIBUTED and value is None:
            problems.append(
                error(
                    key,
                    "required key is missing in distributed mode",
                    "a name shared by this cluster's workers",
                )
            )
        elif mode is Mode.STANDALONE and value is not None:
            problems.append(warning(key, "ignored in standalone mode"))
    return problems
