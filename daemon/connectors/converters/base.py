"""The converter extension point: ``Converter`` turns one side of a poll into Arrow columns."""

from __future__ import annotations

import difflib
from abc import ABC, abstractmethod
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import ClassVar, Literal

import pyarrow as pa

from daemon.errors import ConfigError

Side = Literal["key", "value"]


@dataclass
class Converted:
    """One side (keys or values) of a batch, converted: columns as long as the batch.

    Rows in ``errors`` hold nulls; ``convert_poll`` drops them from the table.
    """

    columns: dict[str, pa.Array]
    errors: dict[int, Exception] = field(default_factory=dict)
    json_columns: frozenset[str] = frozenset()
    value_columns: dict[str, str] | None = None
    tombstones: pa.Array | None = None
    #: The side's values carry a Connect schema (a typed converter: Avro, JSON Schema,
    #: JsonConverter with schemas.enable): transforms apply Connect's rules for values with a
    #: schema to it (``RecordBatch.schemas``).
    schema: bool = False


class Converter(ABC):
    """Converts one side (keys or values) of a batch of raw records into Arrow columns."""

    #: Connect's class name, used in messages and by ``list_converters()``.
    connect_name: str = ""
    #: The option keys the converter reads (``converter.type``, which Connect's worker sets,
    #: besides): any other is in ``unused`` after ``configure``. ``None``: not checked (a
    #: converter of the user's own, or one that checks its options itself).
    settings: ClassVar[tuple[str, ...] | None] = None

    def __init__(self) -> None:
        self.side: Side = "value"
        #: Option keys ``configure`` was given that are none of the converter's settings (a
        #: mistyped key), each with the settings it may have meant: warned about, as Connect
        #: warns of a supplied config that isn't a known one.
        self.unused: dict[str, list[str]] = {}

    def configure(self, options: Mapping[str, str], *, is_key: bool) -> None:
        """Apply the options (``<side>.converter.`` stripped). Raise ``ConfigError`` if invalid."""
        self.side = "key" if is_key else "value"
        if self.settings is not None:
            known = {*self.settings, "converter.type"}
            self.unused = unused_options([k for k in options if k not in known], known)

    @abstractmethod
    def convert(self, data: Sequence[bytes | None]) -> Converted:
        """Convert a batch's keys or values. Never raises for a bad record: reports it.

        Runs in a thread. A converter that needs something only the event loop can get (a
        Schema Registry's schema) raises an exception with an async ``fetch()`` method instead
        (``registry.SchemasNeeded``): the caller awaits it and converts again."""

    async def close(self) -> None:
        """Release what the converter holds (a registry client's connections); on the loop."""
        return None  # nothing, unless a converter holds connections


def unused_options(keys: Iterable[str], known: Iterable[str]) -> dict[str, list[str]]:
    """Each of ``keys`` (none a setting) with the ``known`` setting it may have meant (a close
    spelling), for ``Converter.unused``."""
    settings = sorted(known)
    return {key: difflib.get_close_matches(key, settings, n=1, cutoff=0.8) for key in sorted(keys)}


def flag_option(options: Mapping[str, str], key: str, default: bool, prefix: str) -> bool:
    """A converter's ``true``/``false`` option (any case); ``ConfigError`` naming
    ``prefix + key`` otherwise."""
    flag = options.get(key, "true" if default else "false").strip().lower()
    if flag not in ("true", "false"):
        raise ConfigError(f"{prefix}{key}: {flag!r} is not true or false")
    return flag == "true"


def positive_option(options: Mapping[str, str], key: str, default: int, prefix: str) -> int:
    """A converter's positive whole-number option; ``ConfigError`` naming ``prefix + key``."""
    try:
        value = int(options.get(key, str(default)).strip())
    except ValueError:
        value = 0
    if value < 1:
        raise ConfigError(f"{prefix}{key}: expected a positive integer")
    return value
