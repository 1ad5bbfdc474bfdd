"""Spark's type strings as trees, for the one change of a column's type that every table
format here takes: a struct gains fields, at any depth (in a struct, an array's elements, a
map's values). Nothing else about a column's type ever changes.

The strings are Spark's ``catalogString`` (``simpleString`` without its cut after 25 fields):
``bigint``, ``decimal(10,2)``, ``array<string>``, ``map<string,int>``,
``struct<city:string,zip:string>``. Field names are not quoted there, so a name holding one of
``:,<>`` cannot be read back: such a type is compared as a whole string. Standard library
only at import time: the executors' commit jobs use it too (``conformed``, with pyspark).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

#: A leaf type's text; ``("struct", ((name, type), ...))``, ``("array", type)`` or
#: ``("map", key, value)``.
Tree = str | tuple[Any, ...]


def parse(text: str) -> Tree | None:
    """The tree of ``text``, or None if it cannot be read (see the module docstring)."""
    try:
        tree, rest = _read(text, 0)
    except (ValueError, IndexError):
        return None
    return tree if rest == len(text) else None


def _read(text: str, at: int) -> tuple[Tree, int]:
    for kind in ("struct<", "array<", "map<"):
        if text.startswith(kind, at):
            at += len(kind)
            break
    else:
        end = at
        depth = 0
        while end < len(text) and (depth or text[end] not in ",>"):
            depth += {"(": 1, ")": -1}.get(text[end], 0)
            if text[end] in "<:":
                raise ValueError(text)
            end += 1
        if end == at:
            raise ValueError(text)
        return text[at:end], end
    if kind == "array<":
        element, at = _read(text, at)
        return ("array", element), _close(text, at)
    if kind == "map<":
        key, at = _read(text, at)
        if text[at] != ",":
            raise ValueError(text)
        value, at = _read(text, at + 1)
        return ("map", key, value), _close(text, at)
    fields: list[tuple[str, Tree]] = []
    while text[at] != ">":
        colon = text.index(":", at)
        name = text[at:colon]
        if not name or any(c in name for c in ",<>"):
            raise ValueError(text)
        child, at = _read(text, colon + 1)
        fields.append((name, child))
        if text[at] == ",":
            at += 1
    return ("struct", tuple(fields)), at + 1


def _close(text: str, at: int) -> int:
    if text[at] != ">":
        raise ValueError(text)
    return at + 1


def render(tree: Tree) -> str:
    if isinstance(tree, str):
        return tree
    if tree[0] == "array":
        return f"array<{render(tree[1])}>"
    if tree[0] == "map":
        return f"map<{render(tree[1])},{render(tree[2])}>"
    return "struct<" + ",".join(f"{n}:{render(t)}" for n, t in tree[1]) + ">"


@dataclass
class Difference:
    """What a batch's column type (``have``) is to a table's (``want``): ``new``, the paths of
    the fields ``have`` adds (``address.zip``, ``lines.element.sku``, ``m.value.x``);
    ``other``, the first path where the types differ otherwise, with both types there."""

    new: list[str] = field(default_factory=list)
    other: tuple[str, str, str] | None = None

    @property
    def same(self) -> bool:
        return not self.new and self.other is None


def difference(name: str, have: str, want: str) -> Difference:
    """How column ``name`` of type ``have`` differs from the table's ``want`` (``""``: any)."""
    out = Difference()
    if want in ("", have):
        return out
    h, w = parse(have), parse(want)
    if h is None or w is None:
        out.other = (name, have, want)
    else:
        _compare(name, h, w, out)
    return out


def _compare(path: str, have: Tree, want: Tree, out: Difference) -> None:
    if out.other is not None or have == want:
        return
    if isinstance(have, tuple) and isinstance(want, tuple) and have[0] == want[0]:
        if have[0] == "struct":
            wanted = dict(want[1])
            for name, child in have[1]:
                if name in wanted:
                    _compare(f"{path}.{name}", child, wanted[name], out)
                else:
                    out.new.append(f"{path}.{name}")
            return  # a field the batch lacks is null in its rows
        if have[0] == "array":
            _compare(f"{path}.element", have[1], want[1], out)
            return
        if have[1] == want[1]:  # a map's keys never change
            _compare(f"{path}.value", have[2], want[2], out)
            return
    out.other = (path, render(have), render(want))


