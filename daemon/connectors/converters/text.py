"""Connect's ``ByteArrayConverter`` and ``StringConverter``, and the text decoding JSON shares.

Both build Arrow arrays straight from the lists of bytes, with no Python work per record unless
a record is bad.
"""

from __future__ import annotations

import codecs
from collections.abc import Mapping, Sequence

import pyarrow as pa

from daemon.connectors.converters.base import Converted, Converter
from daemon.errors import ConfigError


class ByteArrayConverter(Converter):
    """Keeps the bytes as they are: a ``binary`` column."""

    settings = ()

    connect_name = "org.apache.kafka.connect.converters.ByteArrayConverter"

    def convert(self, data: Sequence[bytes | None]) -> Converted:
        return Converted({self.side: pa.array(data, pa.binary())}, schema=True)


class StringConverter(Converter):
    """Decodes text into a ``string`` column. Option ``encoding`` (default UTF-8).

    Bytes that are not valid in the encoding become U+FFFD and the record is kept, as Connect's
    ``StringConverter`` does (Java's ``new String(bytes, charset)`` replaces malformed input):
    a record Connect would deliver must not fail or dead-letter here.
    """

    connect_name = "org.apache.kafka.connect.storage.StringConverter"
    settings = ("encoding", "converter.encoding")

    def __init__(self) -> None:
        super().__init__()
        self.encoding = "utf-8"

    def configure(self, options: Mapping[str, str], *, is_key: bool) -> None:
        super().configure(options, is_key=is_key)
        name = options.get("encoding", options.get("converter.encoding", "UTF-8"))
        try:
            self.encoding = codecs.lookup(name).name
        except LookupError:
            raise ConfigError(
                f"{self.side}.converter.encoding: unknown encoding {name!r}; "
                "use a standard name such as UTF-8 or ISO-8859-1"
            ) from None

    def convert(self, data: Sequence[bytes | None]) -> Converted:
        column, errors = decode_text(data, self.encoding, errors="replace")
        return Converted({self.side: column}, errors, schema=True)


def decode_text(
    data: Sequence[bytes | None], encoding: str = "utf-8", *, errors: str = "strict"
) -> tuple[pa.Array, dict[int, Exception]]:
    """Bytes → a ``string`` array. UTF-8 is validated by Arrow in one pass over the batch; only
    when that fails (or for other encodings) are records decoded one by one. ``errors`` is the
    codec's error handler: ``strict`` reports a record that does not decode, ``replace`` keeps
    it with U+FFFD in place of the bad bytes."""
    if encoding == "utf-8":
        try:
            return pa.array(data, pa.binary()).cast(pa.string()), {}
        except pa.ArrowInvalid:
            pass
    texts, failed = decode_each(data, encoding, errors=errors)
    return string_array(texts, failed), failed


def decode_each(
    data: Sequence[bytes | None], encoding: str = "utf-8", *, errors: str = "strict"
) -> tuple[list[str | None], dict[int, Exception]]:
    texts: list[str | None] = []
    failed: dict[int, Exception] = {}
    for i, b in enumerate(data):
        try:
            texts.append(None if b is None else bytes(b).decode(encoding, errors))
        except UnicodeDecodeError as e:
            failed[i] = e
            texts.append(None)
    return texts, failed


def string_array(texts: list[str | None], errors: dict[int, Exception]) -> pa.Array:
    """A ``string`` array; a text Arrow refuses (a lone surrogate) becomes its row's error."""
    try:
        return pa.array(texts, pa.string())
    except (pa.ArrowException, UnicodeError):
        for i, t in enumerate(texts):
            try:
                if t is not None:
                    t.encode("utf-8")
            except UnicodeEncodeError as e:
                errors[i] = e
                texts[i] = None
        return pa.array(texts, pa.string())
