"""HTTP basic authentication from ``rest.auth.basic.credentials.file``, and ``connectd passwd``.

The file has one ``user:hash`` line per user (``#`` comments and blank lines allowed); the hash
is ``$scrypt$ln=14,r=8,p=1$<salt>$<digest>`` (base64), made by ``connectd passwd FILE USER``.
Passwords are never stored or logged. The file is re-read when it changes, so users can be
added without a restart; if it becomes unreadable, nobody is let in until it is fixed.

A scrypt check costs ~50 ms and runs in a thread (never on the event loop), at most two at a
time; a credential that passed is remembered by its keyed hash (per-process random key), so a
client polling ``/status`` pays that cost once. Every path but ``/health`` needs credentials;
without them the answer is 401 with ``WWW-Authenticate: Basic``.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import binascii
import getpass
import hashlib
import hmac
import logging
import os
import secrets
import sys
import unicodedata
from collections import OrderedDict
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

from aiohttp import web
from aiohttp.typedefs import Handler, Middleware

from daemon.errors import ConfigError
from daemon.rest.api import USER
from daemon.rest.errors import RestError
from daemon.storage.atomic import atomic_write

log = logging.getLogger("connectd.rest.auth")

CHALLENGE = 'Basic realm="connectd", charset="UTF-8"'
_LOG_N, _R, _P = 14, 8, 1
_CACHE_SIZE = 256


@dataclass(frozen=True)
class Credential:
    user: str
    log_n: int
    r: int
    p: int
    salt: bytes
    digest: bytes

    def matches(self, password: str) -> bool:
        """Blocking (~50 ms): run it in a thread."""
        derived = _scrypt(password, self.salt, self.log_n, self.r, self.p, len(self.digest))
        return hmac.compare_digest(derived, self.digest)


def _scrypt(password: str, salt: bytes, log_n: int, r: int, p: int, size: int = 32) -> bytes:
    n = 1 << log_n
    return hashlib.scrypt(
        password.encode("utf-8"), salt=salt, n=n, r=r, p=p, maxmem=256 * n * r, dklen=size
    )


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii").rstrip("=")


def _unb64(text: str) -> bytes:
    return base64.b64decode(text + "=" * (-len(text) % 4), validate=True)


def hash_password(password: str) -> str:
    """A fresh salted scrypt hash of ``password``, in the credentials file's format."""
    salt = secrets.token_bytes(16)
    digest = _scrypt(password, salt, _LOG_N, _R, _P)
    return f"$scrypt$ln={_LOG_N},r={_R},p={_P}${_b64(salt)}${_b64(digest)}"


def check_user_name(user: str) -> str | None:
    """Why ``user`` cannot be a user name, or ``None`` if it can."""
    if not user:
        return "the user name is empty"
    if ":" in user:
        return "a user name cannot contain ':' (HTTP basic auth splits on it)"
    if any(unicodedata.category(c) in ("Cc", "Zs", "Zl", "Zp") for c in user):
        return "a user name cannot contain spaces or control characters"
    return None


def parse_line(line: str) -> Credential:
    """One ``user:hash`` line; ``ValueError`` saying what is wrong."""
    user, sep, hashed = line.partition(":")
    problem = check_user_name(user) if sep else "no ':' between user and hash"
    if problem:
        raise ValueError(problem)
    parts = hashed.split("$")
    if len(parts) != 5 or parts[0] or parts[1] != "scrypt":
        raise ValueError("the hash is not $scrypt$ln=N,r=R,p=P$SALT$DIGEST")
    try:
        params = dict(item.split("=", 1) for item in parts[2].split(","))
        log_n, r, p = int(params["ln"]), int(params["r"]), int(params["p"])
        salt, digest = _unb64(parts[3]), _unb64(parts[4])
    except (KeyError, ValueError, binascii.Error):
        raise ValueError("the hash's parameters, salt or digest cannot be read") from None
    if not (1 <= log_n <= 20 and 1 <= r <= 32 and 1 <= p <= 16 and salt and len(digest) >= 16):
        raise ValueError("the hash's parameters are out of range")
    return Credential(user, log_n, r, p, salt, digest)


