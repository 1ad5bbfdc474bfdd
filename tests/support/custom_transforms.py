"""Transforms and predicates written in Python, as a user writes them
(``daemon.connectors.transforms.custom`` has the interface): the worked example of
docs/connectors.md and a few that misbehave."""

from __future__ import annotations

from collections.abc import Mapping

import pyarrow as pa
import pyarrow.compute as pc

from daemon.connectors.api import Predicate, RecordBatch, Transformation


class Upper(Transformation):
    """Upper-cases the value field ``field`` (a column of a value in columns); refuses, as
    Connect's transforms refuse a record, rows whose ``field`` is ``"refuse"``."""

    def configure(self, config: Mapping[str, str]) -> None:
        self.field = config["field"]

    def apply(
        self, batch: RecordBatch, where: pa.BooleanArray
    ) -> tuple[RecordBatch, dict[int, str]]:
        assert batch.value_columns is not None, "Upper needs a value in columns (mode=infer)"
        column = batch.value_columns[self.field]
        table = batch.table
        i = table.schema.get_field_index(column)
        values = table.column(i)
        upper = pc.if_else(where, pc.utf8_upper(values), values)
        refused = pc.and_(where, pc.equal(values, "refuse"))
        rows = pc.indices_nonzero(pc.fill_null(refused, False)).to_pylist()
        done = batch.with_table(table.set_column(i, column, upper))
        return done, {row: f"{self.field} says refuse" for row in rows}


class EvenOffsets(Predicate):
    """Holds for records at an even offset."""

    def test(self, batch: RecordBatch) -> pa.BooleanArray:
        offsets = batch.table.column("kafka_offset")
        return pc.equal(pc.bit_wise_and(offsets, 1), 0).combine_chunks()


class NeedsMode(Transformation):
    """Refuses settings without ``mode``."""

    def configure(self, config: Mapping[str, str]) -> None:
        if config.get("mode") not in ("a", "b"):
            raise ValueError(f"mode must be a or b, not {config.get('mode')!r}")

    def apply(self, batch: RecordBatch, where: pa.BooleanArray) -> RecordBatch:
        return batch


class Raises(Transformation):
    """Fails every batch."""

    def apply(self, batch: RecordBatch, where: pa.BooleanArray) -> RecordBatch:
        raise RuntimeError("boom")


class LosesRanges(Transformation):
    """Returns a batch whose offset ranges are not the batch's."""

    def apply(self, batch: RecordBatch, where: pa.BooleanArray) -> RecordBatch:
        return batch.with_ranges(())


class NotATransform:
    """Has no apply()."""
