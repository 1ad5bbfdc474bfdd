"""The errors of distributed mode's Kafka-backed stores.

They live here, beside the stores, because they only mean something to them; each subclasses the
project-wide taxonomy of ``daemon.errors`` so the CLI's exit codes and the restart policy read
them as they read any other error.
"""

from __future__ import annotations

from daemon.errors import ConfigError, ConnectdError


class InternalTopicInvalid(ConfigError):
    """An existing internal topic (config, offsets, status) has settings the store cannot work
    with: the config topic with more than one partition, or a ``cleanup.policy`` other than
    ``compact``. Not retriable (the CLI exits 78); the message names the topic, the worker setting
    that names it, what is wrong and how to fix it."""

    retriable = False

    def __init__(self, topic: str, setting: str, problem: str, fix: str) -> None:
        self.topic = topic
        self.setting = setting
        super().__init__(f"{setting}={topic}: {problem}. {fix}")


class LeaderFenced(ConnectdError):
    """A newer config-log writer with the same transactional id (a newer leader) started, so the
    broker fenced this one: the write that raised this was never committed and no
    ``read_committed`` reader ever sees it. The writer is closed; only a worker that is still
    the leader may start a new one. Not retriable with the same writer."""

    retriable = False


class ConfigWriteFailed(ConnectdError):
    """A config-log transaction failed for another reason than fencing or a timeout (a broker
    error, a record too large); it was aborted, never committed, and the writer is closed, as
    Connect drops its producer after any failed privileged write. Retriable with a new writer."""

    retriable = True


class StoreTimeout(ConnectdError):
    """Reading an internal topic to its end, or a write to it, did not finish within its
    deadline. The message names the topic and how far it got. Retriable: the broker may be slow
    or a partition leaderless for a moment."""

    retriable = True


class WriteOutcomeUnknown(StoreTimeout):
    """A config-log transaction did not finish within its deadline. It was either committed or
    will be aborted by the broker; read the log to its end to know which. The writer is closed."""
