"""Standalone mode: one process, its connectors from the command line's files and the REST
API, kept in a local store (``herder.py``; ``files.py``: files against the store)."""

from daemon.runtime.standalone.herder import StandaloneHerder

__all__ = ["StandaloneHerder"]
