"""Standalone mode's state: the connectors' configurations and target states, in one file.

``<state.dir>/standalone/connectors.json`` holds every connector created at run time (through
the REST API or the Python API) and every one given on the command line, with its stored
configuration (``${...}`` references unresolved: secrets never reach the disk), its target
state, so a paused or stopped connector stays so across a restart, and its origin: the file that
defines it, or none for one created at run time. The origin is what lets the command line be the
truth for file-defined connectors (``daemon.runtime.worker.Worker.start``); an entry written
before origins were recorded reads as origin unknown. Each change rewrites the file atomically
(temporary file, fsync, rename, directory fsync): a kill at any instant leaves the old version
or the new one. All file I/O runs in a thread under a deadline, off the event loop.
"""

from __future__ import annotations

import asyncio
import json
import os
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from daemon.errors import StorageCorrupt
from daemon.storage.atomic import atomic_write, fsync_dir
from daemon.structs import TargetState

FORMAT = 1
IO_TIMEOUT = 30.0


@dataclass(frozen=True)
class Origin:
    """Where a connector came from. ``file``: the configuration file that defines it (a
    connector file on the command line, or the TOML of ``connectd run``); ``None``: created at
    run time, through the REST API (or the Python API)."""

    file: str | None = None

    @property
    def from_file(self) -> bool:
        return self.file is not None

    def __str__(self) -> str:
        return f"file {self.file}" if self.file is not None else "the REST API"


REST = Origin()


@dataclass(frozen=True)
class StoredConnector:
    """A stored connector. ``origin`` ``None``: not recorded (a state file from before
    origins were)."""

    config: Mapping[str, str]
    target: TargetState = TargetState.RUNNING
    origin: Origin | None = REST


class ConfigStore(Protocol):
    """Where a worker keeps connector configurations (standalone: a file; distributed: the
    config topic). ``save``/``delete`` return once the change is durable."""

    @property
    def where(self) -> str:
        """Where the state is kept, for log lines (e.g. the state file's path)."""
        ...

    async def load(self) -> dict[str, StoredConnector]: ...

    async def save(self, name: str, connector: StoredConnector) -> None: ...

    async def delete(self, name: str) -> None: ...


class MemoryStore:
    """A ``ConfigStore`` that forgets everything at exit (tests, embedding)."""

    where = "memory (not kept across restarts)"

    def __init__(self) -> None:
        self.connectors: dict[str, StoredConnector] = {}

    async def load(self) -> dict[str, StoredConnector]:
        return dict(self.connectors)

    async def save(self, name: str, connector: StoredConnector) -> None:
        self.connectors[name] = connector

    async def delete(self, name: str) -> None:
        self.connectors.pop(name, None)


class StandaloneStore:
    """The standalone state file under ``state_dir`` (see the module docstring)."""

    def __init__(self, state_dir: str | os.PathLike[str]) -> None:
        self.path = Path(state_dir) / "standalone" / "connectors.json"
        self._connectors: dict[str, StoredConnector] = {}
        self._loaded = False
        self._lock = asyncio.Lock()
        self._file_lock = threading.Lock()

    @property
    def where(self) -> str:
        return f"the state file {self.path}"

    async def load(self) -> dict[str, StoredConnector]:
        async with self._lock:
            self._connectors = await self._io(self._read)
            self._loaded = True
            return dict(self._connectors)

    async def save(self, name: str, connector: StoredConnector) -> None:
        async with self._lock:
            if not self._loaded:
                self._connectors = await self._io(self._read)
                self._loaded = True
            updated = {**self._connectors, name: connector}
            await self._io(lambda: self._write(updated))
            self._connectors = updated

    async def delete(self, name: str) -> None:
        async with self._lock:
            if not self._loaded:
                self._connectors = await self._io(self._read)
                self._loaded = True
            updated = {k: v for k, v in self._connectors.items() if k != name}
            await self._io(lambda: self._write(updated))
            self._connectors = updated

    @staticmethod
    async def _io(fn: Callable[[], dict[str, StoredConnector]]) -> dict[str, StoredConnector]:
        async with asyncio.timeout(IO_TIMEOUT):
            return await asyncio.to_thread(fn)

    def _read(self) -> dict[str, StoredConnector]:
        try:
            data = self.path.read_bytes()
        except FileNotFoundError:
            return {}
        try:
            doc = json.loads(data)
            if doc.get("format") != FORMAT:
                raise ValueError(f"format {doc.get('format')!r} is not {FORMAT}")
            out = {}
            for name, entry in doc["connectors"].items():
                config = entry["config"]
                if not isinstance(config, dict) or not all(
                    isinstance(k, str) and isinstance(v, str) for k, v in config.items()
                ):
                    raise ValueError(f"connector {name!r}: config is not a map of strings")
                out[name] = StoredConnector(
                    config, TargetState(entry.get("target", "RUNNING")), _origin(entry)
                )
            return out
        except (ValueError, KeyError, TypeError, AttributeError) as e:
            raise StorageCorrupt(
                f"standalone state file {self.path} cannot be read ({type(e).__name__}: {e});"
                " fix it or move it aside (connectors given on the command line are re-created)"
            ) from e

    def _write(self, connectors: Mapping[str, StoredConnector]) -> dict[str, StoredConnector]:
        doc = {
            "format": FORMAT,
            "connectors": {
                name: {"config": dict(c.config), "target": c.target.value, **_origin_doc(c)}
                for name, c in sorted(connectors.items())
            },
        }
        with self._file_lock:
            if not self.path.parent.is_dir():
                self.path.parent.mkdir(parents=True, exist_ok=True)
                fsync_dir(self.path.parent.parent)
            atomic_write(self.path, json.dumps(doc, indent=1, sort_keys=True).encode(), mode=0o600)
        return dict(connectors)


def _origin(entry: Mapping[str, object]) -> Origin | None:
    """``"origin": "file"`` with ``"file": path``, or ``"origin": "rest"``; no ``origin``: an
    older file, origin unknown."""
    origin = entry.get("origin")
    if origin is None:
        return None
    if origin == "rest":
        return REST
    file = entry.get("file")
    if origin == "file" and isinstance(file, str) and file:
        return Origin(file)
    raise ValueError(f"origin {origin!r} (file {file!r}) is not 'rest' or 'file' with a path")


def _origin_doc(c: StoredConnector) -> dict[str, str]:
    if c.origin is None:
        return {}
    if c.origin.file is None:
        return {"origin": "rest"}
    return {"origin": "file", "file": c.origin.file}
