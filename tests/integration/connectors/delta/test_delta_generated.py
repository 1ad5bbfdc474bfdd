"""DeltaSink's time partitions as Delta generated columns, on real Spark with the real Delta
jars: a new table declares ``partition.by``'s transforms ``GENERATED ALWAYS AS`` expressions
that give, in any session time zone, exactly what connectd computes (``timeparts``): Delta
checks connectd's values against them on every write (a write in a far-off session zone
passes), and a plain Spark append that leaves them out gets the same values from Delta. Each
source type a time comes in: a timestamp, epoch milliseconds, a date, a wall time."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from support.delta import rows_with_deltalake
from support.spark import ThreadedPool

from daemon.connectors.tables import timeparts
from daemon.connectors.tables.jobs import raise_for
from daemon.errors import WriteFailed

pytestmark = pytest.mark.integration

S = "support.delta"
UTC = dt.UTC
#: Times around day and hour boundaries, before 1970 and far ahead, and a null.
TIMES = [
    dt.datetime(2026, 11, 29, 23, 59, 59, 999_000, UTC),
    dt.datetime(2026, 11, 30, 0, 0, tzinfo=UTC),
    dt.datetime(2026, 12, 31, 23, 30, tzinfo=UTC),
    dt.datetime(1969, 12, 31, 23, 59, 59, tzinfo=UTC),
    dt.datetime(1969, 12, 31, 23, 59, 59, 500_000, UTC),  # floored, not truncated to 1970
    dt.datetime(1965, 3, 1, 23, 59, 59, 999_000, UTC),
    dt.datetime(1965, 3, 1, 0, 30, tzinfo=UTC),
    dt.datetime(2099, 7, 4, 13, 0, tzinfo=UTC),
    None,
]
ZONES = ["Pacific/Chatham", "America/Los_Angeles"]  # +13:45 in summer, -08:00 in winter


def _records(offsets: range) -> pa.Table:
    n = len(offsets)
    times = [TIMES[i % len(TIMES)] for i in offsets]
    millis = [None if t is None else int(t.timestamp() * 1000) for t in times]
    return pa.table(
        {
            "kafka_topic": ["t"] * n,
            "kafka_partition": pa.array([0] * n, pa.int32()),
            "kafka_offset": pa.array(offsets, pa.int64()),
            "kafka_timestamp": pa.array(millis, pa.timestamp("ms", "UTC")),
            "at_ms": pa.array(millis, pa.int64()),
            "on": pa.array([None if t is None else t.date() for t in times], pa.date32()),
            "wall": pa.array(
                [None if t is None else t.replace(tzinfo=None) for t in times], pa.timestamp("us")
            ),
        }
    )


LAYOUTS = {
    "timestamp": [
        "year(kafka_timestamp)", "month(kafka_timestamp)", "day(kafka_timestamp)",
        "hour(kafka_timestamp)",
    ],
    "others": ["day(at_ms)", "hour(wall)", "day(wall)", "month(on)", "day(on)", "hour(on)"],
}  # fmt: skip


def _schema_fields(table: Path) -> dict[str, dict[str, Any]]:
    first = (table / "_delta_log" / "00000000000000000000.json").read_text().splitlines()
    meta = next(json.loads(line)["metaData"] for line in first if '"metaData"' in line)
    return {f["name"]: f for f in json.loads(meta["schemaString"])["fields"]}


@pytest.mark.spark_line
@pytest.mark.parametrize("layout", list(LAYOUTS), ids=list(LAYOUTS))
async def test_generated_time_columns_match_connectd_in_any_session_zone(
    layout: str, delta_pool: ThreadedPool, tmp_path: Path
) -> None:
    partition_by, columns = timeparts.split_partition_by(LAYOUTS[layout])
    generated = {c.name: [c.transform, c.source] for c in columns}
    path = str(tmp_path / "t")
    first = _records(range(14))
    batch = timeparts.derived(first, columns, now_ms=0)

    async def commit(table: pa.Table, offsets: range, state: dict[str, int], zone: str) -> Any:
        return raise_for(
            await delta_pool.run(
                "delta-0",
                f"{S}:in_zone",
                table,
                timeout=180,
                kwargs={
                    "zone": zone,
                    "job": "commit",
                    "path": path,
                    "connector": "c",
                    "task": 0,
                    "epoch": 1,
                    "ranges": [["t", 0, offsets.start, offsets.stop]],
                    "state": state,
                    "partition_by": list(partition_by),
                    "generated": generated,
                },
            )
        )

    done = await commit(batch, range(0, 14), {}, ZONES[0])  # creates the table, then writes
    # Connectd's values pass Delta's check in another session zone too.
    second = timeparts.derived(_records(range(14, 21)), columns, now_ms=0)
    second_state = (await commit(second, range(14, 21), done["state"], ZONES[1]))["state"]

    fields = _schema_fields(Path(path))
    expressions = {n: fields[n]["metadata"].get("delta.generationExpression") for n in generated}
    assert all(expressions.values()), expressions
    for name, (transform, source) in generated.items():
        logged = fields[source]["type"]  # Delta's names: long, integer, timestamp, date ...
        kind = {"long": "bigint", "integer": "int"}.get(logged, logged)
        assert expressions[name] == timeparts.generation_expression(transform, source, kind)

    # A value that is not the expression's is refused by Delta, nothing written.
    wrong = timeparts.derived(_records(range(21, 22)), columns, now_ms=0)
    name = next(iter(generated))
    bad = wrong.set_column(
        wrong.schema.get_field_index(name), name, pa.nulls(1, wrong.schema.field(name).type)
    )
    with pytest.raises(WriteFailed, match="CHECK constraint Generated Column"):
        await commit(bad, range(21, 22), done["state"] | second_state, ZONES[1])

    # A writer that leaves the generated columns out: Delta computes them, in its own zone.
    plain = _records(range(21, 35))
    for zone in ZONES:
        out = await delta_pool.run(
            "delta-0",
            f"{S}:append_leaving_out",
            plain,
            timeout=180,
            kwargs={"path": path, "columns": list(generated), "zone": zone},
        )
        assert raise_for(out) == {"rows": 14}

    names = ["kafka_offset", *generated]
    got = rows_with_deltalake(Path(path), names).to_pylist()
    assert len(got) == 21 + 2 * 14
    expected = timeparts.derived(_records(range(35)), columns, now_ms=0).select(names).to_pylist()
    want = {r["kafka_offset"]: r for r in expected}
    for row in got:
        assert row == want[row["kafka_offset"]], row
    assert {r["kafka_offset"] for r in got} == set(range(35))
