"""One poll's converted columns assembled into a ``RecordBatch``, bad records set aside.

``convert_poll`` is the whole conversion of a poll, given its key and value converters; a task's
pipeline (``daemon.runtime.incarnation.pipeline``) holds the pair and calls it, and
``daemon.connectors.testing.sample_batch`` builds batches with it as the runtime does.
"""

from __future__ import annotations

import codecs
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from itertools import accumulate, chain

import pyarrow as pa
import pyarrow.compute as pc

from daemon.connectors.converters.base import Converter, Side
from daemon.connectors.converters.text import decode_text
from daemon.connectors.records import BadRecord, OffsetRange, RawBatch, RecordBatch, record_spans
from daemon.errors import ConfigError

HEADERS_TYPE = pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())]))
#: The ``headers`` column under a header converter that reads text.
TEXT_HEADERS_TYPE = pa.list_(pa.struct([("key", pa.string()), ("value", pa.string())]))
TIMESTAMP_TYPE = pa.timestamp("ms", tz="UTC")


@dataclass(frozen=True, slots=True)
class ConversionResult:
    """The good records as a batch, and the bad ones (not in ``batch.table``)."""

    batch: RecordBatch
    bad: list[BadRecord]


def convert_poll(
    raw: RawBatch,
    key: Converter,
    value: Converter,
    ranges: Sequence[OffsetRange] | None = None,
) -> ConversionResult:
    """Convert one poll. Never raises for a bad record: bad records are returned in ``bad``
    and left out of the table, while ``batch.ranges`` still covers them. ``ranges``: the
    poll's offset ranges when the caller knows them (saves a group-by over the records)."""
    keys = key.convert(raw.keys)
    values = value.convert(raw.values)
    coords = coordinate_table(raw)
    columns = {name: coords.column(name) for name in coords.column_names}
    columns.update(keys.columns)
    columns.update(values.columns)
    columns["headers"] = headers_array(raw.headers, len(raw))
    table = pa.table(columns)
    tombstones = values.tombstones
    stamp_types = None
    if raw.timestamp_types is not None:
        stamp_types = pa.array(raw.timestamp_types, pa.int8())
    failed = sorted(keys.errors.keys() | values.errors.keys())
    bad = [_bad_record(raw, i, keys.errors.get(i), values.errors.get(i)) for i in failed]
    if failed:
        drop = [False] * len(raw)
        for i in failed:
            drop[i] = True
        keep = pc.invert(pa.array(drop, pa.bool_()))
        table = table.filter(keep)
        tombstones = tombstones.filter(keep) if tombstones is not None else None
        stamp_types = stamp_types.filter(keep) if stamp_types is not None else None
    batch = RecordBatch(
        table,
        tuple(sorted(ranges))
        if ranges is not None
        else tuple(sorted(record_spans(coords).values())),
        value_columns=values.value_columns,
        json_columns=keys.json_columns | values.json_columns,
        tombstones=tombstones,
        timestamp_types=stamp_types,
        schemas=frozenset(s for s, c in (("key", keys), ("value", values)) if c.schema),
    )
    return ConversionResult(batch, bad)


def _bad_record(
    raw: RawBatch, i: int, key_error: Exception | None, value_error: Exception | None
) -> BadRecord:
    stage: Side = "key" if key_error is not None else "value"
    error = key_error if key_error is not None else value_error
    assert error is not None
    cls = type(error)
    return BadRecord(
        raw.topics[i],
        raw.partitions[i],
        raw.offsets[i],
        f"{stage} conversion failed: {error}",
        f"{cls.__module__}.{cls.__qualname__}",
        stage,
        raw.keys[i],
        raw.values[i],
        tuple(raw.headers[i]) if raw.headers is not None else (),
    )


def coordinate_table(raw: RawBatch) -> pa.Table:
    """The four ``kafka_*`` columns of a raw batch."""
    stamps = pa.array(raw.timestamps, pa.int64())
    stamps = pc.if_else(pc.less(stamps, 0), pa.scalar(None, pa.int64()), stamps)
    return pa.table(
        {
            "kafka_topic": pa.array(raw.topics, pa.string()),
            "kafka_partition": pa.array(raw.partitions, pa.int32()),
            "kafka_offset": pa.array(raw.offsets, pa.int64()),
            "kafka_timestamp": stamps.cast(TIMESTAMP_TYPE),
        }
    )


def header_encoding(kind: str | None, options: Mapping[str, str]) -> str | None:
    """The encoding the ``headers`` column's text is decoded with under ``header.converter``
    ``kind`` (``simple``, ``string``, ``bytearray``: ``daemon.config.values.HeaderConverter``;
    None for the bytes as they came, connectd's default); ``ConfigError`` naming the key for
    a setting it does not take."""
    text = kind in ("simple", "string")
    takes = {"converter.type", *(("converter.encoding",) if kind == "string" else ())}
    for key in sorted(options):
        if key not in takes:
            raise ConfigError(
                f"header.converter.{key}: not a setting of the header converter ({kind or 'none'}"
                f"); it takes {', '.join(sorted(takes))}"
            )
    name = options.get("converter.encoding", "UTF-8")
    try:
        encoding = codecs.lookup(name).name
    except LookupError:
        raise ConfigError(
            f"header.converter.converter.encoding: unknown encoding {name!r}"
        ) from None
    return encoding if text else None


def text_headers(column: pa.Array, encoding: str) -> pa.Array:
    """A ``headers`` column with each value's bytes decoded (``HEADERS_TYPE`` with ``value``
    a string; bytes invalid in the encoding become U+FFFD, as Connect's StringConverter reads
    them; a null value stays null)."""
    return headers_as_text(
        column, lambda values: decode_text(values, encoding, errors="replace")[0]
    )


def headers_as_text(
    column: pa.Array, texts: Callable[[list[bytes | None]], pa.Array | list[str | None]]
) -> pa.Array:
    """A ``headers`` column (``HEADERS_TYPE``) as ``TEXT_HEADERS_TYPE``: every header's value
    (bytes, or None) made text by ``texts``, in one call for the column."""
    if isinstance(column, pa.ChunkedArray):
        column = column.combine_chunks()
    items = column.values
    values = texts(items.field("value").to_pylist())
    if not isinstance(values, pa.Array):
        values = pa.array(values, pa.string())
    entries = pa.StructArray.from_arrays([items.field("key"), values], names=["key", "value"])
    return pa.ListArray.from_arrays(
        column.offsets, entries, type=TEXT_HEADERS_TYPE, mask=column.is_null()
    )


_NO_HEADER_ITEMS = pa.StructArray.from_arrays(
    [pa.array([], pa.string()), pa.array([], pa.binary())], names=["key", "value"]
)


def headers_array(headers: Sequence[Sequence[tuple[str, bytes | None]]] | None, n: int) -> pa.Array:
    """``list<struct<key, value>>`` built from flattened lists, not record by record."""
    if headers is None or not any(headers):  # no record has a header (any: in C)
        return pa.ListArray.from_arrays(
            pa.array([0] * (n + 1), pa.int32()), _NO_HEADER_ITEMS, type=HEADERS_TYPE
        )
    offsets = pa.array(list(accumulate(map(len, headers), initial=0)), pa.int32())
    flat = list(chain.from_iterable(headers))
    keys = pa.array([k for k, _ in flat], pa.string())
    items = pa.StructArray.from_arrays(
        [keys, pa.array([v for _, v in flat], pa.binary())], names=["key", "value"]
    )
    return pa.ListArray.from_arrays(offsets, items, type=HEADERS_TYPE)
