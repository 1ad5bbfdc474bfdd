"""What a commit log's records say, in memory: per partition the end of its last commit and
the connector that owns it, per (connector, partition) the last epoch, and the records since
the checkpoint the state started from. Plus the refusals a commit meets when it does not fit.

Ownership: a partition belongs to the connector that first committed to or fenced it; another
connector's commit or fence of it is refused (``PartitionsOwned``, naming the owner), because
two connectors on the same partitions would refuse each other's commits. Epochs are kept per
connector and partition; ``last_epoch(connector)`` is what a new incarnation must exceed when
the daemon's own epoch counter was lost (``daemon.storage.epochs``: the log is the authority).

Pure data, no filesystem access: ``CommitLog`` (``daemon.storage.commitlog``) holds one
``LogState``, feeds it the records it reads or publishes, and guards it with its lock.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable

from daemon.errors import CommitRejected
from daemon.storage.checkpoint import Checkpoint
from daemon.storage.records import CommitRecord
from daemon.structs import OffsetRange, TopicPartition


class ZombieEpoch(CommitRejected):
    """An older epoch of the connector tried to commit or fence after a newer one claimed the
    partition: this incarnation is a zombie. Not retried (a new incarnation of the same task
    would only fence the live one out in turn)."""


class OffsetsDiverged(CommitRejected):
    """A commit does not continue where the partition's last commit (of this connector, or
    an operator's offsets record) ended. Not retried: the same seek would meet the same
    refusal (a gap left by retention never heals); an operator decides (the offsets API)."""


class TableLost(CommitRejected):
    """The table's state (its commit log, Delta log or Iceberg metadata) is gone while a task
    had committed to it: deleted, or removed by hand. Committing would start the table over
    silently, so nothing is committed. Not retried: starting again is the user's choice (the
    offsets API, or ``table.offsets.missing``)."""


class PartitionsOwned(CommitRejected):
    """Another connector owns the partition (its commit or fence was the partition's last):
    two connectors must not write the same partitions of one table. Not retried (the
    configuration must change: another path, or the new connector names the old one in
    ``takeover``)."""


class LogState:
    """The state after record ``seq`` of the log at ``location`` (used in messages).

    Not thread-safe: the owning ``CommitLog`` calls it under its lock.
    """

    def __init__(self, location: str) -> None:
        self.location = location
        self.seq = 0
        #: The checkpoint the in-memory records start after: every record up to it is done.
        self.base = 0
        #: Records ``base + 1 .. seq`` (memory is bounded by the checkpoint interval).
        self.records: list[CommitRecord] = []
        #: Seqs of ``records`` not yet known to be done (their files may not be in place).
        self.unsure: set[int] = set()
        self.ends: dict[TopicPartition, int] = {}
        self.epochs: dict[tuple[str, TopicPartition], int] = {}
        #: The connector whose commit or fence touched each partition last.
        self.claimed_by: dict[TopicPartition, str] = {}
        #: Checkpoints to publish once their record is applied, by seq.
        self.due: dict[int, Checkpoint] = {}

    def reset(self, checkpoint: Checkpoint | None) -> None:
        """Start over from ``checkpoint`` (``None``: from an empty log)."""
        self.seq = self.base = checkpoint.seq if checkpoint else 0
        self.records = []
        self.unsure = set()
        self.ends = dict(checkpoint.ends) if checkpoint else {}
        self.epochs = dict(checkpoint.epochs) if checkpoint else {}
        self.claimed_by = dict(checkpoint.claimed_by) if checkpoint else {}
        self.due = {}  # a later state supersedes them

    def account(self, record: CommitRecord) -> None:
        """Apply record ``seq + 1`` to the state (not yet known to be done)."""
        self.records.append(record)
        self.unsure.add(record.seq)
        self.seq = record.seq
        for r in record.ranges:
            self.ends[r.tp] = r.end
        if record.epoch is not None:
            claimed = [r.tp for r in record.ranges] + [tp for tp, _ in record.offsets]
            for tp in claimed:
                key = (record.connector, tp)
                self.epochs[key] = max(self.epochs.get(key, 0), record.epoch)
                self.claimed_by[tp] = record.connector
        if record.kind == "offsets":
            for tp, offset in record.offsets:
                if offset is None:
                    self.ends.pop(tp, None)
                else:
                    self.ends[tp] = offset

    def trim(self, seq: int) -> None:
        """Checkpoint ``seq`` is published: records up to it are done and no longer needed."""
        if seq > self.base:
            self.base = seq
            self.records = [r for r in self.records if r.seq > seq]
            self.unsure = {s for s in self.unsure if s > seq}

    def snapshot(self) -> Checkpoint:
        """The checkpoint of the current state (to publish once record ``seq`` is done)."""
        return Checkpoint(self.seq, dict(self.ends), dict(self.epochs), dict(self.claimed_by))

    def pending(self, upto: int | None = None) -> list[CommitRecord]:
        """Records (up to ``upto``) not yet known to be done."""
        return [r for r in self.records if r.seq in self.unsure and (upto is None or r.seq <= upto)]

    def done(self, seqs: Iterable[int]) -> None:
        self.unsure.difference_update(seqs)

    # ---- reading ----

    def committed_offsets(
        self, partitions: Iterable[TopicPartition] | None = None
    ) -> dict[TopicPartition, int]:
        if partitions is None:
            return dict(self.ends)
        return {tp: self.ends[tp] for tp in partitions if tp in self.ends}

    def last_epoch(self, connector: str, tp: TopicPartition | None = None) -> int:
        if tp is not None:
            return self.epochs.get((connector, tp), 0)
        return max((e for (c, _), e in self.epochs.items() if c == connector), default=0)

    def owners(self, topics: Iterable[str] | None = None) -> dict[TopicPartition, str]:
        wanted = None if topics is None else set(topics)
        return {tp: c for tp, c in self.claimed_by.items() if wanted is None or tp.topic in wanted}

    def claimed(self, connector: str, epoch: int, tps: Iterable[TopicPartition]) -> bool:
        """Whether ``connector`` already holds ``tps`` with ``epoch`` or newer (a fence would
        change nothing)."""
        return all(
            self.epochs.get((connector, tp), 0) >= epoch and self.claimed_by.get(tp) == connector
            for tp in tps
        )

    # ---- refusals ----

    def check_owner(
        self, connector: str, tp: TopicPartition, takeover: Collection[str] = ()
    ) -> None:
        other = self.claimed_by.get(tp)
        if other is not None and other != connector and other not in takeover:
            raise PartitionsOwned(
                f"{connector} may not write {tp} to table {self.location}: connector {other!r} "
                f"owns it (epoch {self.epochs.get((other, tp), 0)}); two connectors must not "
                "write the same partitions of one table: give one its own path, or, if "
                f"{connector} replaces {other!r}, set takeover={other} on {connector}"
            )

    def check_epoch(self, connector: str, epoch: int, tp: TopicPartition) -> None:
        last = self.epochs.get((connector, tp), 0)
        if epoch < last:
            raise ZombieEpoch(
                f"{connector} epoch {epoch} may not write {tp}: epoch {last} already has "
                "(this incarnation is a zombie; it must stop)"
            )

    def check_owners(self, connector: str, tps: Iterable[TopicPartition]) -> None:
        """An operator's offsets for ``connector`` (none: any connector's) touch only its own
        partitions."""
        if connector:
            for tp in tps:
                self.check_owner(connector, tp)

    def check_fence(
        self,
        connector: str,
        epoch: int,
        tps: Iterable[TopicPartition],
        takeover: Collection[str] = (),
        *,
        owners_only: bool = False,
    ) -> None:
        """Refuse a fence of ``tps`` that another connector (not in ``takeover``) owns or a
        newer epoch claimed (``owners_only``: check only the owners)."""
        for tp in tps:
            self.check_owner(connector, tp, takeover)
            if not owners_only:
                self.check_epoch(connector, epoch, tp)

    def check_commit(self, connector: str, epoch: int, ranges: Iterable[OffsetRange]) -> None:
        """Refuse a commit of ``ranges`` that another connector's partitions, a newer epoch or
        a gap or overlap with the last commit rules out."""
        for r in ranges:
            self.check_owner(connector, r.tp)
            self.check_epoch(connector, epoch, r.tp)
            end = self.ends.get(r.tp)
            if end is not None and r.start != end:
                what = "gap" if r.start > end else "overlap (duplicate)"
                raise OffsetsDiverged(
                    f"commit of {r.tp} offsets {r.start}..{r.end} by {connector} refused:"
                    f" {what}, the last commit ended at {end}; seek to {end} and write "
                    "from there (a restart of the task does)"
                )

    def check_skip(
        self, connector: str, epoch: int, tp: TopicPartition, start: int, end: int
    ) -> None:
        """Refuse a skip like a commit; it must start where the partition's last one ended."""
        self.check_owner(connector, tp)
        self.check_epoch(connector, epoch, tp)
        last = self.ends.get(tp)
        if last is not None and start != last:
            raise OffsetsDiverged(
                f"skip of {tp} offsets {start}..{end} by {connector} refused: it must "
                f"start where the last commit ended, at {last}"
            )
