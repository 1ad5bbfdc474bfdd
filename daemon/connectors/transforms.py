"""Connect's single message transforms, applied to a converted batch where Connect applies them:
after conversion, before the sink's ``put`` (``WorkerSinkTask``: convert → transformation chain
→ put), in the order ``transforms`` lists them (``daemon.config.transforms`` reads and checks the
configuration).

Column-wise on the batch's Arrow table, never a Python loop over records:

- a predicate is a boolean mask over the rows: ``TopicNameMatches`` (the whole topic name
  matches ``pattern``: judged once per distinct topic with Python's ``re``, whose syntax is
  closer to Java's than Arrow's RE2, then ``is_in``), ``HasHeaderKey`` (some header is named
  ``name``), ``RecordIsTombstone`` (the value is null: Kafka's null, or what the converter made
  null);
- a transform applies to the rows where its predicate's mask differs from ``negate`` (all rows
  without a predicate), as Connect's ``TransformationStage`` applies it to a record;
- ``Filter`` drops those rows. The batch's offset ranges still cover them, so the sink's
  commit moves past them, as Connect commits past records a transform dropped.
"""

from __future__ import annotations

import re
from dataclasses import replace

import pyarrow as pa
import pyarrow.compute as pc

from daemon.config import transforms as tf
from daemon.connectors.records import RecordBatch


def predicate_mask(spec: tf.PredicateSpec, batch: RecordBatch) -> pa.BooleanArray:
    """Where ``spec`` holds, row by row."""
    table = batch.table
    n = table.num_rows
    if spec.cls == tf.TOPIC_NAME_MATCHES:
        topics = table.column("kafka_topic")
        pattern = re.compile(spec.config["pattern"])
        names = pc.unique(topics).to_pylist()
        matched = pa.array(
            [t for t in names if t is not None and pattern.fullmatch(t)], pa.string()
        )
        return pc.is_in(topics, value_set=matched).combine_chunks()
    if spec.cls == tf.HAS_HEADER_KEY:
        headers = table.column("headers").combine_chunks()
        keys = pc.struct_field(pc.list_flatten(headers), [0])
        hit = pc.filter(pc.list_parent_indices(headers), pc.equal(keys, spec.config["name"]))
        return pc.is_in(pa.array(range(n), pa.int64()), value_set=pc.unique(hit).cast(pa.int64()))
    if spec.cls == tf.RECORD_IS_TOMBSTONE:
        if batch.value_columns is not None:
            if batch.tombstones is None:
                return pa.array([False] * n)
            return pc.fill_null(batch.tombstones, False)
        return pc.is_null(table.column("value")).combine_chunks()
    raise ValueError(f"{spec.cls} is not a predicate connectd applies")


def apply(chain: tf.Chain, batch: RecordBatch) -> RecordBatch:
    """``batch`` after ``chain``: the rows Filter drops are gone, ranges unchanged."""
    n = len(batch)
    if not chain or n == 0:
        return batch
    keep = pa.array([True] * n)
    for spec in chain.transforms:
        where: pa.BooleanArray = pa.array([True] * n)
        if spec.predicate is not None:
            where = predicate_mask(spec.predicate, batch)
            if spec.negate:
                where = pc.invert(where)
        if spec.cls == tf.FILTER:
            keep = pc.and_(keep, pc.invert(where))
        else:
            raise ValueError(f"{spec.cls} is not a transform connectd applies")
    if pc.all(keep).as_py():
        return batch
    return replace(
        batch,
        table=batch.table.filter(keep),
        tombstones=None if batch.tombstones is None else batch.tombstones.filter(keep),
        timestamp_types=(
            None if batch.timestamp_types is None else batch.timestamp_types.filter(keep)
        ),
    )
