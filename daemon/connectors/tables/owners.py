"""Which connector owns a partition of a table, as a problem before a connector is created
(``SinkConnector.check_existing``): each format reads its table's owners its own way (a
commit log, a Delta log, Iceberg metadata) and words the refusal here, once.

A partition belongs to the connector whose commit or claim of it was the last; a second
connector writing it would refuse, or be refused by, the first. ``takeover`` names the
connectors this one replaces: their partitions are its to take.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from daemon.config.problems import Problem, error
from daemon.connectors.records import TopicPartition


def _covers(config: Mapping[str, str]) -> tuple[set[str], re.Pattern[str] | None]:
    topics = {t.strip() for t in config.get("topics", "").split(",") if t.strip()}
    regex = config.get("topics.regex", "").strip()
    try:
        return topics, re.compile(regex) if regex else None
    except re.error:
        return topics, None  # reported by the framework's own check


def owner_problems(
    key: str,
    where: str,
    owners: Mapping[TopicPartition, str],
    name: str,
    config: Mapping[str, str],
) -> list[Problem]:
    """An error under ``key`` per other connector owning (``owners``) partitions of the topics
    ``config`` reads (``topics``, or ``topics.regex`` matched against the owned topics) in
    the table ``where``, unless ``config``'s ``takeover`` names it."""
    topics, regex = _covers(config)
    takeover = {c.strip() for c in config.get("takeover", "").split(",") if c.strip()}
    owned: dict[str, set[str]] = {}
    for tp, other in owners.items():
        covered = tp.topic in topics or (regex is not None and regex.fullmatch(tp.topic))
        if covered and other != name and other not in takeover:
            owned.setdefault(other, set()).add(str(tp))
    return [
        error(
            key,
            f"table {where} already holds {', '.join(sorted(tps)[:5])}"
            f"{' …' if len(tps) > 5 else ''} written by connector {other!r}; two connectors "
            "must not write the same partitions of one table",
            f"another {key}, or, if this connector replaces {other!r}, takeover={other}",
        )
        for other, tps in sorted(owned.items())
    ]
