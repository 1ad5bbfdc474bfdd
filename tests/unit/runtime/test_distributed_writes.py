"""The distributed worker's REST writes while no leader is known: Connect's 409 at once (never a
hang), through the real aiohttp app; reads keep being served from what was read."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path
from types import MappingProxyType, SimpleNamespace
from typing import Any

from aiohttp.test_utils import TestClient, TestServer

from daemon.config import Mode, parse_worker
from daemon.connectors.api import default_registry
from daemon.rest import create_app
from daemon.runtime.distributed.forward import NO_LEADER
from daemon.runtime.distributed.herder import DistributedHerder
from daemon.runtime.distributed.loop import Role
from daemon.runtime.env import RuntimeEnv
from daemon.storage.kafka import ConfigSnapshot, StatusSnapshot

CONFIG = {"connector.class": "EchoSink", "topics": "t", "tasks.max": "1", "name": "a"}


class _Loop(SimpleNamespace):
    """What ``DistributedHerder`` reads of its loop, during a rebalance (no leader known)."""

    def __init__(self, tmp: Path) -> None:
        props = {
            "bootstrap.servers": "127.0.0.1:1",
            "group.id": "g",
            "config.storage.topic": "c",
            "offset.storage.topic": "o",
            "status.storage.topic": "s",
            "state.dir": str(tmp),
        }
        worker = parse_worker(props, mode=Mode.DISTRIBUTED).config
        env = RuntimeEnv.of_worker(worker, executors=SimpleNamespace())  # type: ignore[arg-type]
        task = MappingProxyType(dict(CONFIG))
        super().__init__(
            worker_id="127.0.0.1:8083",
            role=Role(),
            loaded=True,
            writer=None,
            snapshot=ConfigSnapshot(
                offset=3,
                connectors=MappingProxyType({"a": MappingProxyType(dict(CONFIG))}),
                task_configs=MappingProxyType({"a": (task,)}),
            ),
            statuses=StatusSnapshot({}, {}, {}),
            worker=SimpleNamespace(env=env, get=lambda name: None),
            running=SimpleNamespace(tasks=(), connectors=()),
        )


async def test_writes_without_a_leader_are_409_at_once_and_reads_are_served(
    tmp_path: Path,
) -> None:
    worker = DistributedHerder(_Loop(tmp_path), default_registry)  # type: ignore[arg-type]
    app = create_app(worker)  # type: ignore[arg-type]
    async with TestClient(TestServer(app)) as client:
        calls: list[tuple[str, str, Any]] = [
            ("POST", "/connectors", {"name": "b", "config": dict(CONFIG, name="b")}),
            ("PUT", "/connectors/a/config", dict(CONFIG)),
            ("PUT", "/connectors/a/pause", None),
            ("DELETE", "/connectors/a", None),
        ]
        for method, path, body in calls:
            async with asyncio.timeout(5):
                response = await client.request(method, path, json=body)
            assert response.status == 409, (method, path, await response.text())
            assert await response.json() == {"error_code": 409, "message": NO_LEADER}
        response = await client.get("/connectors")
        assert await response.json() == ["a"]
        response = await client.get("/connectors/a/status")
        body = await response.json()
        assert response.status == 200 and body["tasks"][0]["state"] == "UNASSIGNED", body


async def test_a_cluster_scoped_log_level_goes_to_the_leader_and_changes_nothing_here(
    tmp_path: Path,
) -> None:
    """scope=cluster is a config-topic write: without a leader it is Connect's 409 at once,
    and this worker's level is left alone (it changes when the record is read back)."""
    worker = DistributedHerder(_Loop(tmp_path), default_registry)  # type: ignore[arg-type]
    logger = logging.getLogger("connectd.clusterscope")
    logger.setLevel(logging.INFO)
    async with TestClient(TestServer(create_app(worker))) as client:  # type: ignore[arg-type]
        path = "/admin/loggers/connectd.clusterscope"
        async with asyncio.timeout(5):
            response = await client.put(f"{path}?scope=cluster", json={"level": "ERROR"})
        assert response.status == 409
        assert await response.json() == {"error_code": 409, "message": NO_LEADER}
        assert logger.level == logging.INFO  # nothing changed
        response = await client.put(path, json={"level": "ERROR"})
        assert response.status == 200 and logger.level == logging.ERROR
