"""The connector side of a table-format sink: settings, task configs and Connect's offsets
API answered from the tables' own metadata (through the format's executor jobs)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

from daemon.config.definitions import ConfigDef
from daemon.config.problems import Problem
from daemon.connectors.api import ExecutorCall, SinkConnector, SinkTask
from daemon.connectors.parquet.jobs import raise_for
from daemon.connectors.parquet.sink import task_configs
from daemon.connectors.records import TopicPartition
from daemon.connectors.tables.settings import TOPIC, Target
from daemon.connectors.tables.task import FormatSettings, TableSinkTask
from daemon.errors import ConfigError

#: Deadline of an offsets job (reading a table's history can take a while on a big table).
OFFSETS_TIMEOUT = 120.0


class TableSinkConnector(SinkConnector):
    """A table sink's connector; a format sets ``task_type`` and ``CONFIG_DEF``."""

    task_type: ClassVar[type[TableSinkTask]]
    CONFIG_DEF: ClassVar[ConfigDef]

    def config_def(self) -> ConfigDef:
        return self.CONFIG_DEF

    def validate(self, config: Mapping[str, str]) -> list[Problem]:
        return self.CONFIG_DEF.validate(config)

    def task_class(self) -> type[SinkTask]:
        return self.task_type

    def task_configs(self, max_tasks: int) -> list[dict[str, str]]:
        return task_configs(self.config, max_tasks)

    # ---- Connect's offsets API (the connector is stopped when offsets change) ----

    async def read_offsets(
        self, config: Mapping[str, str], *, run_in_executor: ExecutorCall | None = None
    ) -> dict[TopicPartition, int]:
        """Next offset per partition this connector committed into its tables."""
        out: dict[TopicPartition, int] = {}
        for target in _targets(self.task_type, config):
            result = await _call(self.task_type, run_in_executor, "read_offsets", target, config)
            for topic, partition, offset in result["offsets"]:
                if offset is not None:
                    out[TopicPartition(str(topic), int(partition))] = int(offset)
        return out

    async def alter_offsets(
        self,
        config: Mapping[str, str],
        offsets: Mapping[TopicPartition, int | None],
        *,
        run_in_executor: ExecutorCall | None = None,
    ) -> None:
        """Set partitions' next offsets in their tables (``None``: forget the partition)."""
        bad = {tp: o for tp, o in offsets.items() if o is not None and o < 0}
        if bad:
            raise ConfigError(f"offsets must be ≥ 0 (or null to reset): {bad}")
        settings = self.task_type().load_settings(config)
        by_table: dict[str, tuple[Target, list[list[Any]]]] = {}
        for tp, offset in sorted(offsets.items()):
            target = settings.target(tp.topic)
            by_table.setdefault(target.name, (target, []))[1].append(
                [tp.topic, tp.partition, offset]
            )
        for target, items in by_table.values():
            await _call(
                self.task_type, run_in_executor, "alter_offsets", target, config, offsets=items
            )

    async def reset_offsets(
        self, config: Mapping[str, str], *, run_in_executor: ExecutorCall | None = None
    ) -> None:
        """Forget every committed offset of this connector in its tables (the rows stay)."""
        for target in _targets(self.task_type, config):
            await _call(
                self.task_type,
                run_in_executor,
                "alter_offsets",
                target,
                config,
                offsets=[],
                reset=True,
            )


def _targets(task_type: type[TableSinkTask], config: Mapping[str, str]) -> list[Target]:
    """The tables of ``config``: one, or one per topic of ``topics`` for a ``${topic}`` one."""
    settings: FormatSettings = task_type().load_settings(config)
    location = next((v for k, v in config.items() if TOPIC in v and k in ("path", "table")), None)
    if location is None:
        return [settings.target("_")]
    topics = [t.strip() for t in config.get("topics", "").split(",") if t.strip()]
    if not topics:
        raise ConfigError(
            f"{location}: a table per topic needs the topics listed in 'topics' for the "
            "offsets API (with topics.regex the tables cannot be named)"
        )
    return [settings.target(t) for t in topics]


async def _call(
    task_type: type[TableSinkTask],
    run: ExecutorCall | None,
    fn: str,
    target: Target,
    config: Mapping[str, str],
    **kwargs: Any,
) -> Mapping[str, Any]:
    if run is None:
        raise ConfigError(
            f"{task_type.format} tables are read through an executor; this runtime passed "
            "none to the offsets call"
        )
    result = await run(
        f"{task_type.jobs}:{fn}",
        None,
        timeout=OFFSETS_TIMEOUT,
        formats=(task_type.format,),
        connector=config.get("name", ""),
        **target.kwargs,
        **kwargs,
    )
    return raise_for(result)
