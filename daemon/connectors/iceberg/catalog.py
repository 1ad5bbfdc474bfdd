"""IcebergSink's catalog settings as Spark catalog configuration.

The executor's SparkSession is shared by every task and started once, but Spark's
``CatalogManager`` loads a catalog lazily, by name, from the session conf the first time a
query names it; so a job can declare its connector's catalog at run time
(``spark.conf.set("spark.sql.catalog.<name>", ...)``) as long as every connector gets its own
name. The name is derived from the catalog settings (a digest), so two connectors with
different warehouses never share one, and two with the same settings share one harmlessly.

Settings (keys as the connector has them):

- ``catalog.type``: ``hadoop`` (default: a directory, ``catalog.warehouse``, on a filesystem
  with atomic rename: local, HDFS; not S3), ``rest`` (``catalog.uri``) or ``hive``
  (``catalog.uri``, a metastore's ``thrift://`` address; without it, the ``hive-site.xml`` on
  the executors' classpath decides).
- ``catalog.warehouse``, ``catalog.uri``; any other ``catalog.<key>`` is passed to the
  Iceberg catalog as ``spark.sql.catalog.<name>.<key>`` (``io-impl``, ``credential`` ...).
- ``table``: ``namespace.name`` (nested namespaces as ``a.b.name``).

Imports only the standard library and ``daemon.errors``: executors import it.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from daemon.connectors.tables.names import quote
from daemon.errors import ConfigError

TYPES = ("hadoop", "rest", "hive")
PREFIX = "catalog."
_IMPL = "org.apache.iceberg.spark.SparkCatalog"
#: Keys the sink sets itself. ``cache-enabled`` off: every decision (offsets, epochs) must be
#: taken on the table's newest metadata, never on a copy Spark cached from an earlier job.
_OWN = {"cache-enabled": "false"}
_PART = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_\-]*$")


@dataclass(frozen=True)
class Catalog:
    """A connector's catalog: ``name`` for Spark, ``conf`` its ``spark.sql.catalog.*`` keys,
    ``table`` the full identifier (``<name>.<namespace>.<table>``)."""

    name: str
    namespace: str
    table_name: str
    conf: dict[str, str] = field(default_factory=dict)

    @property
    def table(self) -> str:
        """The full identifier as Spark's parser takes it (``-`` in a name is quoted)."""
        return f"{self.name}.{self.in_catalog}"

    @property
    def in_catalog(self) -> str:
        """The identifier inside the catalog (``namespace.table``), as procedures take it."""
        return f"{quote(self.namespace)}.{quote(self.table_name)}"


def resolve(settings: Mapping[str, Any]) -> tuple[Catalog | None, list[tuple[str, str]]]:
    """The catalog for ``settings`` (the connector's ``catalog.*`` keys and ``table``), or
    ``None`` and the problems as ``(key, message)`` pairs, each naming the setting to fix."""
    problems: list[tuple[str, str]] = []
    given = {
        k[len(PREFIX) :]: str(v) for k, v in settings.items() if k.startswith(PREFIX) and v != ""
    }
    kind = given.pop("type", "hadoop").lower()
    if kind not in TYPES:
        problems.append((PREFIX + "type", f"{kind!r} is not one of {', '.join(TYPES)}"))
    if kind == "hadoop" and not given.get("warehouse"):
        problems.append(
            (PREFIX + "warehouse", "a hadoop catalog needs its warehouse directory (a path or URI)")
        )
    if kind == "rest" and not given.get("uri"):
        problems.append((PREFIX + "uri", "a rest catalog needs the catalog server's URI"))
    for key in _OWN:
        if key in given:
            problems.append((PREFIX + key, "is set by the sink (it must read fresh metadata)"))
    table = str(settings.get("table", "") or "")
    parts = table.split(".")
    if not table:
        problems.append(("table", "missing: the Iceberg table as namespace.name"))
    elif len(parts) < 2 or not all(_PART.match(p) for p in parts):
        problems.append(
            ("table", f"{table!r} is not namespace.name (letters, digits, _ and - per part)")
        )
    if problems:
        return None, problems
    digest = hashlib.sha256(
        json.dumps({"type": kind, **given}, sort_keys=True).encode()
    ).hexdigest()[:12]
    name = f"connectd_{digest}"
    base = f"spark.sql.catalog.{name}"
    conf = {base: _IMPL, f"{base}.type": kind}
    conf.update({f"{base}.{k}": v for k, v in sorted(given.items())})
    conf.update({f"{base}.{k}": v for k, v in _OWN.items()})
    return Catalog(name, ".".join(parts[:-1]), parts[-1], conf), []


def declare(spark: Any, settings: Mapping[str, Any]) -> Catalog:
    """Resolve ``settings`` and set the catalog's keys in ``spark``'s session conf (inside an
    executor job). Raises ``daemon.errors.ConfigError`` naming the first wrong setting."""
    catalog, problems = resolve(settings)
    if catalog is None:
        raise ConfigError("; ".join(f"{key}: {message}" for key, message in problems))
    for key, value in catalog.conf.items():
        if spark.conf.get(key, None) != value:
            spark.conf.set(key, value)
    return catalog
