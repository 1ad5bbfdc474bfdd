"""A task's key and value converters, applied to each poll (``Incarnation`` holds one).

The converters themselves are the connectors' extension point (``daemon.connectors.converters``);
choosing them from the configuration and running them on every poll is the runtime's.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from daemon.connectors.converters import (
    ConversionResult,
    Converter,
    convert_poll,
    converter_from_config,
)
from daemon.connectors.records import OffsetRange, RawBatch

__all__ = ["BatchConverter", "ConversionResult"]


class BatchConverter:
    """A key converter and a value converter, applied to whole polls."""

    def __init__(self, key: Converter, value: Converter) -> None:
        self.key = key
        self.value = value

    @classmethod
    def from_config(cls, config: Mapping[str, str]) -> BatchConverter:
        """From Connect's ``key.converter`` / ``value.converter`` keys (worker and connector
        configs merged by the caller); each defaults to ``StringConverter``."""
        return cls(converter_from_config(config, "key"), converter_from_config(config, "value"))

    def convert(
        self, raw: RawBatch, ranges: Sequence[OffsetRange] | None = None
    ) -> ConversionResult:
        """Convert one poll (``convert_poll``). Never raises for a bad record: bad records are
        returned in ``bad`` and left out of the table, while ``batch.ranges`` still covers them.
        ``ranges``: the poll's offset ranges when the caller knows them (saves a group-by)."""
        return convert_poll(raw, self.key, self.value, ranges)
