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
  commit moves past them, as Connect commits past records a transform dropped;
- ``DropHeaders`` removes the headers named in ``headers`` from those rows (the headers column's
  values are filtered and its offsets moved, no row rebuilt).

- ``InsertHeader`` adds a header to those rows;
- ``InsertField``, ``ReplaceField``, ``MaskField`` and ``Cast`` (``$Key`` and ``$Value``) change
  the key or the value of those rows (``fields.py``); ``ExtractField``, ``HoistField``,
  ``Flatten`` and ``ValueToKey`` change its shape (``reshape.py``); ``TimestampConverter``
  reads and writes timestamps (``timestamps.py``);
- ``RegexRouter`` and ``TimestampRouter`` give those rows another topic (``routing.py``): the
  sink sees it, while offsets stay with the topic the record was read from;
- a transform or predicate named ``package.module:Class`` is the user's, in Python
  (``custom.py`` has the interface).

Stages run in order, each on the batch the ones before it left: a predicate sees the headers a
``DropHeaders`` before it removed, as it would in Connect. A row a transform refuses (Connect's
``DataException``) leaves the batch there, as a ``TransformFailure``: the runtime applies
``errors.tolerance`` to it as Connect does to a record its TRANSFORMATION stage failed, and the
stages after it never see it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from daemon.config import transforms as tf
from daemon.connectors.records import RecordBatch
from daemon.connectors.transforms import (
    custom,
    fields,
    headers,
    reshape,
    routing,
    timestamps,
    typed,
)

#: Transforms ``fields.py`` applies (by class name without ``$Key``/``$Value``).
FIELD_TRANSFORMS = (tf.INSERT_FIELD, tf.REPLACE_FIELD, tf.MASK_FIELD, tf.CAST)
#: Each transform that changes rows (by class name without ``$Key``/``$Value``), and what
#: applies it: rows it refuses leave the batch as ``TransformFailure``s.
CHANGES = {
    **dict.fromkeys(FIELD_TRANSFORMS, fields.apply),
    **dict.fromkeys(reshape.RESHAPES, reshape.apply),
    **dict.fromkeys(tf.ROUTERS, routing.apply),
    tf.TIMESTAMP_CONVERTER: timestamps.apply,
    tf.HEADER_FROM: headers.header_from,
    tf.SET_SCHEMA_METADATA: typed.set_schema_metadata,
}


@dataclass(frozen=True)
class TransformFailure:
    """A record a transform refused: where it is, which transform, Connect's message."""

    topic: str
    partition: int
    offset: int
    alias: str
    cls: str
    message: str


@dataclass(frozen=True)
class Transformed:
    """The batch after the chain, and the records its transforms refused (not in it)."""

    batch: RecordBatch
    failures: tuple[TransformFailure, ...] = ()


#: A chain's Python transforms and predicates, made and configured (``load_plugins``), by
#: ``transforms.<alias>`` / ``predicates.<alias>``.
Plugins = Mapping[str, Any]


def load_plugins(chain: tf.Chain) -> dict[str, Any]:
    """The chain's Python transforms and predicates, each made and configured once (a task
    does this when it starts, as Connect makes a task's transforms)."""
    out: dict[str, Any] = {}
    for spec in chain.transforms:
        if tf.is_python_path(spec.cls):
            out[f"transforms.{spec.alias}"] = custom.load(spec.cls, spec.config)
        p = spec.predicate
        if p is not None and tf.is_python_path(p.cls) and f"predicates.{p.alias}" not in out:
            out[f"predicates.{p.alias}"] = custom.load(p.cls, p.config)
    return out


def predicate_mask(
    spec: tf.PredicateSpec, batch: RecordBatch, plugins: Plugins | None = None
) -> pa.BooleanArray:
    """Where ``spec`` holds, row by row."""
    table = batch.table
    n = table.num_rows
    if tf.is_python_path(spec.cls):
        made = (plugins or {}).get(f"predicates.{spec.alias}") or custom.load(spec.cls, spec.config)
        return custom.holds(spec.alias, made, batch)
    if spec.cls == tf.TOPIC_NAME_MATCHES:
        topics = batch.topics()  # a router before this stage changed it
        pattern = re.compile(tf.python_regex(spec.config["pattern"]))
        names = pc.unique(topics).to_pylist()
        matched = pa.array(
            [t for t in names if t is not None and pattern.fullmatch(t)], pa.string()
        )
        return pc.is_in(topics, value_set=matched)
    if spec.cls == tf.HAS_HEADER_KEY:
        headers = table.column("headers").combine_chunks()
        if headers.offsets[-1].as_py() == headers.offsets[0].as_py():  # no row has a header
            return pa.nulls(n, pa.bool_()).fill_null(False)
        offsets = pc.subtract(headers.offsets, headers.offsets[0])
        values = headers.values.slice(headers.offsets[0].as_py(), offsets[-1].as_py())
        named = pc.fill_null(pc.equal(pc.struct_field(values, [0]), spec.config["name"]), False)
        # Matches before each row's first header, and before the next row's: a row holds one
        # when the two differ (a cumulative count read at the list offsets, no loop).
        seen = pa.concat_arrays(
            [pa.array([0], pa.int64()), pc.cumulative_sum(named.cast(pa.int64()))]
        )
        before = pc.take(seen, offsets.slice(0, n))
        through = pc.take(seen, offsets.slice(1, n))
        return pc.fill_null(pc.greater(through, before), False)
    if spec.cls == tf.RECORD_IS_TOMBSTONE:
        if batch.value_columns is not None:
            if batch.tombstones is None:
                return pa.array([False] * n)
            return pc.fill_null(batch.tombstones, False)
        return pc.is_null(table.column("value")).combine_chunks()
    raise ValueError(f"{spec.cls} is not a predicate connectd applies")


