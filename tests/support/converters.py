"""A task's two converters applied to whole polls, for tests that convert like the runtime."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import NamedTuple

from daemon.connectors.converters import (
    ConversionResult,
    Converter,
    convert_poll,
    converter_from_config,
)
from daemon.connectors.records import OffsetRange, RawBatch


class PollConverter(NamedTuple):
    """A key and a value converter; ``convert`` is the runtime's one conversion call
    (``convert_poll``), as ``daemon.runtime.incarnation.pipeline`` makes it."""

    key: Converter
    value: Converter

    @classmethod
    def from_config(cls, config: Mapping[str, str]) -> PollConverter:
        """From Connect's ``key.converter`` / ``value.converter`` keys (String by default)."""
        return cls(converter_from_config(config, "key"), converter_from_config(config, "value"))

    def convert(
        self, raw: RawBatch, ranges: Sequence[OffsetRange] | None = None
    ) -> ConversionResult:
        return convert_poll(raw, self.key, self.value, ranges)
