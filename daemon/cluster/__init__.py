"""Distributed mode's worker group: who is a member, who leads, who runs which connector and task.

- ``protocol``: member metadata and assignments as versioned JSON in the group protocol.
- ``assignor``: the pure incremental cooperative assignor (balanced, sticky, never twice).
- ``member``: one worker's membership on aiokafka's consumer-group protocol (the generation
  and member id aiokafka keeps private are read through ``daemon.kafka.coordinator``).

Nothing here imports the runtime, the connectors or REST: the daemon wires these in.
"""

from __future__ import annotations

from daemon.cluster.assignor import ClusterConfig, LeaderState, Policy, Reserved, Round, assign
from daemon.cluster.member import Assigned, Event, Lost, Member, MemberSettings, Undecodable
from daemon.cluster.protocol import (
    Allocation,
    Assignment,
    AssignmentError,
    MemberMetadata,
    ProtocolError,
    decode_assignment,
    decode_metadata,
    encode_assignment,
    encode_metadata,
)

__all__ = [
    "Allocation",
    "Assigned",
    "Assignment",
    "AssignmentError",
    "ClusterConfig",
    "Event",
    "LeaderState",
    "Lost",
    "Member",
    "MemberMetadata",
    "MemberSettings",
    "Policy",
    "ProtocolError",
    "Reserved",
    "Round",
    "Undecodable",
    "assign",
    "decode_assignment",
    "decode_metadata",
    "encode_assignment",
    "encode_metadata",
]
