"""Distributed mode: workers with one ``group.id`` share connectors and tasks through Kafka.

``DistributedHerder`` (``herder.py``) is the REST API's ``Herder``: reads from what this worker
read, writes through the leader (``forward.py``, ``leader.py``). It holds the ``HerderLoop``
(``loop.py``): group membership on Kafka's coordinator, the config log, the statuses
(``statuses.py``) and this process's ``Worker``, which runs what the group assigned.
"""

from daemon.runtime.distributed.herder import DistributedHerder
from daemon.runtime.distributed.loop import HerderLoop

__all__ = ["DistributedHerder", "HerderLoop"]
