"""Each daemon's broker-outage filter (``daemon.kafka.outages``) reaches its own task consumers:
``Daemon`` → ``RuntimeEnv.outages`` (also through ``StandaloneHerder``) → the connector's task
slots → the incarnation → ``TaskConsumer``, which lets it watch its client. Nothing is shared
between two daemons of one process."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any, cast

import pytest
from support.daemon import make_plan, worker_properties

from daemon.connectors.api import TaskId
from daemon.connectors.records import TopicPartition
from daemon.connectors.testing import EchoSinkConnector
from daemon.daemon import Daemon
from daemon.kafka.outages import BrokerOutageFilter
from daemon.runtime.connector import ConnectorRuntime
from daemon.runtime.executors import Executors
from daemon.runtime.incarnation import consumer as consumer_module
from daemon.runtime.incarnation.consumer import TaskConsumer
from daemon.runtime.model import TargetState
from daemon.runtime.slot import RestartPolicy
from daemon.runtime.standalone import StandaloneHerder

ECHO = {"name": "echo", "connector.class": "EchoSink", "topics": "t"}
NO_POOL = cast(Executors, object())  # never called: nothing here starts a task


def _daemon(tmp_path: Path, name: str) -> Daemon:
    properties = worker_properties("127.0.0.1:1", tmp_path / name)
    return Daemon(make_plan(properties), executors=NO_POOL, handle_signals=False, rest=False)


def test_each_daemon_hands_its_own_filter_to_its_runtime(tmp_path: Path) -> None:
    first, second = _daemon(tmp_path, "a"), _daemon(tmp_path, "b")
    assert first.outages is not second.outages
    for d in (first, second):
        assert d._env().outages is d.outages  # distributed mode's environment
        herder = StandaloneHerder(d.config, NO_POOL, outages=d.outages)
        assert herder.env.outages is d.outages  # standalone mode's

        runtime = ConnectorRuntime("echo", ECHO, TargetState.RUNNING, d._env())
        runtime.instance = EchoSinkConnector()
        runtime.task_configs = [dict(ECHO)]
        incarnation = runtime._make(0, RestartPolicy()).make(1)
        assert incarnation._outages is d.outages


class _Cluster:
    def __init__(self) -> None:
        self.listeners: list[object] = []

    def add_listener(self, listener: object) -> None:
        self.listeners.append(listener)


class _AIOKafkaConsumer:
    """As much of aiokafka's consumer as ``TaskConsumer.start`` uses."""

    def __init__(self, **settings: Any) -> None:
        self._client = SimpleNamespace(cluster=_Cluster())

    async def start(self) -> None:
        pass

    def subscribe(self, **subscription: Any) -> None:
        pass


class _Target:
    async def partitions_revoked(self, partitions: frozenset[TopicPartition]) -> None:
        pass

    async def partitions_assigned(self, partitions: frozenset[TopicPartition]) -> None:
        pass


@pytest.mark.parametrize("given", [True, False], ids=["a daemon's", "none"])
async def test_a_task_consumer_lets_the_filter_watch_its_client(
    monkeypatch: pytest.MonkeyPatch, given: bool
) -> None:
    monkeypatch.setattr(consumer_module, "AIOKafkaConsumer", _AIOKafkaConsumer)
    outages = BrokerOutageFilter() if given else None
    consumer = TaskConsumer(
        {"group_id": "connect-echo"},
        topics=["t"],
        target=_Target(),
        task_id=TaskId("echo", 0),
        outages=outages,
    )
    await consumer.start()
    client = cast(Any, consumer._consumer)._client
    assert len(client.cluster.listeners) == (1 if given else 0)
