"""A converter written in Python, as a user writes one (``daemon.connectors.converters.Converter``
is the interface): the worked example of docs/connectors.md#converters."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import pyarrow as pa

from daemon.connectors.converters import Converted, Converter
from daemon.errors import ConfigError, ConversionError


class CsvConverter(Converter):
    """``name,amount`` text lines as two typed columns (``name`` string, ``amount`` int64); a
    line that is not two fields with a whole number is a bad record. Option ``separator``
    (default ``,``)."""

    def configure(self, options: Mapping[str, str], *, is_key: bool) -> None:
        super().configure(options, is_key=is_key)
        self.separator = options.get("separator", ",")
        if len(self.separator) != 1:
            raise ConfigError(
                f"{self.side}.converter.separator: one character, not {self.separator!r}"
            )

    def convert(self, data: Sequence[bytes | None]) -> Converted:
        names: list[str | None] = []
        amounts: list[int | None] = []
        errors: dict[int, Exception] = {}
        for i, v in enumerate(data):
            name, amount = None, None
            if v is not None:
                parts = v.decode("utf-8", "replace").split(self.separator)
                if len(parts) == 2 and parts[1].strip().lstrip("-").isdigit():
                    name, amount = parts[0], int(parts[1])
                else:
                    errors[i] = ConversionError(f"not name{self.separator}amount: {v[:40]!r}")
            names.append(name)
            amounts.append(amount)
        return Converted(
            {"name": pa.array(names, pa.string()), "amount": pa.array(amounts, pa.int64())},
            errors,
            value_columns={"name": "name", "amount": "amount"},
            tombstones=pa.array([v is None for v in data], pa.bool_()),
        )
