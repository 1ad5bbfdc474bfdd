"""Connect's number converters: ``LongConverter``, ``IntegerConverter``, ``ShortConverter``,
``FloatConverter``, ``DoubleConverter`` and ``BooleanConverter``
(``org.apache.kafka.connect.converters``), which keyed topics often use: each value is Kafka's
serializer's fixed-width big-endian number (8, 4, 2, 4, 8 bytes; a boolean one byte, 0 or 1),
read by the matching deserializer.

Column-wise: the poll's values of the right width are joined into one buffer, byte-swapped to
the machine's order by ``array.array`` (C, no Python step per record), and handed to Arrow as a
column of ``int64``, ``int32``, ``int16``, ``float32`` or ``float64``. A null stays null (a
tombstone value, a null key); a value of another width is a bad record with Connect's message
(``Failed to deserialize long: Size of data received by LongDeserializer is not 8``), left to
``errors.tolerance``.
"""

from __future__ import annotations

import array
import sys
from collections.abc import Sequence
from typing import ClassVar

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from daemon.connectors.converters.base import Converted, Converter
from daemon.errors import ConversionError


class NumberConverter(Converter):
    """One of Connect's number converters (a subclass per type)."""

    settings = ()

    #: ``array`` typecode, width in bytes, Arrow type, Connect's type and deserializer names.
    code: ClassVar[str]
    width: ClassVar[int]
    arrow: ClassVar[pa.DataType]
    type_name: ClassVar[str]
    deserializer: ClassVar[str]

    def convert(self, data: Sequence[bytes | None]) -> Converted:
        n, width = len(data), self.width
        errors: dict[int, Exception] = {}
        pad = bytes(width)
        parts: list[bytes] = []
        for i, v in enumerate(data):
            if v is None:
                parts.append(pad)
            elif len(v) != width:
                errors[i] = ConversionError(
                    f"Failed to deserialize {self.type_name}: Size of data received by "
                    f"{self.deserializer} is not {width}"
                )
                parts.append(pad)
            else:
                parts.append(v)
        numbers = array.array(self.code, b"".join(parts))
        if sys.byteorder == "little":
            numbers.byteswap()  # Kafka's serializers write big-endian
        column = pa.Array.from_buffers(self.arrow, n, [None, pa.py_buffer(numbers.tobytes())])
        valid = [v is not None and i not in errors for i, v in enumerate(data)]
        if not all(valid):
            column = pc.if_else(pa.array(valid, pa.bool_()), column, pa.scalar(None, self.arrow))
        return Converted({self.side: column}, errors, schema=True)


class LongConverter(NumberConverter):
    connect_name = "org.apache.kafka.connect.converters.LongConverter"
    code, width, arrow = "q", 8, pa.int64()
    type_name, deserializer = "long", "LongDeserializer"


class IntegerConverter(NumberConverter):
    connect_name = "org.apache.kafka.connect.converters.IntegerConverter"
    code, width, arrow = "i", 4, pa.int32()
    type_name, deserializer = "integer", "IntegerDeserializer"


class ShortConverter(NumberConverter):
    connect_name = "org.apache.kafka.connect.converters.ShortConverter"
    code, width, arrow = "h", 2, pa.int16()
    type_name, deserializer = "short", "ShortDeserializer"


class FloatConverter(NumberConverter):
    connect_name = "org.apache.kafka.connect.converters.FloatConverter"
    code, width, arrow = "f", 4, pa.float32()
    type_name, deserializer = "float", "Deserializer"  # Kafka's FloatDeserializer says so


class DoubleConverter(NumberConverter):
    connect_name = "org.apache.kafka.connect.converters.DoubleConverter"
    code, width, arrow = "d", 8, pa.float64()
    type_name, deserializer = "double", "Deserializer"  # as Kafka's DoubleDeserializer does


class BooleanConverter(NumberConverter):
    """Kafka's ``BooleanSerializer``'s one byte: ``0x01`` true, ``0x00`` false; any other
    byte is a bad record with ``BooleanDeserializer``'s message, naming it as Java's signed
    ``byte`` prints (``0xff`` is ``-1``)."""

    connect_name = "org.apache.kafka.connect.converters.BooleanConverter"
    code, width, arrow = "B", 1, pa.bool_()
    type_name, deserializer = "boolean", "BooleanDeserializer"

    def convert(self, data: Sequence[bytes | None]) -> Converted:
        errors: dict[int, Exception] = {}
        parts: list[bytes] = []
        for i, v in enumerate(data):
            if v is not None and len(v) != 1:
                errors[i] = ConversionError(
                    "Failed to deserialize boolean: Size of data received by"
                    " BooleanDeserializer is not 1"
                )
            parts.append(b"\x00" if v is None or i in errors else v)
        raw = np.frombuffer(b"".join(parts), np.uint8)
        for i in np.flatnonzero(raw > 1).tolist():
            errors[i] = ConversionError(
                "Failed to deserialize boolean: Unexpected byte received by BooleanDeserializer:"
                f" {int(raw[i].astype(np.int8))}"
            )
        nulls = np.fromiter(
            (v is None or i in errors for i, v in enumerate(data)), np.bool_, len(data)
        )
        column = pa.array(raw == 1, pa.bool_(), mask=nulls)
        return Converted({self.side: column}, errors, schema=True)


NUMBER_CONVERTERS: tuple[type[NumberConverter], ...] = (
    LongConverter,
    IntegerConverter,
    ShortConverter,
    FloatConverter,
    DoubleConverter,
    BooleanConverter,
)