def apply(chain: tf.Chain, batch: RecordBatch, plugins: Plugins | None = None) -> Transformed:
    """``batch`` after ``chain``, stage by stage (each predicate sees the batch as the stages
    before it left it): the rows Filter drops and the rows a transform refused are gone, ranges
    unchanged. ``plugins``: the chain's Python classes, made once (else made for this call)."""
    if plugins is None and any(tf.is_python_path(s.cls) for s in chain.transforms):
        plugins = load_plugins(chain)
    failures: list[TransformFailure] = []
    if batch.tombstones is not None and not pc.any(batch.tombstones).as_py():
        batch = replace(batch, tombstones=None)  # none: each stage skips its tombstone masks
    everything = pa.array([], pa.bool_())
    # Consecutive field transforms on value columns share one read of the columns and one
    # write (their stages change no row, topic, header or tombstone a predicate reads).
    pending: fields.Fields | None = None
    for spec in chain.transforms:
        n = len(batch)
        if n == 0:
            break
        base = spec.cls.rsplit("$", 1)[0]
        field_stage = base in FIELD_TRANSFORMS and fields.in_columns(spec, batch)
        reads_values = spec.predicate is not None and tf.is_python_path(spec.predicate.cls)
        if pending is not None and (reads_values or not field_stage):
            batch, pending = fields.write_fields(batch, pending), None
        if len(everything) != n:
            everything = pc.is_valid(batch.table.column("kafka_offset").combine_chunks())
        where = everything  # all rows
        if spec.predicate is not None:
            where = predicate_mask(spec.predicate, batch, plugins)
            if spec.negate:
                where = pc.invert(where)
        if spec.cls == tf.FILTER:
            batch = _keep(batch, pc.invert(where))
        elif spec.cls == tf.DROP_HEADERS:
            batch = headers.drop_headers(batch, tf.names(spec.config["headers"]), where)
        elif spec.cls == tf.INSERT_HEADER:
            literal = spec.config["value.literal"].encode()
            batch = headers.insert_header(batch, spec.config["header"], literal, where)
        else:
            if tf.is_python_path(spec.cls):
                made = (plugins or {})[f"transforms.{spec.alias}"]
                batch, errors = custom.run(spec.alias, made, batch, where)
            elif field_stage:
                pending = pending if pending is not None else fields.read_fields(batch)
                errors = fields.apply_to_fields(spec, batch, pending, where)
                if errors:
                    batch, pending = fields.write_fields(batch, pending), None
            elif base in CHANGES and spec.cls.endswith("$Key") and "key" in batch.schemas:
                batch, errors = typed.on_key(spec, batch, where, CHANGES[base])
            elif base in CHANGES:
                batch, errors = CHANGES[base](spec, batch, where)
            else:
                raise ValueError(f"{spec.cls} is not a transform connectd applies")
            if errors:
                failures += _failures(batch, spec, errors)
                batch = _keep(batch, _without_rows(len(batch), errors))
    if pending is not None:
        batch = fields.write_fields(batch, pending)
    return Transformed(batch, tuple(failures))


def _failures(
    batch: RecordBatch, spec: tf.TransformSpec, errors: dict[int, str]
) -> list[TransformFailure]:
    rows = sorted(errors)
    picked = batch.table.select(["kafka_topic", "kafka_partition", "kafka_offset"]).take(rows)
    return [
        TransformFailure(topic, partition, offset, spec.alias, spec.cls, errors[row])
        for row, topic, partition, offset in zip(
            rows,
            picked.column(0).to_pylist(),
            picked.column(1).to_pylist(),
            picked.column(2).to_pylist(),
            strict=True,
        )
    ]


def _without_rows(n: int, rows: Mapping[int, str]) -> pa.BooleanArray:
    keep = [True] * n
    for row in rows:
        keep[row] = False
    return pa.array(keep, pa.bool_())


def _keep(batch: RecordBatch, keep: pa.BooleanArray) -> RecordBatch:
    return batch if pc.all(keep).as_py() else batch.filter(keep)
