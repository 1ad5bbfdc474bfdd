"""A JWT's three parts, decoded: what the OAUTHBEARER tests compare tokens by."""

from __future__ import annotations

import base64
import json
from typing import Any


def parts(token: str) -> tuple[dict[str, Any], dict[str, Any], str]:
    """``(header, claims, signature)`` of ``token`` (base64url, padding restored)."""
    header, claims, signature = token.split(".")
    return (
        json.loads(base64.urlsafe_b64decode(header + "==")),
        json.loads(base64.urlsafe_b64decode(claims + "==")),
        signature,
    )
