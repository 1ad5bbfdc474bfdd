"""Every use of aiokafka's private state, in one package, checked against aiokafka 0.14.0.

aiokafka keeps some of what connectd needs outside its public API: a consumer's group
generation and member id, its positions and highwaters read without waiting, a position reset
without waiting, a client's connections and when each last answered, a request its admin
client has no call for. Each such use is a function here; nothing else in ``daemon/`` touches
an aiokafka attribute or method whose name starts with ``_``.

Importing this package with an aiokafka other than ``SUPPORTED`` raises ``ImportError``, so an
upgrade is a deliberate step: re-read what each module relies on (below; paths under
``aiokafka/``, lines of 0.14.0) in the new version's sources, then add it to ``SUPPORTED``.

- ``coordinator`` (distributed mode's membership, ``daemon.cluster.member``):
  ``AIOKafkaConsumer._coordinator`` (consumer/consumer.py L403, set by ``start`` with a
  ``group_id``: a ``GroupCoordinator``); its ``generation`` and ``member_id``
  (consumer/group_coordinator.py L1314-1315, set together before ``_on_join_leader`` runs;
  ``reset_generation`` L530 puts ``member_id`` back to ``JoinGroupRequest.UNKNOWN_MEMBER_ID``);
  its ``request_rejoin()`` (L538).
- ``positions`` (a task's consumer, ``daemon.runtime.incarnation.consumer``):
  ``AIOKafkaConsumer._subscription`` (consumer/consumer.py L341, a ``SubscriptionState``) →
  ``.subscription`` → ``.assignment`` (``None`` while nothing is assigned) → ``.tps`` and
  ``.state_value(tp)`` → ``has_valid_position``, ``position``, ``highwater``
  (consumer/subscription_state.py L57, L336, L405, L415, L461, L487-491: what the public
  ``highwater()`` reads, consumer/consumer.py L714); ``AIOKafkaConsumer._fetcher`` (L384)
  ``.request_offset_reset(tps, strategy)`` (consumer/fetcher.py L1293, what
  ``seek_to_beginning``/``seek_to_end`` call) with ``OffsetResetStrategy`` (fetcher.py L29).
- ``client`` (the outage filter; the connector offsets API's group deletion,
  ``daemon.runtime.offsets``): ``AIOKafkaConsumer._client`` (consumer/consumer.py L298, an
  ``AIOKafkaClient``); the client's ``_conns`` (client.py L155: ``(node id or "bootstrap",
  group)`` → connection) and ``_request_timeout_ms`` (L140); each connection's
  ``_last_action`` (conn.py: ``time.monotonic()`` when made, L170, and on every answer, L577);
  ``AIOKafkaAdminClient._send_request_to_node(node, request)`` (admin/client.py L160).
- ``traffic`` (Kafka's ``consumer-metrics`` figures of a task's consumer: bytes and responses
  received, live connections): ``AIOKafkaConnection._handle_frame`` (conn.py L531, called by
  ``_read`` L509 with each response's bytes after their 4-byte size), wrapped once per process;
  the connection's ``_client_id`` (L149); the client's ``_conns`` (client.py L155) and each
  connection's ``connected()`` (conn.py L467).
- ``outages`` (the broker-outage filter on aiokafka's loggers): no attribute of its own, but
  the wording of aiokafka's lines it recognises (client.py L216, L223, L305, L325, L435;
  consumer/fetcher.py L749, L987; consumer/group_coordinator.py L312, L566, L810, L957;
  producer/sender.py L401, L406) and the loggers they are logged on; the connections through
  ``client``.

Nothing here imports connectd's configuration or runtime: the callers pass aiokafka's objects.
"""

from __future__ import annotations

import aiokafka

#: The aiokafka versions whose private state this package was checked against.
SUPPORTED = frozenset({"0.14.0"})

if aiokafka.__version__ not in SUPPORTED:  # pragma: no cover - depends on the install
    raise ImportError(
        f"daemon.kafka needs aiokafka {' or '.join(sorted(SUPPORTED))} (it reads private"
        f" consumer, coordinator and client state), found {aiokafka.__version__}: install a"
        " supported version"
    )
