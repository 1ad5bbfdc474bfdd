"""What lives across a task's incarnations: the task id's slot, the stop sequence that ends
each incarnation, the automatic restarts, and the task's freshness.

``TaskSlot`` (``slot.py``) holds at most one live incarnation and starts a new one only after
the stop sequence (``stop.py``) confirmed the old one reaped; ``AutoRestarter`` and
``RestartPolicy`` (``autorestart.py``: Strimzi's schedule, also used for connectors) restart a
failed one; ``Freshness`` (``freshness.py``) keeps what the task committed against its log.
"""

from daemon.runtime.slot.autorestart import REAL_CLOCK, AutoRestarter, Clock, RestartPolicy
from daemon.runtime.slot.freshness import Freshness, SlotRecorder
from daemon.runtime.slot.slot import TaskSlot

__all__ = [
    "REAL_CLOCK",
    "AutoRestarter",
    "Clock",
    "Freshness",
    "RestartPolicy",
    "SlotRecorder",
    "TaskSlot",
]