def read_credentials(path: Path) -> dict[str, Credential]:
    """Every user in the file; ``ConfigError`` naming the file and line of the first problem."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"rest.auth.basic.credentials.file: cannot read {path}: {exc}") from exc
    users: dict[str, Credential] = {}
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        try:
            credential = parse_line(line)
        except ValueError as exc:
            raise ConfigError(
                f"{path}:{number}: {exc}; add users with: connectd passwd {path} USER"
            ) from None
        users[credential.user] = credential
    return users


class BasicAuth:
    """Checks ``Authorization`` headers against the credentials file."""

    def __init__(self, path: Path) -> None:
        self._path = path
        self._users = read_credentials(path)  # fail at start-up if unreadable
        self._stamp = self._file_stamp()
        self._key = secrets.token_bytes(32)
        self._passed: OrderedDict[bytes, str] = OrderedDict()
        self._slots = asyncio.Semaphore(2)

    def _file_stamp(self) -> tuple[int, int, int] | None:
        try:
            st = os.stat(self._path)
        except OSError:
            return None
        return (st.st_mtime_ns, st.st_size, st.st_ino)

    def _reload_if_changed(self) -> None:
        stamp = self._file_stamp()
        if stamp == self._stamp:
            return
        self._stamp = stamp
        self._passed.clear()
        try:
            self._users = read_credentials(self._path)
            log.info("re-read %s: %d user(s)", self._path, len(self._users))
        except ConfigError as exc:
            self._users = {}
            log.error("%s; nobody can authenticate until it is fixed", exc)

    async def authenticate(self, header: str | None) -> str | None:
        """The user the header proves to be, or ``None``."""
        self._reload_if_changed()
        if header is None or header[:6].lower() != "basic ":
            return None
        try:
            decoded = base64.b64decode(header[6:].strip(), validate=True)
        except (binascii.Error, ValueError):
            return None
        try:
            text = decoded.decode("utf-8")
        except UnicodeDecodeError:
            text = decoded.decode("latin-1")
        user, sep, password = text.partition(":")
        if not sep:
            return None
        token = hmac.digest(self._key, decoded, "sha256")
        if self._passed.get(token) == user and user in self._users:
            self._passed.move_to_end(token)
            return user
        credential = self._users.get(user)
        async with self._slots:
            if credential is None:  # spend the same time: do not reveal which users exist
                await asyncio.to_thread(_scrypt, password, b"connectd", _LOG_N, _R, _P)
                return None
            if not await asyncio.to_thread(credential.matches, password):
                return None
        self._passed[token] = user
        if len(self._passed) > _CACHE_SIZE:
            self._passed.popitem(last=False)
        return user

    def middleware(self, public_paths: Collection[str]) -> Middleware:
        """Credentials required on every path but ``public_paths`` (exact paths)."""
        public = frozenset(public_paths)

        @web.middleware
        async def basic_auth(request: web.Request, handler: Handler) -> web.StreamResponse:
            if request.path not in public:
                user = await self.authenticate(request.headers.get("Authorization"))
                if user is None:
                    raise RestError(
                        401,
                        "HTTP 401 Unauthorized: valid credentials are required",
                        {"WWW-Authenticate": CHALLENGE},
                    )
                request[USER] = user
            return await handler(request)

        return basic_auth


# --- connectd passwd FILE USER ---------------------------------------------------------------

EX_USAGE, EX_DATAERR, EX_IOERR = 64, 65, 74


def _read_password(stdin: TextIO, stderr: TextIO) -> str | None:
    if stdin.isatty():
        first = getpass.getpass("Password: ")
        if getpass.getpass("Retype password: ") != first:
            print("connectd passwd: the passwords differ; nothing changed", file=stderr)
            return None
        return first
    return stdin.readline().rstrip("\r\n")


def passwd_main(
    argv: Sequence[str] | None = None,
    *,
    stdin: TextIO | None = None,
    stdout: TextIO | None = None,
    stderr: TextIO | None = None,
) -> int:
    """``connectd passwd FILE USER``: add USER to FILE, or change USER's password.

    The password is read from a terminal prompt (typed twice), or as one line from standard
    input when it is not a terminal. FILE is rewritten atomically with mode 0600.
    """
    stdin, stdout, stderr = stdin or sys.stdin, stdout or sys.stdout, stderr or sys.stderr
    parser = argparse.ArgumentParser(
        prog="connectd passwd",
        description="Add a user to a rest.auth.basic.credentials.file, or change a password.",
    )
    parser.add_argument("file", type=Path, metavar="FILE")
    parser.add_argument("user", metavar="USER")
    args = parser.parse_args(argv)
    problem = check_user_name(args.user)
    if problem:
        print(f"connectd passwd: {problem}", file=stderr)
        return EX_USAGE
    password = _read_password(stdin, stderr)
    if password is None:
        return EX_DATAERR
    if not password:
        print("connectd passwd: the password is empty; nothing changed", file=stderr)
        return EX_DATAERR
    path: Path = args.file
    try:
        lines = path.read_text(encoding="utf-8").splitlines() if path.exists() else []
    except (OSError, UnicodeDecodeError) as exc:
        print(f"connectd passwd: cannot read {path}: {exc}", file=stderr)
        return EX_IOERR
    entry = f"{args.user}:{hash_password(password)}"
    kept = [line for line in lines if line.strip().partition(":")[0] != args.user]
    existed = len(kept) != len(lines)
    try:
        atomic_write(path, ("\n".join([*kept, entry]) + "\n").encode("utf-8"), mode=0o600)
    except OSError as exc:
        print(f"connectd passwd: cannot write {path}: {exc}", file=stderr)
        return EX_IOERR
    print(
        f"{'changed the password of' if existed else 'added'} user {args.user} in {path}",
        file=stdout,
    )
    return 0
