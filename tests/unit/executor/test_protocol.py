"""Framing of the pool ↔ executor messages."""

from __future__ import annotations

import socket
import struct
import threading

import pytest

from daemon.executor import protocol


def test_frames_round_trip_in_pieces() -> None:
    messages: list[protocol.Message] = [
        protocol.Run(1, "conn-0", "pkg.mod:fn", "/dev/shm/x.arrow", {"path": "/tmp/t"}),
        protocol.Accepted(1),
        protocol.Done(1, {"rows": 3}, 0.5),
        protocol.Failed(2, "ValueError", "bad", "Traceback...", 0.1, fatal=True),
        protocol.Heartbeat(123.0),
    ]
    stream = b"".join(protocol.encode(m) for m in messages)
    buf = protocol.FrameBuffer()
    got: list[protocol.Message] = []
    for i in range(0, len(stream), 7):  # arbitrary split points, as a socket delivers them
        got += buf.feed(stream[i : i + 7])
    assert got == messages


def test_oversized_and_unpicklable_messages_are_refused() -> None:
    with pytest.raises(protocol.FrameError, match="frame limit"):
        protocol.encode(protocol.Done(1, b"x" * (protocol.MAX_FRAME + 1), 0.0))
    with pytest.raises(protocol.FrameError, match="cannot pickle"):
        protocol.encode(protocol.Done(1, threading.Lock(), 0.0))
    with pytest.raises(protocol.FrameError, match="announced"):
        protocol.FrameBuffer().feed(struct.pack(">I", protocol.MAX_FRAME + 1))


def test_a_frame_that_is_not_a_message_is_refused() -> None:
    import pickle

    payload = pickle.dumps({"not": "a message"})
    with pytest.raises(protocol.FrameError, match="not a message"):
        protocol.FrameBuffer().feed(struct.pack(">I", len(payload)) + payload)


def test_blocking_receive_times_out_then_sees_eof() -> None:
    a, b = socket.socketpair()
    with a, b:
        assert protocol.recv_blocking(b, 0.01) is None
        protocol.send_blocking(a, protocol.Stop())
        assert protocol.recv_blocking(b, 1.0) == protocol.Stop()
        a.close()
        with pytest.raises(EOFError):
            protocol.recv_blocking(b, 1.0)
