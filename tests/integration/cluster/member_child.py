"""A group member in its own process, for tests that SIGSTOP or SIGKILL it. Prints one JSON line
per event on stdout ("assigned" with what it runs now, "lost"); ends on SIGTERM by leaving.

Usage: python member_child.py BOOTSTRAP GROUP TOPIC URL CONFIG_JSON
"""

from __future__ import annotations

import asyncio
import json
import signal
import sys

from daemon.cluster import Assigned, ClusterConfig, Lost, Member, MemberSettings
from daemon.cluster.assignor import Policy
from daemon.cluster.protocol import Allocation


def _alloc(a: Allocation) -> dict[str, list[object]]:
    return {
        "connectors": sorted(a.connectors),
        "tasks": [[t.connector, t.task] for t in sorted(a.tasks)],
    }


async def main(bootstrap: str, group: str, topic: str, url: str, tasks: str) -> None:
    config = ClusterConfig(1, json.loads(tasks))
    settings = MemberSettings(
        group,
        bootstrap,
        topic,
        url,
        session_timeout_ms=6000,
        heartbeat_interval_ms=1000,
        rebalance_timeout_ms=10_000,
        policy=Policy(max_delay_ms=60_000),
    )
    stop = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
    async with Member(settings, lambda: config) as member:

        async def report() -> None:
            async for event in member.events():
                if isinstance(event, Assigned):
                    line = {
                        "kind": "assigned",
                        "generation": event.generation,
                        "member_id": event.member_id,
                        "running": _alloc(event.running),
                    }
                elif isinstance(event, Lost):
                    line = {"kind": "lost", "running": _alloc(event.running)}
                else:
                    line = {"kind": "undecodable"}
                print(json.dumps(line), flush=True)
                if isinstance(event, Assigned) and event.assignment.revoked:
                    member.request_rejoin()

        reporter = asyncio.create_task(report())
        await stop.wait()
        reporter.cancel()


if __name__ == "__main__":
    asyncio.run(main(*sys.argv[1:6]))
