"""Java's value rules the field transforms follow (``daemon/connectors/transforms/java.py``);
the integration conformance test checks them against the JVM itself."""

from __future__ import annotations

import math

import pyarrow as pa
import pytest

from daemon.connectors.transforms import java
from daemon.connectors.transforms.fields import CAST_ARROW, cast_column


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (1.0, "1.0"),
        (-0.0, "-0.0"),
        (1e10, "1.0E10"),
        (1.5e-7, "1.5E-7"),
        (0.001, "0.001"),
        (9999999.0, "9999999.0"),
        (1e7, "1.0E7"),
        (123456789.125, "1.23456789125E8"),
        (0.1 + 0.2, "0.30000000000000004"),
        (math.inf, "Infinity"),
        (math.nan, "NaN"),
        (-2.5e-300, "-2.5E-300"),
    ],
)
def test_doubles_print_as_java_prints_them(value: float, text: str) -> None:
    assert java.double_text(value) == text


def test_floats_print_their_shortest_float_digits() -> None:
    assert java.float_text(java.float32(1.1)) == "1.1"
    assert java.float_text(java.float32(1e10)) == "1.0E10"


@pytest.mark.parametrize(
    ("value", "bits", "narrowed"),
    [(300, 8, 44), (-129, 8, 127), (2**31, 32, -(2**31)), (-1, 16, -1), (2**63, 64, -(2**63))],
)
def test_integers_narrow_by_dropping_high_bits(value: int, bits: int, narrowed: int) -> None:
    assert java.wrap(value, bits) == narrowed


def test_doubles_to_integers_truncate_saturate_and_make_nan_zero() -> None:
    assert java.to_long(2.99, 32) == 2 and java.to_long(-2.99, 32) == -2
    assert java.to_long(1e10, 32) == 2**31 - 1 and java.to_long(1e30, 64) == 2**63 - 1
    assert java.to_long(math.nan, 64) == 0
    assert java.to_long(1e10, 8) == -1  # (byte)(int) 1e10: saturated to int, then narrowed


def test_strings_parse_as_java_parses_them() -> None:
    assert java.parse_integer("+12", 32) == 12
    for bad in (" 7", "1.0", "", "0x10"):
        with pytest.raises(ValueError):
            java.parse_integer(bad, 64)
    with pytest.raises(ValueError, match="out of range"):
        java.parse_integer("128", 8)
    assert java.parse_double(" 7 ") == 7.0 and java.parse_double("1f") == 1.0
    assert java.parse_double("0x1p3") == 8.0 and math.isnan(java.parse_double("NaN"))
    with pytest.raises(ValueError):
        java.parse_double("1,5")


def test_cast_and_mask_refuse_what_connect_refuses() -> None:
    with pytest.raises(java.TransformError, match="does not support casting from MAP"):
        java.cast({"a": 1}, "int32")
    with pytest.raises(java.TransformError, match=r"Value \(x1\) was out of range"):
        java.cast("x1", "int64")
    assert java.cast("TRUE", "boolean") is True and java.cast(0.5, "boolean") is False
    assert java.cast(b"\x00\x01", "string") == "AAE="
    assert java.mask(5, "1.9") == 1 and java.mask(5.0, None) == 0.0
    with pytest.raises(java.TransformError, match="with custom replacement"):
        java.mask(True, "x")
    with pytest.raises(java.TransformError, match=r"found: java\.lang\.String"):
        java.require_map("s", "field insertion")


_COLUMNS = {
    "int64": pa.array([0, 1, -1, 127, 128, -129, 300, 2**31, -(2**31) - 1, 2**63 - 1, -(2**63)]),
    "float64": pa.array(
        [0.0, -0.5, 2.5, 2.99, -2.99, 1e10, -1e10, 1e19, -1e19, math.nan, math.inf, -math.inf]
    ),
    "bool": pa.array([True, False]),
    "string": pa.array(["0", "+5", "-12", "127", "128", "99999999999", "1.5", "1e3", ".5", "TRUE"]),
}


@pytest.mark.parametrize("kind", list(_COLUMNS))
@pytest.mark.parametrize("target", list(CAST_ARROW))
def test_the_column_wise_cast_is_the_value_by_value_one(kind: str, target: str) -> None:
    """Where ``cast_column`` casts a column, each value is what ``java.cast`` makes of it (the
    reference the conformance test holds against Connect's Cast)."""
    values = _COLUMNS[kind]
    if kind == "string" and target.startswith(("int", "float")):
        values = pa.array([v for v in values.to_pylist() if v != "TRUE"])
    got = cast_column(values, target)
    if got is None:
        return  # the reference path casts this one
    want = []
    for v in values.to_pylist():
        try:
            want.append(java.cast(v, target))
        except java.TransformError:
            pytest.fail(f"cast_column cast {v!r} to {target}, which Cast refuses")
    have = got.to_pylist()
    if target == "float32":
        want = [java.float32(w) for w in want]
    assert [str(h) for h in have] == [str(w) for w in want], (kind, target)
