"""InsertField, ReplaceField, MaskField, Cast and a Filter on real parts (issue 30): a ParquetSink
connector reads JSON records (``mode=infer``: each field a column) from a real broker, in a
daemon with real executors, through a chain of five transforms:

- ``live``: Filter with RecordIsTombstone drops tombstones (first: MaskField refuses a null
  value, as Connect's does);
- ``stamp``: InsertField$Value adds the record's topic and offset;
- ``slim``: ReplaceField$Value drops ``internal`` and renames ``name`` to ``customer``;
- ``mask``: MaskField$Value overwrites ``ssn``;
- ``cast``: Cast$Value makes ``amount`` an int32 and ``code`` an int64 (a ``code`` that is not a
  number is refused, Connect's DataException at the TRANSFORMATION stage).

With ``errors.tolerance=all`` the refused records go to the dead-letter topic with Connect's
headers (stage TRANSFORMATION, the Cast class) and every other record's row is in the table as
Connect's chain leaves it; with ``none`` the task fails naming the transform and the record.
"""

from __future__ import annotations

import datetime as dt
import json
import uuid
from pathlib import Path

import pyarrow.dataset as ds
import pytest
from support.daemon import DaemonFactory, wait_until, worker_properties
from support.kafka import consume_all, delete_topic, produce
from support.kafka_fixtures import TopicFactory
from support.tables import committed

from daemon.connectors.records import TopicPartition
from daemon.runtime.model import State
from daemon.storage.commitlog import CommitLog

pytestmark = pytest.mark.integration

RECORDS = 40
CHAIN = {
    "transforms": "live,stamp,slim,mask,cast",
    "transforms.stamp.type": "InsertField$Value",
    "transforms.stamp.topic.field": "src",
    "transforms.stamp.offset.field": "off!",
    "transforms.slim.type": "org.apache.kafka.connect.transforms.ReplaceField$Value",
    "transforms.slim.exclude": "internal",
    "transforms.slim.renames": "name:customer",
    "transforms.mask.type": "MaskField$Value",
    "transforms.mask.fields": "ssn",
    "transforms.mask.replacement": "***-**-****",
    "transforms.cast.type": "Cast$Value",
    "transforms.cast.spec": "amount:int32,code:int64",
    "transforms.live.type": "Filter",
    "transforms.live.predicate": "tomb",
    "predicates": "tomb",
    "predicates.tomb.type": "RecordIsTombstone",
}


def value(i: int) -> bytes | None:
    """Record ``i``: a tombstone every 9th, a code that is no number every 7th."""
    if i % 9 == 4:
        return None
    code = f"x{i}" if i % 7 == 3 else str(1000 + i)
    doc = {"name": f"n{i}", "ssn": f"123-45-{i:04d}", "amount": i + 0.75, "code": code}
    return json.dumps(doc | {"internal": i}).encode()


def refused(i: int) -> bool:
    return value(i) is not None and i % 7 == 3


def kept(i: int) -> bool:
    return value(i) is not None and not refused(i)


def worker(kafka_bootstrap: str, state: Path) -> dict[str, str]:
    return worker_properties(
        kafka_bootstrap,
        state,
        **{
            "value.converter": "json",
            "value.converter.schemas.enable": "false",
            "value.converter.mode": "infer",
        },
    )


async def test_the_chain_writes_what_connect_would_and_refused_records_are_dead_letters(
    run_daemon: DaemonFactory, kafka_bootstrap: str, kafka_topic: TopicFactory, tmp_path: Path
) -> None:
    topic = await kafka_topic(partitions=1)
    dlq = f"dlq-{uuid.uuid4().hex[:8]}"
    await produce(kafka_bootstrap, topic, [(b"k%d" % i, value(i)) for i in range(RECORDS)])  # type: ignore[misc]
    table = tmp_path / "table"
    sink = {
        "name": "shaped",
        "connector.class": "ParquetSink",
        "topics": topic,
        "path": str(table),
        "flush.interval.ms": "500",
        "errors.tolerance": "all",
        "errors.log.enable": "true",
        "errors.deadletterqueue.topic.name": dlq,
        "errors.deadletterqueue.topic.replication.factor": "1",
        "errors.deadletterqueue.context.headers.enable": "true",
        **CHAIN,
    }
    try:
        await run_daemon(worker(kafka_bootstrap, tmp_path / "state"), connectors=[sink])
        await wait_until(lambda: committed(table) == RECORDS, 180, "every offset committed past")

        data = ds.dataset(table, format="parquet").to_table()
        names = set(data.column_names)
        assert {"customer", "ssn", "amount", "code", "src", "off"} <= names, names
        assert not {"name", "internal"} & names, names
        assert str(data.schema.field("amount").type) == "int32"
        assert str(data.schema.field("code").type) == "int64"
        rows = sorted(data.to_pylist(), key=lambda r: r["kafka_offset"])
        assert [r["kafka_offset"] for r in rows] == [i for i in range(RECORDS) if kept(i)]
        for r in rows:
            i = r["kafka_offset"]
            assert (r["customer"], r["ssn"]) == (f"n{i}", "***-**-****"), r
            assert (r["amount"], r["code"]) == (i, 1000 + i), r  # 0.75 truncated, as Java does
            assert (r["src"], r["off"]) == (topic, i), r

        letters = await consume_all(kafka_bootstrap, dlq, sum(map(refused, range(RECORDS))))
        assert [int(dict(x.headers)["__connect.errors.offset"]) for x in letters] == [
            i for i in range(RECORDS) if refused(i)
        ]
        for letter in letters:
            h = {k: v.decode() if v is not None else None for k, v in letter.headers}
            i = int(h["__connect.errors.offset"])
            assert (letter.key, letter.value) == (b"k%d" % i, value(i))  # as it came
            assert h["__connect.errors.stage"] == "TRANSFORMATION"
            assert h["__connect.errors.class.name"] == (
                "org.apache.kafka.connect.transforms.Cast$Value"
            )
            message = h["__connect.errors.exception.message"]
            assert f"transform 'cast' (Cast$Value): Value (x{i}) was out of range" in message
    finally:
        await delete_topic(kafka_bootstrap, dlq)