def merged_columns(
    schema: Iterable[Sequence[str]], columns: Iterable[tuple[str, str]]
) -> list[list[str]]:
    """``schema`` (``[[column, type]]``) with ``columns`` (name, type; ``""``: unknown) it
    lacks appended, and the fields their structs add to its own (``widened``)."""
    out = [[str(c), str(t)] for c, t in schema]
    known = {c: i for i, (c, _) in enumerate(out)}
    for name, kind in columns:
        if name in known:
            out[known[name]][1] = widened(out[known[name]][1], kind)
        else:
            known[name] = len(out)
            out.append([name, kind])
    return out


def widened(want: str, have: str) -> str:
    """``want`` with the fields ``have`` adds (``difference(...).new``), appended after its
    own in each struct; ``want`` where they differ otherwise or cannot be read."""
    h, w = parse(have), parse(want)
    if want == "" or h is None or w is None:
        return want
    return render(_widened(w, h))


def _widened(want: Tree, have: Tree) -> Tree:
    if isinstance(want, str) or isinstance(have, str) or want[0] != have[0]:
        return want
    if want[0] == "struct":
        had = dict(have[1])
        own = {name for name, _ in want[1]}
        fields = [(n, _widened(t, had[n]) if n in had else t) for n, t in want[1]]
        fields += [(n, t) for n, t in have[1] if n not in own]
        return ("struct", tuple(fields))
    if want[0] == "array":
        return ("array", _widened(want[1], have[1]))
    return ("map", want[1], _widened(want[2], have[2]))


def aligned(df: Any, table: Any) -> Any:
    """A pyspark ``df`` as a table whose schema is ``table`` (a pyspark ``StructType``) takes
    it: the table's columns in its order (``conformed``; null where ``df`` lacks one), then
    ``df``'s columns the table lacks, for a format whose schema merge adds them (Iceberg and
    Delta check a write's column order against the table's)."""
    from pyspark.sql import functions as F

    return df.select(*_laid_out(F.col, df.schema, table))


def conformed(column: Any, have: Any, want: Any) -> Any:
    """A Spark ``column`` of type ``have`` (a pyspark ``DataType``) as the table's ``want``,
    for a table format that writes a struct as it is given: each struct (at any depth) with
    ``want``'s fields in ``want``'s order (null where ``have`` lacks one), then the fields
    ``have`` adds (a schema merge takes them), a null struct still null. Other types are left
    to the format's own cast and checks."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import ArrayType, MapType, StructType

    if have == want:
        return column
    if isinstance(have, StructType) and isinstance(want, StructType):
        struct = F.struct(*_laid_out(column.getField, have, want))
        return F.when(column.isNull(), F.lit(None)).otherwise(struct)
    if isinstance(have, ArrayType) and isinstance(want, ArrayType):
        return F.transform(column, lambda x: conformed(x, have.elementType, want.elementType))
    if isinstance(have, MapType) and isinstance(want, MapType):
        return F.transform_values(column, lambda _, v: conformed(v, have.valueType, want.valueType))
    return column


def _laid_out(get: Callable[[str], Any], have: Any, want: Any) -> list[Any]:
    """The fields of struct type ``want`` (``get(name)`` conformed from ``have``'s field, null
    where ``have`` lacks it), then those only ``have`` has."""
    from pyspark.sql import functions as F

    had = {f.name: f.dataType for f in have.fields}
    known = {f.name for f in want.fields}
    out = [
        (
            conformed(get(f.name), had[f.name], f.dataType)
            if f.name in had
            else F.lit(None).cast(f.dataType)
        ).alias(f.name)
        for f in want.fields
    ]
    return out + [get(name).alias(name) for name in had if name not in known]
