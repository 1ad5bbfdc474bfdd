"""``Spec``: what the parent (``FrontedRestServer``) tells the REST front process, as one JSON
line on the front's stdin. The key's password travels here, never in argv or the environment."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from daemon.rest.settings import TlsSettings


@dataclass(frozen=True)
class Spec:
    """What the parent tells the front (one JSON object on stdin)."""

    listeners: list[tuple[int, str]]
    """(inherited file descriptor, scheme) per listening socket."""
    back: str
    token: str
    max_body_bytes: int
    request_timeout: float
    shutdown_timeout: float
    refresh_interval: float
    log_level: str
    log_format: str
    credentials_file: str | None = None
    tls: dict[str, Any] | None = None

    @classmethod
    def from_json(cls, line: bytes) -> Spec:
        data = json.loads(line)
        data["listeners"] = [(int(fd), str(scheme)) for fd, scheme in data["listeners"]]
        return cls(**data)

    def to_json(self) -> str:
        return json.dumps(self.__dict__)

    @staticmethod
    def tls_json(tls: TlsSettings | None) -> dict[str, Any] | None:
        """``tls`` as the spec carries it (file paths, the key's password)."""
        if tls is None:
            return None
        return {
            "keystore_location": str(tls.keystore_location),
            "key_password": tls.key_password,
            "truststore_location": (
                str(tls.truststore_location) if tls.truststore_location else None
            ),
            "client_auth": tls.client_auth,
        }

    def tls_settings(self) -> TlsSettings | None:
        if self.tls is None:
            return None
        t = self.tls
        return TlsSettings(
            keystore_location=Path(t["keystore_location"]),
            key_password=t.get("key_password"),
            truststore_location=(
                Path(t["truststore_location"]) if t.get("truststore_location") else None
            ),
            client_auth=t.get("client_auth", "none"),
        )
