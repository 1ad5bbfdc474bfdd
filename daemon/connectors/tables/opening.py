"""The bounded open: a table sink task's claims of newly assigned partitions, waited for at
most ``OPEN_WAIT`` seconds in the partitions' assignment, finished beside the task.

``SinkTask.open`` runs in the consumer's assignment, holding the task's lock (no ``put`` meanwhile).
Claiming a table's partitions may take long (an executor job: the first one of a cold start waits
for a JVM, 10-40 s here; a local commit log behind a slow disk). So ``open`` starts the claims as a
background coroutine of the incarnation (``context.start_background``) and waits for them at most
``OPEN_WAIT``; what is not done by then goes on beside the task. The next ``put`` waits for it,
seeks its partitions to their committed offsets and leaves out their records fetched before the seek
(they come again from there); ``pre_commit`` takes the seeks of those done meanwhile; ``close``
cancels an opening whose partitions all close (its executor job is killed and reaped) and lets one
that also opens partitions that stay finish.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from collections.abc import Collection, Coroutine, Mapping
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from daemon.connectors.protocols import SinkTaskContext
from daemon.connectors.records import RecordBatch, TopicPartition

log = logging.getLogger("connectd.connectors.tables")
#: Seconds ``open`` waits for its claims (holding the task's lock: no ``put`` meanwhile); the
#: rest goes on beside the task. The consumer's callback itself returns to aiokafka sooner, after
#: a third of ``session.timeout.ms`` (``runtime.incarnation.rebalance``).
OPEN_WAIT = 5.0


class Openings:
    """The claims of one task still going on; ``committed`` is the task's view of the
    committed offsets, which the claims fill in."""

    def __init__(self, context: SinkTaskContext, committed: Mapping[TopicPartition, int]) -> None:
        self._context = context
        self._committed = committed
        self._going: dict[asyncio.Task[None], frozenset[TopicPartition]] = {}

    def __bool__(self) -> bool:
        return bool(self._going)

    async def start(
        self, partitions: frozenset[TopicPartition], claims: Coroutine[Any, Any, None]
    ) -> None:
        """Run ``claims`` (of ``partitions``) beside the task; wait for them ``OPEN_WAIT`` at
        most, and seek at once if they are done by then."""
        opening = self._context.start_background(claims, "open")
        self._going[opening] = partitions
        await asyncio.wait([opening], timeout=OPEN_WAIT)
        if opening.done():
            self._settle(opening)
        else:
            log.info(
                "%s: opening %s goes on beside the rebalance (waiting for the table)",
                self._context.task_id,
                ", ".join(map(str, sorted(partitions))),
            )

    def _settle(
        self, opening: asyncio.Task[None], closing: Collection[TopicPartition] = ()
    ) -> set[TopicPartition]:
        """Request the seeks of a finished opening (none for ``closing`` partitions) and return
        the partitions sought; raises its failure."""
        tps = self._going.pop(opening) - set(closing)
        opening.result()
        seeks = {tp: self._committed[tp] for tp in tps if tp in self._committed}
        seeks = {tp: o for tp, o in seeks.items() if tp in self._context.assignment()}
        if seeks:
            self._context.offset(seeks)
        return set(seeks)

    async def finish(self) -> set[TopicPartition]:
        """Wait for every opening; the partitions their seeks move."""
        sought: set[TopicPartition] = set()
        for opening in list(self._going):
            await asyncio.wait([opening])
            sought |= self._settle(opening)
        return sought

    def settle_done(self) -> None:
        """Seek for the openings that ended meanwhile (``pre_commit``)."""
        for opening in [o for o in self._going if o.done()]:
            self._settle(opening)

    async def close(self, partitions: Collection[TopicPartition]) -> None:
        """``partitions`` close: cancel an opening of those only (its job's executor is killed
        and reaped first); let one that also opens partitions that stay finish."""
        closing = set(partitions)
        for opening, tps in list(self._going.items()):
            if tps <= closing:
                opening.cancel()
                await asyncio.wait([opening])
                del self._going[opening]
            elif tps & closing:
                await asyncio.wait([opening])
                self._settle(opening, closing)


def without(batch: RecordBatch, partitions: Collection[TopicPartition]) -> RecordBatch:
    """``batch`` without the records and ranges of ``partitions``."""
    if not partitions:
        return batch
    keep = [r for r in batch.ranges if r.tp not in partitions]
    table = batch.table
    if table.num_rows:
        mine = pc.is_in(
            pc.binary_join_element_wise(
                table.column("kafka_topic"),
                pc.cast(table.column("kafka_partition"), pa.string()),
                "/",
            ),
            value_set=pa.array([f"{tp.topic}/{tp.partition}" for tp in partitions], pa.string()),
        )
        table = table.filter(pc.invert(mine))
    return dataclasses.replace(batch, table=table, ranges=tuple(keep))
