"""Connect's cross-origin settings and configured response headers, as its REST server applies
them (Kafka 4.1: Jetty 12's ``CrossOriginHandler`` and ``HeaderFilter``, observed on a real
Connect 4.1.2 worker):

- ``access.control.allow.origin``: comma-separated origin patterns, each a regular expression
  matched case-insensitively against the whole ``Origin`` (``https://.*\\.example\\.com``; a
  ``*`` alone allows any origin). Unset or blank: no cross-origin handling at all. Once set,
  every response carries ``Vary: Origin``; a request whose ``Origin`` (any of its space-separated
  parts) matches gets ``Access-Control-Allow-Origin`` echoing it, never ``*``. A preflight
  (``OPTIONS`` with ``Access-Control-Request-Method``, whatever method it names) from such an
  origin also gets ``Access-Control-Allow-Methods`` (``access.control.allow.methods``, default
  ``GET,POST,HEAD``), ``Access-Control-Allow-Headers: Content-Type`` and
  ``Access-Control-Max-Age: 60``; it is answered by the API like any ``OPTIONS``. A request from
  another origin is answered as usual, without those headers.
- ``response.http.headers.config``: comma-separated rules ``[action] [name]:[value]`` (a rule
  holding a comma in double quotes), action ``set``, ``add``, ``setDate`` or ``addDate`` (the
  date ones send now plus the value in milliseconds, as an HTTP date). Checked with Connect's
  own messages; applied to every response of the API, a header the API sets itself winning
  over a ``set``. As Jetty reads them, the actions are case-sensitive once accepted: ``ADD``
  acts as ``set``, ``adddate`` as ``add``.

The middleware applying them is ``daemon.rest.headers``.
"""

from __future__ import annotations

import email.utils
import re
import time
from dataclasses import dataclass

from daemon.errors import ConfigError

DEFAULT_METHODS = ("GET", "POST", "HEAD")


class HttpSettingError(ConfigError):
    """One of these settings as connectd (and Connect) cannot take it: ``key``, ``reason``."""

    def __init__(self, key: str, reason: str) -> None:
        super().__init__(f"{key}: {reason}")
        self.key = key
        self.reason = reason


_ACTIONS = ("set", "add", "setDate", "addDate")


@dataclass(frozen=True)
class Cors:
    """Compiled ``access.control.allow.origin`` / ``access.control.allow.methods``."""

    any_origin: bool
    patterns: tuple[re.Pattern[str], ...]
    methods: str

    @classmethod
    def parse(cls, origins: str, methods: str = "") -> Cors | None:
        """None when ``origins`` is blank (Connect installs no handler then)."""
        if not origins.strip():
            return None
        entries = [o.strip() for o in origins.split(",") if o.strip()]
        patterns: list[re.Pattern[str]] = []
        for entry in entries:
            if entry == "*":
                continue
            try:
                patterns.append(re.compile(entry, re.IGNORECASE))
            except re.error as exc:
                raise HttpSettingError(
                    "access.control.allow.origin",
                    f"{entry!r} is not a regular expression ({exc}); expected origins such as"
                    " https://.*\\.example\\.com, or *",
                ) from exc
        _no_duplicates("access.control.allow.origin", origins.split(","))
        listed = DEFAULT_METHODS if not methods.strip() else tuple(methods.split(","))
        if methods.strip():
            _no_duplicates("access.control.allow.methods", listed)
        return cls("*" in entries, tuple(patterns), ",".join(listed))

    def allows(self, origin: str) -> bool:
        if self.any_origin:
            return True
        return any(p.fullmatch(part) for part in origin.split(" ") for p in self.patterns)


def _no_duplicates(key: str, items: tuple[str, ...] | list[str]) -> None:
    seen: set[str] = set()
    for item in items:
        if item in seen:  # Connect fails to start (Set.of: "duplicate element")
            raise HttpSettingError(key, f"{item!r} is listed twice; expected each once")
        seen.add(item)


@dataclass(frozen=True)
class HeaderRule:
    action: str  # as Jetty reads it: set, add, setDate or addDate
    name: str
    value: str

    def rendered(self, now: float) -> str:
        """The value to send: a date one is now plus its milliseconds, as an HTTP date."""
        if self.action.endswith("Date"):
            return email.utils.formatdate(now + int(self.value) / 1000, usegmt=True)
        return self.value


def parse_header_rules(config: str) -> tuple[HeaderRule, ...]:
    """``response.http.headers.config``'s rules; ``ConfigError`` with Connect's messages."""
    rules: list[HeaderRule] = []
    for item in _csv_split(config):
        parts = item.strip().split(None, 1)
        if len(parts) != 2:
            _refuse(
                f"Invalid format of header config '{item}'. Expected: '[action] [header name]:"
                "[header value]'"
            )
        action, rest = parts
        if action.lower() not in (a.lower() for a in _ACTIONS):
            _refuse(
                f"Invalid header config action: '{action}'. Expected one of [set, add, setDate,"
                " addDate]"
            )
        pair = rest.strip().split(":")
        while pair and pair[-1] == "":  # Java's split drops trailing empty strings
            pair.pop()
        if len(pair) != 2:
            _refuse(
                f"Invalid format of header name and header value pair '{rest.strip()}'."
                " Expected: '[header name]:[header value]'"
            )
        name = pair[0].strip()
        if not name or re.search(r"\s", name):
            _refuse(f"Invalid header name '{name}'. The '[header name]' cannot contain whitespace")
        # Jetty's HeaderFilter: add = startsWith("add"), date = endsWith("Date"), both
        # case-sensitive; anything else accepted is a set.
        jetty = ("add" if action.startswith("add") else "set") + (
            "Date" if action.endswith("Date") else ""
        )
        value = pair[1].strip()
        if jetty.endswith("Date"):
            try:
                email.utils.formatdate(time.time() + int(value) / 1000, usegmt=True)
            except (ValueError, OverflowError, OSError):
                _refuse(
                    f"'{item}': a {action} value is milliseconds from now, an integer within"
                    " the calendar (years 1970 to 9999)"
                )
        rules.append(HeaderRule(jetty, name, value))
    return tuple(rules)


def _refuse(message: str) -> None:
    raise HttpSettingError("response.http.headers.config", message)


def _csv_split(value: str) -> list[str]:
    """Jetty's ``StringUtil.csvSplit``: items trimmed, double quotes keep commas (a backslash
    escapes inside them), a trailing comma ignored, an empty item kept."""
    items: list[str] = []
    i, n = 0, len(value)
    while i < n:
        while i < n and value[i] == " ":
            i += 1
        if i < n and value[i] == '"':
            i += 1
            buf = []
            while i < n and value[i] != '"':
                if value[i] == "\\" and i + 1 < n:
                    i += 1
                buf.append(value[i])
                i += 1
            items.append("".join(buf))
            while i < n and value[i] != ",":  # what follows the closing quote is dropped
                i += 1
            i += 1
            continue
        end = value.find(",", i)
        end = n if end < 0 else end
        items.append(value[i:end].strip())
        i = end + 1
    return items
