"""make demo: sample records into the local broker, then connectd on the example configs.

Run by `make demo` after `make kafka-up`. Until the standalone runtime lands, the demo stops
after producing the sample records and checking the example configuration files.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import sys
from pathlib import Path

from aiokafka import AIOKafkaProducer
from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from aiokafka.errors import TopicAlreadyExistsError

ROOT = Path(__file__).resolve().parents[1]
TOPIC = "demo-events"


async def make_topic(bootstrap: str, partitions: int) -> None:
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        await admin.create_topics(
            [NewTopic(name=TOPIC, num_partitions=partitions, replication_factor=1)]
        )
    except TopicAlreadyExistsError:
        pass
    finally:
        await admin.close()


async def produce(bootstrap: str, count: int) -> None:
    rng = random.Random(42)
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all", linger_ms=20)
    await producer.start()
    try:
        for i in range(count):
            event = {
                "id": i,
                "user": f"user-{rng.randrange(100):03d}",
                "action": rng.choice(["view", "click", "buy"]),
                "amount": round(rng.random() * 100, 2),
            }
            await producer.send(TOPIC, json.dumps(event).encode(), key=event["user"].encode())
        await producer.flush()
    finally:
        await producer.stop()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--bootstrap", default="127.0.0.1:9092")
    parser.add_argument("--records", type=int, default=5000)
    args = parser.parse_args()

    asyncio.run(make_topic(args.bootstrap, partitions=3))
    asyncio.run(produce(args.bootstrap, args.records))
    print(f"demo: {args.records} JSON records produced to {TOPIC} on {args.bootstrap}")

    from daemon.cli import main as connectd

    examples = [
        str(ROOT / "examples" / f) for f in ("worker.properties", "parquet-sink.properties")
    ]
    print("demo: connectd check-config " + " ".join(examples))
    code = connectd(["check-config", *examples])
    if code != 0:
        return code
    print(
        "demo: the standalone runtime is not built yet; when it is, this step runs\n"
        "      connectd standalone examples/worker.properties examples/parquet-sink.properties\n"
        "demo: stop the broker with `make kafka-down`"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
