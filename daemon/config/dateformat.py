"""Java's ``SimpleDateFormat`` patterns, as far as connectd reads and writes them
(``TimestampConverter``'s ``format``): split into parts here, where a connector's configuration
is checked, and used by ``daemon.connectors.transforms.timestamps``."""

from __future__ import annotations

from dataclasses import dataclass

#: The pattern letters connectd reads and writes; any other letter is refused.
LETTERS = "yMdHhkKmsSaEDuzZX"


@dataclass(frozen=True)
class Part:
    """A run of one pattern letter (``letter``, ``count`` times), or literal ``text``."""

    letter: str  # "" for literal text
    count: int
    text: str = ""


def compile_pattern(pattern: str) -> tuple[Part, ...]:
    """``pattern``'s parts (``ValueError`` naming a letter connectd does not read or write)."""
    parts: list[Part] = []
    i = 0
    while i < len(pattern):
        c = pattern[i]
        if c == "'":
            end = i + 1
            text = ""
            while True:
                j = pattern.find("'", end)
                if j < 0:
                    raise ValueError(f"unterminated quote in {pattern!r}")
                if j + 1 < len(pattern) and pattern[j + 1] == "'":
                    text += pattern[end:j] + "'"
                    end = j + 2
                    continue
                text += pattern[end:j]
                break
            parts.append(Part("", 0, text if end > i + 1 or text else "'"))
            i = j + 1
            continue
        if c.isascii() and c.isalpha():
            if c not in LETTERS:
                raise ValueError(
                    f"pattern letter {c!r} in {pattern!r} is not one connectd reads or writes "
                    f"(it reads {' '.join(LETTERS)} and quoted text)"
                )
            j = i
            while j < len(pattern) and pattern[j] == c:
                j += 1
            parts.append(Part(c, j - i))
            i = j
            continue
        parts.append(Part("", 0, c))
        i += 1
    return tuple(parts)
