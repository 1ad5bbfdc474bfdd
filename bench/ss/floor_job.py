"""The no-Spark floor (issue 32): the bench's JSON records through the least a Python pipeline
does, in one process on one event loop, as a reference for connectd's cost per record.

aiokafka reads every partition of the topic (the bench's ``PARTITIONS``) from its start to
the end offsets read at launch; each 50,000 values (connectd's flush in this bench) are parsed
by pyarrow into the bench's typed columns, given their partition and offset, and written as one
snappy Parquet file (renamed into place once whole). Nothing else: no commit log and so no
exactly-once, no converter checks, no dead-letter handling, no executor, no REST API, no
status. It exits 0 once every partition is read to its end.

    python bench/ss/floor_job.py --bootstrap 127.0.0.1:9092 --topic T --out DIR
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from pathlib import Path

import pyarrow as pa  # type: ignore[import-untyped,unused-ignore]
import pyarrow.json as pj  # type: ignore[import-untyped,unused-ignore]
import pyarrow.parquet as pq  # type: ignore[import-untyped,unused-ignore]
from aiokafka import AIOKafkaConsumer, TopicPartition

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from ss.tables import ARROW_TYPES, JSON_FIELDS, PARTITIONS, WIDE_FIELDS

FLUSH = 50_000


class Files:
    """Writes each flush's rows as one Parquet file in ``out``."""

    def __init__(self, out: Path, fields: dict[str, str]) -> None:
        self.out = out
        self.count = 0
        schema = pa.schema([(k, ARROW_TYPES[t]) for k, t in fields.items()])
        self.options = pj.ParseOptions(explicit_schema=schema, unexpected_field_behavior="ignore")
        self.values: list[bytes] = []
        self.partitions: list[int] = []
        self.offsets: list[int] = []

    def add(self, partition: int, records: list) -> None:  # type: ignore[type-arg]
        self.values += [r.value for r in records]
        self.partitions += [partition] * len(records)
        self.offsets += [r.offset for r in records]

    def write(self) -> None:
        if not self.values:
            return
        table = pj.read_json(pa.BufferReader(b"\n".join(self.values)), parse_options=self.options)
        table = table.append_column("kafka_partition", pa.array(self.partitions, pa.int32()))
        table = table.append_column("kafka_offset", pa.array(self.offsets, pa.int64()))
        name = f"part-{self.count:05d}.snappy.parquet"
        staged = self.out / f".{name}"
        pq.write_table(table, staged, compression="snappy")
        os.replace(staged, self.out / name)
        self.count += 1
        self.values, self.partitions, self.offsets = [], [], []


async def main(args: argparse.Namespace) -> None:
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    consumer = AIOKafkaConsumer(
        bootstrap_servers=args.bootstrap, enable_auto_commit=False, auto_offset_reset="earliest"
    )
    await consumer.start()
    try:
        tps = [TopicPartition(args.topic, p) for p in range(PARTITIONS)]
        consumer.assign(tps)
        await consumer.seek_to_beginning(*tps)
        ends = await consumer.end_offsets(tps)
        files = Files(out, WIDE_FIELDS if args.kind == "wide" else JSON_FIELDS)
        left = {tp for tp in tps if ends[tp] > 0}
        while left:
            got = await consumer.getmany(timeout_ms=500)
            for tp, records in got.items():
                files.add(tp.partition, records)
            for tp in list(left):
                if await consumer.position(tp) >= ends[tp]:
                    left.discard(tp)
            if len(files.values) >= FLUSH or not left:
                files.write()
    finally:
        await consumer.stop()


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--bootstrap", required=True)
    p.add_argument("--topic", required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--kind", choices=("json", "wide"), default="json")
    asyncio.run(main(p.parse_args()))
