"""Connect's routers: ``RegexRouter`` and ``TimestampRouter`` give a record another topic.

The routed topic is kept beside the one the record was read from (``ROUTED_TOPIC``), as
Connect keeps a sink record's original topic (KIP-793): predicates, InsertField and the routers
after this one see the routed topic, as does the sink (a table sink writes it as
``kafka_topic`` and names a ``${topic}`` table by it), while offsets, commits, fencing and the
offsets API keep the topic, partition and offset the record was read at.

Column-wise: RegexRouter judges each distinct topic once (Python's ``re``; the whole topic must
match, ``$1``/``${name}`` in the replacement stand for groups); TimestampRouter formats each
distinct record time once (Java's ``SimpleDateFormat`` in UTC) and refuses a record without a
time, as Connect does.
"""

from __future__ import annotations

import re

import pyarrow as pa
import pyarrow.compute as pc

from daemon.config import transforms as tf
from daemon.config.dateformat import compile_pattern
from daemon.connectors.records import ROUTED_TOPIC, RecordBatch
from daemon.connectors.transforms.fields import Errors
from daemon.connectors.transforms.timestamps import format_ms


def regex_route(spec: tf.TransformSpec, topic: str) -> str:
    """RegexRouter's topic for ``topic`` (itself when the regex does not match all of it)."""
    m = re.fullmatch(tf.python_regex(spec.config["regex"]), topic)
    return topic if m is None else m.expand(tf.java_replacement(spec.config["replacement"]))


def apply(
    spec: tf.TransformSpec, batch: RecordBatch, where: pa.BooleanArray
) -> tuple[RecordBatch, Errors]:
    """``batch`` with the rows of ``where`` routed, and the rows refused (no timestamp)."""
    topics = batch.topics()
    errors: Errors = {}
    if spec.cls == tf.REGEX_ROUTER:
        names = [t for t in pc.unique(topics).to_pylist() if t is not None]
        routes = {t: regex_route(spec, t) for t in names}
        routed = pc.take(
            pa.array([routes[t] for t in names], pa.string()),
            pc.index_in(topics, value_set=pa.array(names, pa.string())),
        )
    else:
        stamps = pc.cast(batch.table.column("kafka_timestamp").combine_chunks(), pa.int64())
        missing = pc.and_(where, stamps.is_null())
        for i in pc.indices_nonzero(missing).to_pylist():
            errors[i] = "Timestamp missing on record"
        parts = compile_pattern(spec.config["timestamp.format"])
        times = [t for t in pc.unique(stamps).to_pylist() if t is not None]
        texts = pa.array([format_ms(parts, t) for t in times], pa.string())
        formatted = pc.take(texts, pc.index_in(stamps, value_set=pa.array(times, pa.int64())))
        routed = _joined(spec.config["topic.format"].split("${timestamp}"), formatted, topics)
    routed = pc.if_else(where, pc.fill_null(routed, topics), topics)
    table = batch.table
    if ROUTED_TOPIC in table.column_names:
        table = table.set_column(table.schema.get_field_index(ROUTED_TOPIC), ROUTED_TOPIC, routed)
    else:
        table = table.append_column(ROUTED_TOPIC, routed)
    return batch.with_table(table), errors


def _joined(pieces: list[str], formatted: pa.Array, topics: pa.Array) -> pa.Array:
    """``pieces`` (the topic format split at ``${timestamp}``) joined by ``formatted``, each
    piece's ``${topic}`` the row's topic."""
    out: pa.Array | None = None
    for piece in pieces:
        chunks = piece.split("${topic}")
        part: pa.Array = pa.array([chunks[0]] * len(topics), pa.string())
        for chunk in chunks[1:]:
            part = pc.binary_join_element_wise(part, topics, pa.scalar(chunk), "")
        out = part if out is None else pc.binary_join_element_wise(out, formatted, part, "")
    assert out is not None
    return out
