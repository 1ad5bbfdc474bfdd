"""Time partitioning (daemon.connectors.tables.timeparts): partition.by's transforms, Confluent's
TimeBasedPartitioner keys, and how the sinks' settings take them. The tables themselves are in
tests/integration/connectors/test_time_partitions.py."""

from __future__ import annotations

import datetime as dt
import zoneinfo

import pyarrow as pa
import pytest

from daemon.connectors.iceberg.settings import IcebergSettings
from daemon.connectors.parquet.settings import ParquetSettings
from daemon.connectors.parquet.sink import ParquetSinkConnector
from daemon.connectors.tables import timeparts as tp

HOURLY = tp.CONFLUENT + "HourlyPartitioner"
#: 2026-03-08 06:30 UTC: 01:30 in New York, half an hour before its clocks go forward.
DST_EVE = int(dt.datetime(2026, 3, 8, 6, 30, tzinfo=dt.UTC).timestamp() * 1000)


def _table(**columns: pa.Array) -> pa.Table:
    return pa.table(columns)


def test_transforms_compute_utc_columns_named_as_iceberg_names_them() -> None:
    names, columns = tp.split_partition_by(
        ["kafka_partition", "year(ts)", "months(ts)", "day(ts)", "hour(ts)"]
    )
    assert names == ("kafka_partition", "ts_year", "ts_month", "ts_day", "ts_hour")
    stamps = pa.array([DST_EVE, None], pa.timestamp("ms", "UTC"))
    out = tp.derived(_table(ts=stamps), columns, 0).to_pylist()
    assert out[0] | {"ts": None} == {
        "ts": None,
        "ts_year": 2026,
        "ts_month": "2026-03",
        "ts_day": dt.date(2026, 3, 8),
        "ts_hour": "2026-03-08-06",
    }
    assert out[1] == dict.fromkeys(out[1])  # a null time: null partition values


