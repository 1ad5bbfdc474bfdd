"""What a worker refuses in a connector's configuration beyond the connector's own checks.

Three things depend on the worker, not on the connector: whether its Spark can reach a data
location (``daemon.config.placement``), how many tasks it runs for one connector
(``tasks.max.limit``: each task is a Kafka consumer and a coroutine of its own, so a connector
asking for 100,000 of them would take the daemon's loop, REST API and watchdog with it), and
which client settings a connector may override (``connector.client.config.override.policy``,
``daemon.config.overrides``).

``WorkerChecks.of(worker)`` is run wherever a connector config is validated for a worker: the
connector registry bound to the worker (creation, REST validation, the daemon's start and
reload) and ``check-config``. The runtime applies the task bound once more when a connector
starts, so one stored before the bound was lowered fails instead of starting its tasks.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass

from daemon.config.definitions import ConnectorConfigDef
from daemon.config.overrides import OverridePolicyName, override_problems
from daemon.config.placement import LOCAL, SparkPlacement
from daemon.config.problems import Problem, error
from daemon.config.providers import has_reference
from daemon.config.worker import TASKS_MAX_LIMIT, TASKS_MAX_LIMIT_KEY, WorkerConfig
from daemon.errors import ConfigError, InvalidConfig

log = logging.getLogger("connectd.config")


def tasks_max_problem(tasks_max: int, limit: int) -> Problem | None:
    """The error for ``tasks.max`` = ``tasks_max`` on a worker whose bound is ``limit``."""
    if tasks_max <= limit:
        return None
    return error(
        "tasks.max",
        f"{tasks_max} is more tasks than this worker runs for one connector"
        f" ({TASKS_MAX_LIMIT_KEY}={limit}; each task is a Kafka consumer of its own)",
        f"at most {limit} (more tasks than the topics have partitions stay idle), or a higher"
        f" {TASKS_MAX_LIMIT_KEY} in the worker configuration",
    )


@dataclass(frozen=True)
class WorkerChecks:
    """The worker's part of validating a connector config (see the module docstring). The
    default refuses no location and bounds tasks at the default ``tasks.max.limit``."""

    placement: SparkPlacement = LOCAL
    tasks_max_limit: int = TASKS_MAX_LIMIT
    override_policy: OverridePolicyName = OverridePolicyName.ALL

    @classmethod
    def of(cls, worker: WorkerConfig) -> WorkerChecks:
        return cls(
            SparkPlacement.of(worker),
            worker.tasks_max_limit,
            worker.connector_client_config_override_policy,
        )

    def problems(
        self, definition: ConnectorConfigDef | None, config: Mapping[str, str]
    ) -> list[Problem]:
        """The errors of ``config`` (a connector's properties) on this worker. A value that is
        not a whole number, or holds a ``${...}`` reference, is left to the connector config's
        own parsing (it names the key) and to the check at start."""
        found = self.placement.problems(definition, config)
        found += override_problems(self.override_policy, config)
        value = config.get("tasks.max", "").strip()
        if value and not has_reference(value):
            try:
                tasks_max = int(value)
            except ValueError:
                return found
            problem = tasks_max_problem(tasks_max, self.tasks_max_limit)
            if problem is not None:
                found.append(problem)
        return found

    def tasks_max(self, resolved: Mapping[str, str]) -> int:
        """``tasks.max`` of a resolved connector config, as the runtime starts it:
        ``InvalidConfig`` naming the key if it is above this worker's bound (a connector
        stored before the bound was lowered, or written to the config topic by another
        worker)."""
        tasks_max = int(resolved.get("tasks.max", "1"))
        problem = tasks_max_problem(tasks_max, self.tasks_max_limit)
        if problem is not None:
            raise InvalidConfig([problem])
        return tasks_max

    def generated(
        self, name: str, configs: list[dict[str, str]], resolved: Mapping[str, str]
    ) -> list[dict[str, str]]:
        """The task configurations connector ``name`` generated for its resolved config,
        bounded as Connect 4 bounds them: more than ``tasks.max`` fails the connector
        (``ConfigError``, not retried: it generates the same again) unless
        ``tasks.max.enforce=false``, which lets them run up to this worker's
        ``tasks.max.limit``."""
        tasks_max = int(resolved.get("tasks.max", "1"))
        enforce = resolved.get("tasks.max.enforce", "true").strip().lower() != "false"
        if len(configs) <= tasks_max:
            return configs
        if enforce:
            raise ConfigError(
                f"Connector {name} generated {len(configs)} task configurations, more than"
                f" tasks.max={tasks_max}: raise tasks.max, fix the connector, or set"
                " tasks.max.enforce=false (deprecated) to run them all"
            )
        if len(configs) > self.tasks_max_limit:
            raise ConfigError(
                f"Connector {name} generated {len(configs)} task configurations, more than"
                f" this worker runs for one connector ({TASKS_MAX_LIMIT_KEY}="
                f"{self.tasks_max_limit}), although tasks.max.enforce=false"
            )
        log.warning(
            "Connector %s generated %d task configurations, more than tasks.max=%d; all run"
            " (tasks.max.enforce=false)",
            *(name, len(configs), tasks_max),
        )
        return configs


NONE_REFUSED = WorkerChecks()
"""A local master and the default task bound."""
