"""What the leader writes to the config log for a connector, and the offsets API (KIP-875) on
any worker: the pieces of ``DistributedHerder`` that do not depend on the group."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping, Sequence
from typing import Any

from daemon.config import Providers, resolve
from daemon.connectors.api import ConnectorRegistry
from daemon.errors import Conflict
from daemon.runtime import offsets as offsets_api
from daemon.runtime.connector import CONNECTOR_CALL_TIMEOUT, unresolve
from daemon.runtime.env import RuntimeEnv
from daemon.runtime.model import SinkOffset, TargetState
from daemon.storage.kafka import ConfigSnapshot
from daemon.storage.kafka import configrecords as rec
from daemon.structs import TaskId

log = logging.getLogger("connectd.herder")


async def task_configs(
    name: str, config: Mapping[str, str], registry: ConnectorRegistry, providers: Providers
) -> list[dict[str, str]]:
    """The task configurations the connector generates for ``config`` (stored with their
    ``${...}`` references unresolved); none if its ``start`` fails: then the connector shows
    FAILED on the worker that runs it."""
    try:
        async with asyncio.timeout(CONNECTOR_CALL_TIMEOUT):
            resolved = await asyncio.to_thread(resolve, config, providers)
            instance = registry.resolve(config["connector.class"])()
            await instance.start(resolved)
            try:
                tasks_max = registry.checks.tasks_max(resolved)
                configs = registry.checks.generated(
                    name, list(instance.task_configs(tasks_max)), resolved
                )
            finally:
                await instance.stop()
    except Exception as exc:
        log.error("Connector %s: no task configurations generated: %r", name, exc)
        return []
    return [unresolve(c, config, resolved) for c in configs]


async def config_records(
    name: str,
    config: dict[str, str],
    target: TargetState | None,
    registry: ConnectorRegistry,
    providers: Providers,
) -> list[tuple[str, bytes | None]]:
    """One transaction's records for a connector's (new) configuration: its target state (if
    given), the config, its task configs and their commit record; a STOPPED one keeps none."""
    tasks = (
        []
        if target is TargetState.STOPPED
        else await task_configs(name, config, registry, providers)
    )
    records = [] if target is None else [rec.target_state_record(name, target)]
    records.append(rec.connector_record(name, config))
    return records + task_config_records(name, tasks)


def task_config_records(
    name: str, configs: Sequence[Mapping[str, str]]
) -> list[tuple[str, bytes | None]]:
    """A connector's task configurations and the commit record that makes them count."""
    records: list[tuple[str, bytes | None]] = [
        rec.task_record(TaskId(name, i), dict(c)) for i, c in enumerate(configs)
    ]
    records.append(rec.commit_record(name, len(configs)))
    return records


class SinkOffsets:
    """The offsets API on a sink whose offsets live in its own table, from any worker: altering
    needs the connector STOPPED in the config log (and so without tasks anywhere)."""

    def __init__(self, env: RuntimeEnv, registry: ConnectorRegistry) -> None:
        self.env = env
        self.registry = registry

    async def _target(self, config: Mapping[str, str]) -> tuple[Any, dict[str, str]]:
        async with asyncio.timeout(self.env.settings.resolve_timeout):
            resolved = await asyncio.to_thread(resolve, config, self.env.providers)
        return self.registry.resolve(config["connector.class"])(), resolved

    @staticmethod
    def _require_stopped(name: str, snapshot: ConfigSnapshot) -> None:
        if snapshot.target_state(name) is not TargetState.STOPPED or snapshot.tasks(name):
            raise Conflict(
                f"Connectors must be in the STOPPED state before their offsets can be modified;"
                f" stop {name} first (PUT /connectors/{name}/stop)",
                status=400,
            )

    async def get(self, name: str, config: Mapping[str, str]) -> list[SinkOffset]:
        connector, resolved = await self._target(config)
        env = self.env
        return await offsets_api.read_offsets(env.worker, name, connector, resolved, env.executors)

    async def alter(
        self,
        name: str,
        config: Mapping[str, str],
        snapshot: ConfigSnapshot,
        offsets: Sequence[SinkOffset],
    ) -> None:
        self._require_stopped(name, snapshot)
        connector, resolved = await self._target(config)
        env = self.env
        await offsets_api.alter_offsets(
            env.worker, name, connector, resolved, offsets, env.executors
        )

    async def reset(self, name: str, config: Mapping[str, str], snapshot: ConfigSnapshot) -> None:
        self._require_stopped(name, snapshot)
        connector, resolved = await self._target(config)
        env = self.env
        await offsets_api.reset_offsets(env.worker, name, connector, resolved, env.executors)
