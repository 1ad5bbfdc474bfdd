"""The Spark Structured Streaming job bench/ss_bench.py compares connectd with.

    python bench/ss/ss_job.py --bootstrap 127.0.0.1:9092 --topic T --kind json \\
        --out /tmp/t/table --checkpoint /tmp/t/ckpt --jars a.jar,b.jar --progress p.json

What a user would write for "Kafka topic → Parquet table": the Kafka source from the earliest
offsets, ``from_json`` with an explicit schema into typed columns (``--kind json``) or the value
kept as binary (``--kind bytes``), the Kafka coordinates as columns, a Parquet sink with a
checkpoint, ``Trigger.AvailableNow`` (read what is there, in as many batches as Spark sees fit,
then stop), ``local[2]``. Everything else is Spark's default, except the UI (off: other programs
on this machine may hold port 4040). At the end, the query's progress reports are written to
``--progress`` as a JSON list, for the bench's batch-phase rate.

``--format delta`` writes a Delta table instead (``format("delta")``, the same checkpoint and
trigger): Delta's jars go on ``--jars`` and its session settings come as ``--conf``, the
same as connectd's executors load (bench/ss_bench.py). Each batch is one Delta commit.
"""

from __future__ import annotations

import argparse
import json

from pyspark.sql import SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import (
    BooleanType,
    DoubleType,
    LongType,
    StringType,
    StructField,
    StructType,
)

#: The producer's fields and types: bench/ss/tables.py ``JSON_FIELDS`` and ``WIDE_FIELDS``,
#: written out here because the job imports nothing of the bench's (its process tree is what
#: is measured, and those modules import pyarrow, aiokafka and connectd).
FIELDS = {
    "json": {
        "id": "int64",
        "user": "string",
        "amount": "double",
        "ok": "boolean",
        "ts": "int64",
        "note": "string",
    },
    "wide": {
        "id": "int64",
        "user": "string",
        "amount": "double",
        "ok": "boolean",
        "ts": "int64",
        "country": "string",
        "device": "string",
        "score": "double",
        "visits": "int64",
        "note": "string",
    },
}
_TYPES = {
    "int64": LongType(),
    "string": StringType(),
    "double": DoubleType(),
    "boolean": BooleanType(),
}


def schema(kind: str) -> StructType:
    return StructType([StructField(name, _TYPES[t]) for name, t in FIELDS[kind].items()])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bootstrap", required=True)
    parser.add_argument("--topic", required=True)
    parser.add_argument("--kind", choices=("json", "wide", "bytes"), required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--checkpoint", required=True)
    parser.add_argument("--format", choices=("parquet", "delta"), default="parquet")
    parser.add_argument("--jars", required=True, help="comma-separated: the Kafka source's jars")
    parser.add_argument("--progress", required=True)
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--conf", action="append", default=[], help="k=v, repeatable")
    args = parser.parse_args()

    builder = (
        SparkSession.builder.master(args.master)
        .appName("ss-bench")
        .config("spark.jars", args.jars)
        .config("spark.ui.enabled", "false")
    )
    for kv in args.conf:
        k, _, v = kv.partition("=")
        builder = builder.config(k, v)
    spark = builder.getOrCreate()

    source = (
        spark.readStream.format("kafka")
        .option("kafka.bootstrap.servers", args.bootstrap)
        .option("subscribe", args.topic)
        .option("startingOffsets", "earliest")
        .load()
    )
    coords = [
        F.col("topic").alias("kafka_topic"),
        F.col("partition").alias("kafka_partition"),
        F.col("offset").alias("kafka_offset"),
        F.col("timestamp").alias("kafka_timestamp"),
        F.col("key").cast("string").alias("key"),
    ]
    if args.kind in FIELDS:
        parsed = source.select(
            *coords, F.from_json(F.col("value").cast("string"), schema(args.kind)).alias("v")
        )
        rows = parsed.select(*[c for c in parsed.columns if c != "v"], "v.*")
    else:
        rows = source.select(*coords, F.col("value"))

    query = (
        rows.writeStream.format(args.format)
        .option("path", args.out)
        .option("checkpointLocation", args.checkpoint)
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination()
    with open(args.progress, "w") as f:
        json.dump([json.loads(p.json) for p in query.recentProgress], f)
    spark.stop()


if __name__ == "__main__":
    main()
