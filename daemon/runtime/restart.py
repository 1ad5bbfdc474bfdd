"""The auto-restart policy of failed tasks (Strimzi's schedule, seeds/004).

Restart number ``k`` (0-based) of a task waits ``k·(k+1)`` units: 0, 2, 6, 12, 20, 30, 42. The
unit is a minute, as in Strimzi, for failures that running again will not obviously fix; it is
a second for *retriable* connectd errors (an executor that died or was killed at its deadline, a
step past its deadline): those are infrastructure blips that Connect would retry in place, and an
exactly-once sink resumes from its committed offsets. At most ``errors.restart.max`` restarts
(-1: no limit); the count starts again once an incarnation ran healthy for the interval that
would come next (at least ``HEALTHY_MIN`` seconds). Every delay is capped at
``errors.restart.backoff.max.ms``.
"""

from __future__ import annotations

from dataclasses import dataclass

from daemon.config import ConnectorConfig
from daemon.errors import ConnectdError

HEALTHY_MIN = 10.0


@dataclass(frozen=True)
class RestartPolicy:
    enabled: bool = True
    max_restarts: int = 7  # -1: no limit
    backoff_max: float = 3600.0  # seconds

    @classmethod
    def from_connector(cls, config: ConnectorConfig) -> RestartPolicy:
        return cls(
            enabled=config.errors_restart_enabled,
            max_restarts=-1 if config.errors_restart_max is None else config.errors_restart_max,
            backoff_max=config.errors_restart_backoff_max.total_seconds(),
        )

    @staticmethod
    def unit(failure: BaseException | None) -> float:
        """Seconds per step of the schedule for this failure."""
        fast = isinstance(failure, ConnectdError) and failure.retriable
        return 1.0 if fast else 60.0

    def delay(self, count: int, failure: BaseException | None) -> float | None:
        """Seconds to wait before restart number ``count`` (0-based); None: give up."""
        if not self.enabled or (0 <= self.max_restarts <= count):
            return None
        return min(count * (count + 1) * self.unit(failure), self.backoff_max)

    def healthy_after(self, count: int, failure: BaseException | None) -> float:
        """How long an incarnation must have run, after ``count`` restarts, for the count to
        start again: the interval that would come next."""
        return max(HEALTHY_MIN, count * (count + 1) * self.unit(failure))
