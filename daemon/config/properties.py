"""Reading Java ``.properties`` files, with the line of every key for error messages.

Parsing is ``javaproperties``' (escapes, continuation lines, ``=``/``:``/whitespace separators,
``\\uXXXX``): nothing here re-implements the format. Java reads these files as ISO-8859-1;
connectd reads UTF-8 first, because that is what editors write today, and falls back to
ISO-8859-1 for files that are not valid UTF-8, so both kinds load as their authors meant. A UTF-8
byte order mark is dropped; a file with control characters no text has is refused as binary.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

import javaproperties

from daemon.config.problems import Problem, Severity


@dataclass
class PropertiesFile:
    """The key/value pairs of one file (the last of a repeated key wins), with line numbers."""

    values: dict[str, str] = field(default_factory=dict)
    lines: dict[str, int] = field(default_factory=dict)
    problems: list[Problem] = field(default_factory=list)


def decode(data: bytes) -> str:
    """File bytes as text: UTF-8 if valid, else ISO-8859-1 (Java's encoding for the format).
    A UTF-8 byte order mark (some Windows editors write one) is not part of the first key."""
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError:
        return data.decode("iso-8859-1")


# Control characters no text file has: C0 controls other than tab, line feed, vertical tab, form
# feed and carriage return (a NUL is the usual sign of binary data, as git and grep take it).
_BINARY = re.compile(rb"[\x00-\x08\x0e-\x1a\x1c-\x1f]")


def binary_problem(data: bytes, file: str) -> Problem | None:
    """An error if ``data`` is not text (an image, an archive, a class file given by mistake)."""
    found = _BINARY.search(data)
    if found is None:
        return None
    offset = found.start()
    return Problem(
        file,
        None,
        f"not a text file (byte {offset} is 0x{data[offset]:02x}, a control character)",
        "a text file of key=value lines",
    )


def parse_properties(text: str, file: str | None = None) -> PropertiesFile:
    """Parse ``.properties`` text. A repeated key keeps its last value, with a warning."""
    out = PropertiesFile()
    line = 1
    try:
        for element in javaproperties.parse(text):
            if isinstance(element, javaproperties.KeyValue):
                key = element.key
                if key in out.values:
                    out.problems.append(
                        Problem(
                            file,
                            key,
                            f"set again (first on line {out.lines[key]}); the last value is used",
                            severity=Severity.WARNING,
                            line=line,
                        )
                    )
                out.values[key] = element.value
                out.lines[key] = line
            line += _newlines(element.source)
    except javaproperties.InvalidUEscapeError as exc:
        out.problems.append(
            Problem(
                file,
                None,
                f"invalid unicode escape {exc.escape!r}",
                "\\uXXXX with 4 hex digits",
                line=line,
            )
        )
    return out


def _newlines(source: str) -> int:
    # javaproperties keeps each element's source text, line terminators included; Java
    # accepts \n, \r\n and a lone \r as terminators.
    return source.count("\n") + source.count("\r") - source.count("\r\n")


def read_properties(path: str | Path) -> PropertiesFile:
    """Read and parse a ``.properties`` file; an unreadable file is an error problem."""
    name = str(path)
    try:
        data = Path(path).read_bytes()
    except OSError as exc:
        return PropertiesFile(
            problems=[Problem(name, None, f"cannot read the file: {exc.strerror}")]
        )
    binary = binary_problem(data, name)
    if binary is not None:
        return PropertiesFile(problems=[binary])
    return parse_properties(decode(data), name)