async def test_with_tolerance_none_a_refused_record_fails_the_task_naming_it(
    run_daemon: DaemonFactory, kafka_bootstrap: str, kafka_topic: TopicFactory, tmp_path: Path
) -> None:
    topic = await kafka_topic(partitions=1)
    await produce(kafka_bootstrap, topic, [(b"k", value(i)) for i in range(5)])  # type: ignore[misc]
    d = await run_daemon(worker(kafka_bootstrap, tmp_path / "state"))
    assert d.herder is not None
    config = {"connector.class": "EchoSink", "topics": topic, **CHAIN}
    await d.herder.create_connector("strict", config | {"errors.restart.enabled": "false"})

    def failed() -> str | None:
        (task,) = d.herder.connector_status("strict").tasks  # type: ignore[union-attr]
        return task.trace if task.state is State.FAILED else None

    trace = await wait_until(failed, 120, "the task FAILED")
    assert f"topic {topic} partition 0 offset 3" in trace, trace
    assert "refused by a transform" in trace and "transform 'cast' (Cast$Value)" in trace, trace


async def test_nested_json_lands_flattened_into_typed_columns(
    run_daemon: DaemonFactory, kafka_bootstrap: str, kafka_topic: TopicFactory, tmp_path: Path
) -> None:
    """Flatten$Value turns each nested map's leaves into typed columns of the table; two
    TimestampConverters make a Unix time a timestamp column and a text date a date column;
    ValueToKey makes the key from the value's id; InsertHeader marks every row."""
    topic = await kafka_topic(partitions=1)
    docs = [
        {
            "id": i,
            "addr": {"city": f"c{i}", "geo": {"lat": i + 0.5, "tags": ["a"]}},
            "at": 1_700_000_000_000 + i,
            "day": f"0{i + 1}/03/2024",
        }
        for i in range(10)
    ]
    await produce(kafka_bootstrap, topic, [(b"k", json.dumps(d).encode()) for d in docs])
    table = tmp_path / "table"
    sink = {
        "name": "flat",
        "connector.class": "ParquetSink",
        "topics": topic,
        "path": str(table),
        "flush.interval.ms": "500",
        "transforms": "flat,at,day,key,mark",
        "transforms.at.type": "TimestampConverter$Value",
        "transforms.at.field": "at",
        "transforms.at.target.type": "Timestamp",
        "transforms.day.type": "TimestampConverter$Value",
        "transforms.day.field": "day",
        "transforms.day.target.type": "Date",
        "transforms.day.format": "dd/MM/yyyy",
        "transforms.flat.type": "Flatten$Value",
        "transforms.flat.delimiter": "_",
        "transforms.key.type": "ValueToKey",
        "transforms.key.fields": "id",
        "transforms.mark.type": "InsertHeader",
        "transforms.mark.header": "via",
        "transforms.mark.value.literal": "connectd",
    }
    await run_daemon(worker(kafka_bootstrap, tmp_path / "state"), connectors=[sink])
    await wait_until(lambda: committed(table) == len(docs), 180, "every offset committed")

    data = ds.dataset(table, format="parquet").to_table()
    types = {f.name: str(f.type) for f in data.schema}
    assert types["addr_city"] == "string" and types["addr_geo_lat"] == "double", types
    assert "addr" not in types, types
    assert types["at"] == types["kafka_timestamp"] and types["day"] == "date32[day]", types
    rows = sorted(data.to_pylist(), key=lambda r: r["kafka_offset"])
    assert [(r["id"], r["addr_city"], r["addr_geo_lat"]) for r in rows] == [
        (i, f"c{i}", i + 0.5) for i in range(10)
    ]
    assert [json.loads(r["addr_geo_tags"]) for r in rows] == [["a"]] * 10  # a list: JSON text
    assert [int(r["at"].timestamp() * 1000) for r in rows] == [d["at"] for d in docs]
    assert [r["day"] for r in rows] == [dt.date(2024, 3, i + 1) for i in range(10)]
    assert [json.loads(r["key"]) for r in rows] == [{"id": i} for i in range(10)]
    assert all(r["headers"] == [{"key": "via", "value": b"connectd"}] for r in rows), rows[0]


