"""connectd's chain on batches the conformance test does not build (it converts with the String
converters): a value projected into columns, where a tombstone is a mark beside the table."""

from __future__ import annotations

from daemon.config import transforms as tf
from daemon.connectors.converters import convert_poll, make_converter
from daemon.connectors.records import RawBatch
from daemon.connectors.transforms import apply

TOMBSTONES = tf.Chain(
    (tf.TransformSpec("f", tf.FILTER, predicate=tf.PredicateSpec("p", tf.RECORD_IS_TOMBSTONE)),)
)


def test_a_tombstone_of_a_projected_value_is_dropped_and_the_ranges_stay() -> None:
    values = [b'{"id": 1}', None, b'{"id": 3}']
    raw = RawBatch(
        topics=["t"] * 3,
        partitions=[0] * 3,
        offsets=[0, 1, 2],
        timestamps=[0] * 3,
        keys=[None] * 3,
        values=values,
        headers=[()] * 3,
        timestamp_types=[0, 1, 0],
    )
    value = make_converter("json", {"schemas.enable": "false", "fields": "id:int64"}, is_key=False)
    batch = convert_poll(raw, make_converter("string", {}, is_key=True), value).batch
    assert batch.value_columns is not None and batch.tombstones is not None
    out = apply(TOMBSTONES, batch).batch
    assert out.table.column("kafka_offset").to_pylist() == [0, 2]
    assert out.table.column("id").to_pylist() == [1, 3]
    assert out.tombstones is not None and out.tombstones.to_pylist() == [False, False]
    assert out.timestamp_types is not None and out.timestamp_types.to_pylist() == [0, 0]
    assert out.ranges == batch.ranges  # the commit still moves past offset 1
    assert apply(tf.Chain(), batch).batch is batch
