"""Transforms and predicates written in Python: the counterpart of a Connect plugin on
``plugin.path``. A connector names one by its Python path, ``transforms.<alias>.type=
package.module:Class`` (``predicates.<alias>.type`` likewise); the class is imported, made with
no arguments and given its own settings (every ``transforms.<alias>.<key>`` but ``type``,
``predicate`` and ``negate``) once per task, where a built-in one would be.

A transform works on the whole converted batch, as connectd's own do (Arrow columns, not a
record at a time), and gets the rows its predicate selected::

    import pyarrow as pa
    import pyarrow.compute as pc
    from daemon.connectors.api import RecordBatch, Transformation

    class Upper(Transformation):
        '''Upper-cases the value field ``field`` (a column of a value in columns).'''

        def configure(self, config):
            self.field = config["field"]          # a KeyError names the missing setting

        def apply(self, batch, where):
            column = batch.value_columns[self.field]
            table = batch.table
            i = table.schema.get_field_index(column)
            upper = pc.if_else(where, pc.utf8_upper(table.column(i)), table.column(i))
            return batch.with_table(table.set_column(i, column, upper))

``apply`` returns the batch (rows it leaves out are dropped, as Filter drops them: the commit
still moves past them), or ``(batch, refused)`` where ``refused`` maps a row of the returned
batch to why the transform refuses it: that record fails at the TRANSFORMATION stage under
``errors.tolerance``, as a Connect transform's ``DataException`` does. It must keep the batch's
``ranges``. An exception from ``configure`` refuses the connector (REST 400, ``check-config``
exit 78, naming ``transforms.<alias>.type``); one from ``apply`` fails the task, naming the
transform.

A predicate returns, for a batch, where it holds (a boolean per row)::

    class EvenOffsets(Predicate):
        def test(self, batch):
            return pc.equal(pc.bit_wise_and(batch.table.column("kafka_offset"), 1), 0)
"""

from __future__ import annotations

import importlib
from abc import ABC, abstractmethod
from collections.abc import Mapping
from typing import Any

import pyarrow as pa

from daemon.connectors.records import RecordBatch
from daemon.errors import ConnectdError


class TransformFailed(ConnectdError):
    """A custom transform raised or returned what the runtime cannot use (not retriable)."""


class Transformation(ABC):
    """A transform in Python (see the module docstring)."""

    def configure(self, config: Mapping[str, str]) -> None:  # noqa: B027 (optional hook)
        """Take the transform's own settings; raise to refuse them."""

    @abstractmethod
    def apply(
        self, batch: RecordBatch, where: pa.BooleanArray
    ) -> RecordBatch | tuple[RecordBatch, Mapping[int, str]]:
        """The batch with the transform applied to the rows of ``where``."""


class Predicate(ABC):
    """A predicate in Python (see the module docstring)."""

    def configure(self, config: Mapping[str, str]) -> None:  # noqa: B027 (optional hook)
        """Take the predicate's own settings; raise to refuse them."""

    @abstractmethod
    def test(self, batch: RecordBatch) -> pa.BooleanArray:
        """Where the predicate holds, one boolean per row of ``batch``."""


def load(path: str, config: Mapping[str, str]) -> Any:
    """The configured instance of the class at ``module:Class``."""
    module_name, _, attr = path.strip().partition(":")
    obj: Any = importlib.import_module(module_name)
    for part in attr.split("."):
        obj = getattr(obj, part)
    made = obj()
    made.configure(dict(config))
    return made


def run(
    alias: str, transform: Transformation, batch: RecordBatch, where: pa.BooleanArray
) -> tuple[RecordBatch, dict[int, str]]:
    """``transform`` applied, its answer checked (``TransformFailed`` names the alias)."""
    name = type(transform).__qualname__
    try:
        out = transform.apply(batch, where)
    except Exception as e:
        raise TransformFailed(f"transform '{alias}' ({name}) raised {type(e).__name__}: {e}") from e
    refused: Mapping[int, str] = {}
    if isinstance(out, tuple):
        out, refused = out
    if not isinstance(out, RecordBatch):
        raise TransformFailed(
            f"transform '{alias}' ({name}) returned {type(out).__name__}, not a RecordBatch"
        )
    if out.ranges != batch.ranges:
        raise TransformFailed(f"transform '{alias}' ({name}) changed the batch's offset ranges")
    bad = [row for row in refused if not 0 <= row < len(out)]
    if bad:
        raise TransformFailed(
            f"transform '{alias}' ({name}) refused row {bad[0]} of a batch of {len(out)} rows"
        )
    return out, {int(row): str(why) for row, why in refused.items()}


def holds(alias: str, predicate: Predicate, batch: RecordBatch) -> pa.BooleanArray:
    """Where ``predicate`` holds, checked (``TransformFailed`` names the alias)."""
    name = type(predicate).__qualname__
    try:
        mask = predicate.test(batch)
    except Exception as e:
        raise TransformFailed(f"predicate '{alias}' ({name}) raised {type(e).__name__}: {e}") from e
    if isinstance(mask, pa.ChunkedArray):
        mask = mask.combine_chunks()
    if not isinstance(mask, pa.BooleanArray) or len(mask) != len(batch):
        raise TransformFailed(
            f"predicate '{alias}' ({name}) did not return one boolean per row of the batch"
        )
    return mask
