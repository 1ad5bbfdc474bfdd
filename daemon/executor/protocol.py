"""Messages between the pool and an executor, and how they are framed on the control socket.

A frame is a 4-byte big-endian length followed by a pickle. Messages are small: a batch travels
as an Arrow file (``handoff.py``), never inside a frame. A frame above ``MAX_FRAME`` is refused
on both sides, so a corrupt length cannot make a reader allocate gigabytes.

Sequence, parent → child: ``Start`` once, then ``Run`` (one at a time) or ``Stop``.
Child → parent: ``Ready`` or ``StartFailed`` once; ``Heartbeat`` while idle; per ``Run``:
``Accepted`` at once, then ``Done`` or ``Failed``.
"""

from __future__ import annotations

import pickle
import select
import socket
import struct
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

MAX_FRAME = 16 * 1024 * 1024
WriteFunction = Callable[..., Any]
_HEADER = struct.Struct(">I")


@dataclass(frozen=True)
class Start:
    """Everything an executor needs to open its session (sent once, first)."""

    parent_pid: int
    with_spark: bool
    master: str
    conf: dict[str, str]
    heartbeat_interval: float
    nice: int
    warmup: bool
    warmup_dir: str
    #: When set, build a class-data-sharing archive at this path and exit instead of serving.
    archive_out: str | None = None
    #: The class-data-sharing archive the JVM options name (``Ready.archive_mapped`` says
    #: whether the JVM took it).
    archive_in: str | None = None
    #: A ``spark://`` master's web UI, read for its Spark line before the session opens.
    master_ui: tuple[str, ...] = ()


@dataclass(frozen=True)
class Ready:
    pid: int
    startup_seconds: float
    java_pid: int | None
    spark_version: str | None
    #: Whether the JVM mapped the class-data-sharing archive it was given (None: none given,
    #: or not known). The JVM falls back silently when it rejects one.
    archive_mapped: bool | None = None


@dataclass(frozen=True)
class StartFailed:
    message: str


@dataclass(frozen=True)
class Heartbeat:
    sent_at: float


@dataclass(frozen=True)
class Run:
    seq: int
    task_id: str
    fn: str
    batch_path: str | None
    kwargs: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Accepted:
    seq: int


@dataclass(frozen=True)
class Done:
    seq: int
    value: Any
    seconds: float


@dataclass(frozen=True)
class Failed:
    """The write function raised. ``fatal``: the executor's session is broken (its JVM died or
    the SparkContext stopped) and the executor exits right after this message. ``cause``: the
    root cause in one line when the message buries it (a Java trace: ``No space left on device
    on /path``), else None. ``recycle``: the failure may leave state in the session (a failed
    Spark job's open files), so the pool replaces the executor."""

    seq: int
    error: str
    message: str
    traceback: str
    seconds: float
    fatal: bool = False
    cause: str | None = None
    recycle: bool = False


@dataclass(frozen=True)
class Stop:
    """Finish nothing more; stop the session and exit."""


Message = Start | Ready | StartFailed | Heartbeat | Run | Accepted | Done | Failed | Stop


def function_ref(fn: str | WriteFunction) -> str:
    """``"package.module:function"`` for ``fn``; the executor imports it from there."""
    if isinstance(fn, str):
        if ":" not in fn:
            raise TypeError(f"write function {fn!r} must look like 'package.module:function'")
        return fn
    module, qualname = getattr(fn, "__module__", None), getattr(fn, "__qualname__", "")
    if not module or module == "__main__" or "<" in qualname:
        raise TypeError(
            f"write function {fn!r} must be a top-level function of an importable module"
            " (the executor imports it by name)"
        )
    return f"{module}:{qualname}"


class FrameError(Exception):
    """A frame was too large or not a message."""


def encode(msg: Message) -> bytes:
    """One frame for ``msg``; raises ``FrameError`` if it does not pickle or is too large."""
    try:
        payload = pickle.dumps(msg, protocol=pickle.HIGHEST_PROTOCOL)
    except Exception as exc:
        raise FrameError(f"cannot pickle {type(msg).__name__}: {exc}") from exc
    if len(payload) > MAX_FRAME:
        raise FrameError(
            f"{type(msg).__name__} is {len(payload)} bytes, above the {MAX_FRAME}-byte frame limit;"
            " pass large data as the batch"
        )
    return _HEADER.pack(len(payload)) + payload


def decode(payload: bytes) -> Message:
    msg = pickle.loads(payload)
    if not isinstance(
        msg, Start | Ready | StartFailed | Heartbeat | Run | Accepted | Done | Failed | Stop
    ):
        raise FrameError(f"not a message: {type(msg).__name__}")
    return msg


class FrameBuffer:
    """Incremental decoder for the parent's non-blocking reads."""

    def __init__(self) -> None:
        self._buf = bytearray()

    def feed(self, data: bytes) -> list[Message]:
        self._buf += data
        out: list[Message] = []
        while len(self._buf) >= _HEADER.size:
            (size,) = _HEADER.unpack_from(self._buf)
            if size > MAX_FRAME:
                raise FrameError(f"frame of {size} bytes announced, limit {MAX_FRAME}")
            end = _HEADER.size + size
            if len(self._buf) < end:
                break
            out.append(decode(bytes(self._buf[_HEADER.size : end])))
            del self._buf[:end]
        return out


def send_blocking(sock: socket.socket, msg: Message) -> None:
    """Child side: send one message (blocking)."""
    sock.sendall(encode(msg))


def recv_blocking(sock: socket.socket, timeout: float | None) -> Message | None:
    """Child side: the next message, or None if none arrived within ``timeout``.

    Raises ``EOFError`` when the parent closed its end (the parent is gone).
    """
    if timeout is not None:
        ready, _, _ = select.select([sock], [], [], timeout)
        if not ready:
            return None
    (size,) = _HEADER.unpack(_recv_exact(sock, _HEADER.size))
    if size > MAX_FRAME:
        raise FrameError(f"frame of {size} bytes announced, limit {MAX_FRAME}")
    return decode(_recv_exact(sock, size))


def _recv_exact(sock: socket.socket, n: int) -> bytes:
    chunks = bytearray()
    while len(chunks) < n:
        chunk = sock.recv(n - len(chunks))
        if not chunk:
            raise EOFError("control socket closed by the pool")
        chunks += chunk
    return bytes(chunks)