@pytest.mark.parametrize(
    "column",
    [
        pa.array([DST_EVE], pa.int64()),  # epoch milliseconds
        pa.array([DST_EVE * 1000], pa.timestamp("us")),  # naive: taken as UTC
        pa.array([DST_EVE // 1000], pa.timestamp("s", "Asia/Tokyo")),
    ],
)
def test_a_time_may_be_epoch_millis_or_any_timestamp(column: pa.Array) -> None:
    _, columns = tp.split_partition_by(["hour(ts)"])
    assert tp.derived(_table(ts=column), columns, 0).column("ts_hour").to_pylist() == [
        "2026-03-08-06"
    ]


def test_confluents_hourly_layout_floors_in_the_time_zone_across_a_dst_change() -> None:
    partitioner = tp.Partitioner(
        cls=HOURLY, timezone="America/New_York", locale="en-US", extractor="Record"
    )
    columns = partitioner.columns()
    assert [c.name for c in columns] == ["year", "month", "day", "hour"]
    stamps = [DST_EVE, DST_EVE + 3_600_000]  # 01:30 EST, then 03:30 EDT (02:xx never was)
    table = _table(kafka_timestamp=pa.array(stamps, pa.timestamp("ms", "UTC")))
    out = tp.derived(table, columns, 0).drop_columns(["kafka_timestamp"]).to_pylist()
    zone = zoneinfo.ZoneInfo("America/New_York")
    for stamp, row in zip(stamps, out, strict=True):
        local = dt.datetime.fromtimestamp(stamp / 1000, zone)
        assert row == {
            "year": f"{local:%Y}",
            "month": f"{local:%m}",
            "day": f"{local:%d}",
            "hour": f"{local:%H}",
        }
    assert [r["hour"] for r in out] == ["01", "03"]


def test_a_time_based_layout_with_its_own_duration_pattern_and_field() -> None:
    partitioner = tp.Partitioner(
        cls=tp.TIME_BASED,
        path_format="'dt'=YYYY-MM-dd/'slot'='h'HH",
        duration_ms=6 * 3_600_000,
        timezone="UTC",
        locale="en",
        extractor="RecordField",
        field="created",
    )
    table = _table(created=pa.array([DST_EVE, DST_EVE + 6 * 3_600_000], pa.int64()))
    out = tp.derived(table, partitioner.columns(), 0).to_pylist()
    assert [(r["dt"], r["slot"]) for r in out] == [("2026-03-08", "h06"), ("2026-03-08", "h12")]


def test_wallclock_places_every_record_at_the_buffering_time() -> None:
    partitioner = tp.Partitioner(cls=tp.CONFLUENT + "DailyPartitioner", timezone="UTC", locale="en")
    out = tp.derived(_table(v=pa.array([1, 2])), partitioner.columns(), DST_EVE)
    assert out.column("day").to_pylist() == ["08", "08"]


@pytest.mark.parametrize(
    ("partitioner", "key", "why"),
    [
        (tp.Partitioner(path_format="'y'=YYYY"), "path.format", "partitioner.class"),
        (tp.Partitioner(cls=tp.TIME_BASED, timezone="UTC", locale="en"), "path.format", "needs"),
        (
            tp.Partitioner(cls=tp.TIME_BASED, path_format="'y'=YYYY", timezone="UTC", locale="e"),
            "partition.duration.ms",
            "duration",
        ),
        (tp.Partitioner(cls=HOURLY, locale="en"), "timezone", "needs a timezone"),
        (tp.Partitioner(cls=HOURLY, timezone="UTC"), "locale", "needs a locale"),
        (tp.Partitioner(cls=HOURLY, timezone="Mars/Base", locale="en"), "timezone", "not a time"),
        (tp.Partitioner(cls="a.B", timezone="UTC", locale="en"), "partitioner.class", "a.B"),
        (
            tp.Partitioner(cls=tp.CONFLUENT + "FieldPartitioner"),
            "partitioner.class",
            "partition.by",
        ),
        (
            tp.Partitioner(
                cls=tp.TIME_BASED, path_format="YYYY/MM", duration_ms=1, timezone="UTC", locale="e"
            ),
            "path.format",
            "'name'=pattern",
        ),
        (
            tp.Partitioner(
                cls=tp.TIME_BASED, path_format="'m'=MMM", duration_ms=1, timezone="UTC", locale="e"
            ),
            "path.format",
            "'MMM' is not a pattern",
        ),
        (
            tp.Partitioner(cls=HOURLY, timezone="UTC", locale="en", extractor="com.x.Mine"),
            "timestamp.extractor",
            "custom extractor",
        ),
    ],
)
def test_partitioner_keys_that_cannot_be_honoured_are_named(
    partitioner: tp.Partitioner, key: str, why: str
) -> None:
    with pytest.raises(tp.TimePartitionError) as caught:
        partitioner.columns()
    assert caught.value.key == key and why in caught.value.reason


def test_a_missing_or_untimely_source_column_is_named() -> None:
    _, columns = tp.split_partition_by(["day(ts)"])
    with pytest.raises(tp.TimePartitionError, match="needs the column ts"):
        tp.derived(_table(v=pa.array([1])), columns, 0)
    with pytest.raises(tp.TimePartitionError, match="holds string"):
        tp.derived(_table(ts=pa.array(["2026"])), columns, 0)
    with pytest.raises(tp.TimePartitionError, match="would replace"):
        tp.derived(_table(ts=pa.array([1]), ts_day=pa.array([1])), columns, 0)


def test_the_sinks_settings_take_both_and_check_them() -> None:
    config = {
        "path": "/t",
        "partition.by": "kafka_partition,day(kafka_timestamp)",
        "partitioner.class": HOURLY,
        "timezone": "UTC",
        "locale": "en",
    }
    table = ParquetSettings.from_config(config).table
    assert table.partition_by == (
        "kafka_partition",
        "kafka_timestamp_day",
        "year",
        "month",
        "day",
        "hour",
    )
    assert [c.name for c in table.time_columns][:1] == ["kafka_timestamp_day"]
    found = {p.key: str(p) for p in ParquetSinkConnector().validate(config) if p.is_error}
    assert found == {}
    bad = {**config, "partition.by": "week(kafka_timestamp)"}
    found = {p.key: str(p) for p in ParquetSinkConnector().validate(bad) if p.is_error}
    assert "partition.by" in found and "not a time transform" in found["partition.by"]
    bad = {**config, "timezone": ""}
    found = {p.key: str(p) for p in ParquetSinkConnector().validate(bad) if p.is_error}
    assert found == {"timezone": "timezone: time-based partitioning needs a timezone"}


def test_delta_declares_the_transforms_columns_generated_and_the_layouts_not() -> None:
    table = ParquetSettings.from_config(
        {
            "path": "/t",
            "partition.by": "day(kafka_timestamp),hour(at),kafka_partition",
            "partitioner.class": HOURLY,
            "timezone": "UTC",
            "locale": "en",
        }
    ).table
    assert table.generated == {
        "kafka_timestamp_day": ["day", "kafka_timestamp"],
        "at_hour": ["hour", "at"],
    }  # path.format's columns (year, month, ...) are in a time zone: plain columns
    iceberg = IcebergSettings.from_config(
        {"table": "db.t", "catalog.warehouse": "/w", "partition.by": "day(kafka_timestamp)"}
    )
    assert iceberg.table.generated == {}  # hidden


@pytest.mark.parametrize("kind", ["timestamp", "timestamp_ntz", "bigint", "int", "date"])
def test_generation_expressions_use_no_session_time_zone(kind: str) -> None:
    for transform in ("year", "month", "day", "hour"):
        found = tp.generation_expression(transform, "we`ird", kind)
        assert found is not None and "`we``ird`" in found
        # Spark evaluates these in the session's zone for a timestamp (or a date): never used.
        zoned = ["date_format", "to_date", "from_utc", "unix_timestamp", "AS TIMESTAMP"]
        zoned += [] if kind == "timestamp_ntz" else ["AS DATE"]  # a wall time's date is fixed
        for name in zoned:
            assert name not in found, (transform, found)
    assert tp.generation_expression("day", "d", "date") == "`d`"


def test_no_generation_expression_for_other_types_or_transforms() -> None:
    assert tp.generation_expression("day", "s", "string") is None
    assert tp.generation_expression("week", "t", "timestamp") is None


def test_iceberg_keeps_transforms_hidden_and_computes_only_the_layouts_columns() -> None:
    settings = IcebergSettings.from_config(
        {
            "table": "db.t",
            "catalog.warehouse": "/w",
            "partition.by": "hour(kafka_timestamp),kafka_partition",
        }
    )
    assert settings.table.partition_by == ("hour(kafka_timestamp)", "kafka_partition")
    assert settings.table.time_columns == ()
    assert tp.transform_of("hour(kafka_timestamp)") == ("hour", "kafka_timestamp")
    assert tp.transform_of("kafka_partition") is None


def test_microseconds_and_batches_without_any_time_are_taken() -> None:
    _, columns = tp.split_partition_by(["hour(ts)"])
    micros = pa.array([DST_EVE * 1000 + 999, None], pa.timestamp("us", "UTC"))
    hours = tp.derived(_table(ts=micros), columns, 0).column("ts_hour").to_pylist()
    assert hours == ["2026-03-08-06", None]  # truncated to milliseconds, never refused
    empty = tp.derived(_table(ts=pa.nulls(2)), columns, 0).column("ts_hour")
    assert empty.to_pylist() == [None, None] and empty.type == pa.string()


def test_joda_literals_and_the_week_year() -> None:
    assert tp._strftime("'it''s'-xxxx''", "s") == "it's-%G'"
    assert tp._strftime("YYYY'%'MM", "s") == "%Y%%%m"


def test_a_formats_own_transforms_take_timestamps_and_dates_only() -> None:
    schema = pa.schema([("ts", pa.timestamp("ms", "UTC")), ("d", pa.date32()), ("n", pa.int64())])
    tp.check_hidden(["day(ts)", "hour(ts)", "month(d)", "kafka_partition"], schema)
    with pytest.raises(tp.TimePartitionError, match="n holds int64"):
        tp.check_hidden(["day(n)"], schema)
    with pytest.raises(tp.TimePartitionError, match="takes a timestamp column; d holds date32"):
        tp.check_hidden(["hour(d)"], schema)
