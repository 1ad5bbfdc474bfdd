"""What lives one incarnation of a task, and dies with it.

``Incarnation`` (``incarnation.py``) is the coroutine that polls, converts, puts and commits;
it holds its parts, each with its own state: the consumer (``consumer.py``), the sink's context
(``context.py``), conversion and the errant-record policy before ``put`` (``pipeline.py``),
partition positions (``progress.py``), the rebalance listener (``rebalance.py``), retries of a
delivery step (``retry.py``, ``errors.retry.*``), offsets no longer in the log (``gaps.py``),
and the bounds on its awaits (``deadlines.py``). What outlives an incarnation is in
``daemon.runtime.slot``.
"""

from daemon.runtime.incarnation.incarnation import Incarnation

__all__ = ["Incarnation"]
