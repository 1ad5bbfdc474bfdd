"""The connector of every table sink: settings, task configs, the pre-creation check and
Connect's offsets API, all answered from the tables through the sink's format
(``format.TableFormat``)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import ClassVar

from daemon.config.definitions import ConfigDef
from daemon.config.problems import Problem
from daemon.connectors.api import ExecutorCall, SinkConnector, SinkTask
from daemon.connectors.records import TopicPartition
from daemon.connectors.tables.format import OffsetsCall, TableFormat
from daemon.connectors.tables.owners import owner_problems
from daemon.connectors.tables.settings import Target, task_configs, topic_targets
from daemon.connectors.tables.task import TableSinkTask
from daemon.errors import ConfigError


class TableSinkConnector(SinkConnector):
    """A table sink's connector; a sink sets ``task_type`` (which names the format) and
    ``CONFIG_DEF``."""

    task_type: ClassVar[type[TableSinkTask]]
    CONFIG_DEF: ClassVar[ConfigDef]

    def config_def(self) -> ConfigDef:
        return self.CONFIG_DEF

    def validate(self, config: Mapping[str, str]) -> list[Problem]:
        problems = self.CONFIG_DEF.validate(config)
        if any(p.is_error for p in problems):
            return problems
        settings = self._format(config).settings
        return problems + settings.table.routes.problems(settings.template)

    def check_existing(self, name: str, config: Mapping[str, str]) -> list[Problem]:
        """Another connector owning partitions of these topics in the tables, where the daemon
        reads them without Spark (the format says where: ``TableFormat.owners``); elsewhere
        the table's own claim refuses the second connector at its first claim."""
        fmt = self._format(config)
        problems: list[Problem] = []
        try:
            targets = self._targets(fmt, config)
        except ConfigError:  # tables per topic of topics.regex: they cannot be named
            return []
        for target in targets:
            owners = fmt.owners(target)
            if owners is not None:
                problems += owner_problems(fmt.location_key, target.name, owners, name, config)
        return problems

    def task_class(self) -> type[SinkTask]:
        return self.task_type

    def task_configs(self, max_tasks: int) -> list[dict[str, str]]:
        return task_configs(self.config, max_tasks)

    # ---- Connect's offsets API (the connector is stopped when offsets change) ----
    #
    # The runtime passes ``run_in_executor`` (``daemon.runtime.offsets``): tables reached only
    # through an executor's JVM need it. A ``${topic}`` location answers for the tables of the
    # topics listed in ``topics``.

    async def read_offsets(
        self, config: Mapping[str, str], *, run_in_executor: ExecutorCall | None = None
    ) -> dict[TopicPartition, int]:
        """Next offset per partition this connector owns in its tables ({} if none): another
        connector's partitions of a shared table are not this one's offsets."""
        fmt, name = self._format(config), config.get("name", "")
        out: dict[TopicPartition, int] = {}
        for target in self._targets(fmt, config):
            out.update(await fmt.read_offsets(OffsetsCall(target, name, run_in_executor)))
        return out

    async def alter_offsets(
        self,
        config: Mapping[str, str],
        offsets: Mapping[TopicPartition, int | None],
        *,
        run_in_executor: ExecutorCall | None = None,
    ) -> None:
        """Set partitions' next offsets in their tables (``None``: forget the partition; its
        consumer-group offset, or ``auto.offset.reset``, decides where it starts)."""
        bad = {tp: o for tp, o in offsets.items() if o is not None and o < 0}
        if bad:
            raise ConfigError(f"offsets must be ≥ 0 (or null to reset): {bad}")
        fmt, name = self._format(config), config.get("name", "")
        by_table: dict[str, tuple[Target, dict[TopicPartition, int | None]]] = {}
        for tp, offset in sorted(offsets.items()):
            target = fmt.settings.target(tp.topic)
            by_table.setdefault(target.name, (target, {}))[1][tp] = offset
        for target, items in by_table.values():
            await fmt.alter_offsets(OffsetsCall(target, name, run_in_executor), items)

    async def reset_offsets(
        self, config: Mapping[str, str], *, run_in_executor: ExecutorCall | None = None
    ) -> None:
        """Forget the committed offset of every partition this connector owns in its tables
        (the rows stay; another connector's partitions of a shared table are untouched)."""
        fmt, name = self._format(config), config.get("name", "")
        for target in self._targets(fmt, config):
            await fmt.reset_offsets(OffsetsCall(target, name, run_in_executor))

    def _format(self, config: Mapping[str, str]) -> TableFormat:
        return self.task_type().make_format(config)

    @staticmethod
    def _targets(fmt: TableFormat, config: Mapping[str, str]) -> list[Target]:
        return topic_targets(fmt.settings.template, fmt.settings.target, config)
