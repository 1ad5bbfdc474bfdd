"""Connect's number converters (``LongConverter`` … ``DoubleConverter``, ``BooleanConverter``)
against Kafka Connect 4.1's own classes (issue 31): the same bytes read by Connect's converter
(``Converters.java``, run by the JDK from Maven Central's jars) and by connectd's, value for
value; a width (or a boolean's byte) Connect's deserializer refuses is a bad record with the
same message."""

from __future__ import annotations

import math
import struct

import pytest
from support.connect_jars import connect_libs, read_with_connect

from daemon.connectors.converters import make_converter
from daemon.connectors.transforms.java import double_text, float_text

pytestmark = pytest.mark.integration

_P = "org.apache.kafka.connect.converters."
#: Class → (struct format, values to write) — extremes, signs, zero, NaN and infinities.
CASES = {
    "LongConverter": (">q", [0, 1, -1, 2**63 - 1, -(2**63), 1_700_000_000_000]),
    "IntegerConverter": (">i", [0, 1, -1, 2**31 - 1, -(2**31), 65536]),
    "ShortConverter": (">h", [0, 1, -1, 2**15 - 1, -(2**15)]),
    "FloatConverter": (">f", [0.0, -0.0, 1.5, -2.25e-3, 3.4e38, math.inf, -math.inf, math.nan]),
    "DoubleConverter": (">d", [0.0, -0.0, 0.1, 1e300, -5e-324, math.inf, math.nan]),
    # 2 and 0xff: bytes BooleanDeserializer refuses (``-1`` in its message: Java's byte).
    "BooleanConverter": (">B", [0, 1, 2, 0x7F, 0x80, 0xFF]),
}
#: Bytes no number converter takes: the wrong widths, and none at all (null).
ODD = [b"", b"\x01", b"\x00\x01\x02", b"\x00" * 16, None]


def _text(value: object, cls: str) -> str | None:
    """connectd's value as Java's String.valueOf prints Connect's."""
    if value is None:
        return None
    if cls == "FloatConverter":
        return float_text(float(value))  # type: ignore[arg-type]
    if cls == "DoubleConverter":
        return double_text(float(value))  # type: ignore[arg-type]
    if cls == "BooleanConverter":
        return "true" if value else "false"
    return str(value)


@pytest.mark.parametrize("cls", list(CASES))
@pytest.mark.parametrize("is_key", [False, True])
def test_number_converters_read_what_connect_reads(cls: str, is_key: bool) -> None:
    fmt, values = CASES[cls]
    data: list[bytes | None] = [struct.pack(fmt, v) for v in values] + ODD
    connect = read_with_connect(connect_libs(), [(_P + cls, is_key, d) for d in data])
    converted = make_converter(_P + cls, {}, is_key=is_key).convert(data)
    column = converted.columns["key" if is_key else "value"].to_pylist()
    for i, (want, d) in enumerate(zip(connect, data, strict=True)):
        if "error" in want:
            assert i in converted.errors, (cls, d, want)
            assert str(converted.errors[i]).startswith(str(want["error"]).split(": ")[0]), (
                converted.errors[i],
                want,
            )
            assert str(want["error"]).endswith(str(converted.errors[i]).split(": ", 1)[1])
        else:
            assert i not in converted.errors, (cls, d, converted.errors.get(i))
            assert _text(column[i], cls) == want["value"], (cls, d, column[i], want)