async def test_a_python_transform_and_predicate_run_in_the_chain(
    run_daemon: DaemonFactory, kafka_bootstrap: str, kafka_topic: TopicFactory, tmp_path: Path
) -> None:
    """``transforms.<alias>.type=module:Class`` (tests/support/custom_transforms.py, the example
    of docs/connectors.md): Upper upper-cases the names at even offsets and refuses "refuse";
    a Filter with the Python predicate drops the odd offsets after it."""
    topic = await kafka_topic(partitions=1)
    names = ["ann", "bob", "refuse", "dee", "eve", "fay"]
    await produce(kafka_bootstrap, topic, [(b"k", json.dumps({"name": n}).encode()) for n in names])
    table = tmp_path / "table"
    sink = {
        "name": "python",
        "connector.class": "ParquetSink",
        "topics": topic,
        "path": str(table),
        "flush.interval.ms": "500",
        "errors.tolerance": "all",
        "transforms": "up,odd",
        "transforms.up.type": "support.custom_transforms:Upper",
        "transforms.up.field": "name",
        "transforms.up.predicate": "even",
        "transforms.odd.type": "Filter",
        "transforms.odd.predicate": "even",
        "transforms.odd.negate": "true",
        "predicates": "even",
        "predicates.even.type": "support.custom_transforms:EvenOffsets",
    }
    await run_daemon(worker(kafka_bootstrap, tmp_path / "state"), connectors=[sink])
    await wait_until(lambda: committed(table) == len(names), 180, "every offset committed")
    rows = sorted(
        ds.dataset(table, format="parquet").to_table().to_pylist(), key=lambda r: r["kafka_offset"]
    )
    assert [(r["kafka_offset"], r["name"]) for r in rows] == [(0, "ANN"), (4, "EVE")]


async def test_routed_records_land_in_the_routed_topics_tables_committed_by_their_own_offsets(
    run_daemon: DaemonFactory, kafka_bootstrap: str, kafka_topic: TopicFactory, tmp_path: Path
) -> None:
    """RegexRouter under a ``${topic}`` path: each topic's records land in the table named by
    its routed topic, whose ``kafka_topic`` column holds the routed topic, while the table's
    commit log covers the offsets of the topic they were read from. TimestampRouter under a
    fixed path: one table, each row's ``kafka_topic`` the topic and the record's day."""
    first, second = await kafka_topic(partitions=1), await kafka_topic(partitions=1)
    for topic in (first, second):
        await produce(kafka_bootstrap, topic, [(b"k", b'{"n": %d}' % i) for i in range(5)])
    tables = tmp_path / "tables"
    routed = {
        "name": "routed",
        "connector.class": "ParquetSink",
        "topics": f"{first},{second}",
        "path": str(tables / "${topic}"),
        "flush.interval.ms": "500",
        "transforms": "strip",
        "transforms.strip.type": "RegexRouter",
        "transforms.strip.regex": "t-(.*)-([0-9a-f]+)",
        "transforms.strip.replacement": "r_$2",
    }
    daily = tmp_path / "daily"
    by_day = {
        "name": "daily",
        "connector.class": "ParquetSink",
        "topics": first,
        "path": str(daily),
        "flush.interval.ms": "500",
        "transforms": "day",
        "transforms.day.type": "TimestampRouter",
        "transforms.day.topic.format": "${topic}@${timestamp}",
        "transforms.day.timestamp.format": "yyyy",
    }
    await run_daemon(worker(kafka_bootstrap, tmp_path / "state"), connectors=[routed, by_day])
    names = {t: "r_" + t.rsplit("-", 1)[1] for t in (first, second)}
    for topic, name in names.items():
        table = tables / name
        await wait_until(lambda t=table: committed(t) == 5, 180, f"{name} committed")
        data = ds.dataset(table, format="parquet").to_table().to_pylist()
        assert sorted((r["kafka_topic"], r["kafka_offset"]) for r in data) == [
            (name, i) for i in range(5)
        ]
        log = CommitLog(table).open_read_only()
        assert log.committed_offsets() == {TopicPartition(topic, 0): 5}  # the topic read from
    await wait_until(lambda: committed(daily) == 5, 180, "the daily table committed")
    rows = ds.dataset(daily, format="parquet").to_table().to_pylist()
    year = dt.datetime.now(dt.UTC).year
    assert {r["kafka_topic"] for r in rows} in ({f"{first}@{year}"}, {f"{first}@{year - 1}"})
