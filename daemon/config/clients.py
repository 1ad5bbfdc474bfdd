"""Prefix settings that pass settings to a Kafka client: ``consumer.*``, ``consumer.override.*``.

Each is declared with a type that names its client (``ConsumerSettings``), so ``settings_of``
reports ``SettingInfo.client`` and a check can look the keys up in that client's table of known
settings. ``known_keys`` is that hook: it answers ``None`` (keys not checked) until a table is
registered in ``KNOWN_KEYS``; today the keys are checked when a task's consumer starts.
"""

from __future__ import annotations

import enum
from typing import Annotated

from daemon.config import fields as f


class KafkaClient(enum.StrEnum):
    """The Kafka clients whose settings a prefix setting may carry."""

    CONSUMER = "consumer"
    PRODUCER = "producer"
    ADMIN = "admin"


KNOWN_KEYS: dict[KafkaClient, frozenset[str]] = {}
"""Each client's known setting names (without the prefix); a client not here is not checked."""


def known_keys(client: str | None) -> frozenset[str] | None:
    """The setting names ``client`` knows, or ``None`` if they are not checked."""
    if client is None:
        return None
    return KNOWN_KEYS.get(KafkaClient(client))


ConsumerSettings = Annotated[f.StrDict, f.ClientKeys(KafkaClient.CONSUMER.value)]
"""Settings for the task consumers, by their Kafka names (``max.poll.records``)."""
