"""Table identifiers as Spark's SQL parser takes them (executors import this: standard
library only)."""

from __future__ import annotations

import re

_PLAIN = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def quote(name: str) -> str:
    """``name`` (dotted parts) for Spark's identifier parser: a part other than letters,
    digits and ``_`` (a topic's ``-``) in backticks."""
    return ".".join(
        p if _PLAIN.match(p) else "`" + p.replace("`", "``") + "`" for p in name.split(".")
    )
