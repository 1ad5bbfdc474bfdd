"""Connectors defined by files in standalone mode: what a start does with the stored ones, and
where each of a plan's connectors comes from.

As in Kafka Connect's standalone mode, the command line is the truth for connectors defined by
files: a stored connector whose origin is a file and that the command line does not name again
is neither started nor kept. Connectors created through the REST API are restored (a 201 is
never lost), and so are target states (a paused or stopped connector stays so). Each restored
connector is logged with its origin.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping

from daemon.config.plan import LaunchPlan
from daemon.runtime.model import TargetState
from daemon.storage.standalone import ConfigStore, Origin, StoredConnector

log = logging.getLogger("connectd.worker")


def origins_of(plan: LaunchPlan) -> list[Origin | None]:
    """The file each of ``plan``'s connectors comes from (resolved: the state file outlives the
    working directory); ``None`` each where the plan does not say."""
    if len(plan.connector_files) == len(plan.connectors):
        return [Origin(str(p.absolute())) for p in plan.connector_files]
    if plan.config_file is not None:
        return [Origin(str(plan.config_file.absolute()))] * len(plan.connectors)
    return [None] * len(plan.connectors)


async def merge_files(
    store: ConfigStore, given: Mapping[str, tuple[dict[str, str], Origin]]
) -> dict[str, StoredConnector]:
    """The connectors to run: the stored ones, with ``given`` (validated configs from the
    command line's files, and the file of each) applied over them and saved.

    A stored connector's target state is kept, also for one given again on the command line: a
    connector an operator paused stays paused across a restart. A stored connector that came
    from a file and is not in ``given`` is removed from the store, not returned."""
    stored = await store.load()
    where = store.where
    for name, entry in sorted(stored.items()):
        if name in given:
            continue
        if entry.origin is not None and entry.origin.from_file:
            log.warning(
                "Connector %s (from %s) is not on the command line: not started, and removed"
                " from %s (as in Kafka Connect's standalone mode, only the connector files"
                " given run); give its file again to run it",
                name,
                entry.origin,
                where,
            )
            await store.delete(name)
            del stored[name]
            continue
        how = (
            "created through the REST API"
            if entry.origin is not None
            else "origin not recorded (stored by an older connectd); DELETE"
            f" /connectors/{name} if it should not run"
        )
        log.info("Connector %s restored from %s: %s", name, where, how)
    for name, (checked, origin) in given.items():
        before = stored.get(name)
        target = before.target if before is not None else TargetState.RUNNING
        entry = StoredConnector(checked, target, origin)
        if before is None:
            log.info("Connector %s from %s", name, origin)
        else:
            was = "" if before.origin in (origin, None) else f", which had it from {before.origin}"
            changed = (
                "" if dict(before.config) == checked else "; the file's configuration is applied"
            )
            log.info("Connector %s from %s, known to %s%s%s", name, origin, where, was, changed)
        if before != entry:
            await store.save(name, entry)
        stored[name] = entry
    return stored
