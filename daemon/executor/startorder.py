"""In what order a pool starts its executors, so that starts do not slow down writes.

A JVM start with a SparkSession costs 8-10 s of CPU. On a small machine starts compete with
everything else for the cores:

- While no executor is ready, one starts alone: two JVM starts together on 2 cores were each
  ready only after about twice one start's time, so the first write waited for both.
- Once one is ready, the rest of ``size`` start (they are for writes running at once).
- The spares (``spares``, kept warm so a kill does not stall writes for a JVM start) start once
  no write ran for ``spare_quiet`` seconds, or at the latest ``spare_wait_max`` seconds after
  their start was first put off: behind a backlog on 2 cores a spare's start took CPU from the
  writes and the conversions for its whole start (bench/README.md, bench-ss).
- Each write that stepped aside (``queue.py``: it ran long while another connector's write
  waited) adds one executor to ``size``, and the spares start at once: a warm spare is what
  lets the other connectors' writes go on when the next write hangs. Never more than
  ``max_size`` exist, counting the ones being killed.

``StartOrder.plan`` only decides; the supervisor spawns and asks again when told to.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class StartOrder:
    size: int
    spares: int
    spare_quiet: float
    spare_wait_max: float
    max_size: int | None = None  # default: size + spares
    _put_off_since: float | None = field(default=None, init=False)

    def plan(
        self,
        *,
        existing: int,
        ready: int,
        starting: int,
        busy: int,
        last_write_end: float | None,
        now: float,
        aside: int = 0,
    ) -> tuple[int, float | None]:
        """How many executors to spawn now, and in how many seconds to ask again (None: at
        the next change). ``existing`` counts every executor the pool has, being killed or not;
        ``last_write_end`` is when an executor last came back from a write (None: never);
        ``aside`` is how many writes stepped aside."""
        size = self.size + aside
        cap = self.size + self.spares if self.max_size is None else self.max_size
        missing = min(size + self.spares, cap) - existing
        if missing <= 0:
            self._put_off_since = None
            return 0, None
        if ready == 0:
            return max(0, min(missing, 1 - starting)), None
        now_n = min(missing, max(0, size - existing))
        spares = missing - now_n
        if spares == 0:
            return now_n, None
        if aside:
            self._put_off_since = None
            return missing, None
        if self._put_off_since is None:
            self._put_off_since = now
        since = self._put_off_since
        quiet_for = 0.0 if busy else now - max(since, last_write_end or since)
        waited = now - since
        if quiet_for >= self.spare_quiet or waited >= self.spare_wait_max:
            self._put_off_since = None
            return missing, None
        until_quiet = self.spare_quiet - quiet_for
        return now_n, max(0.05, min(until_quiet, self.spare_wait_max - waited))
