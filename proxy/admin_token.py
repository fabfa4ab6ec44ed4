"""The admin token: what counts as one, how it is compared, made, kept in a file, and how the
status page remembers a browser that signed in with it.

Whoever holds it decides which commands a harness runs (it sets and chooses scripts), so a proxy
is never without one unless its operator says so (--insecure-admin): `serve` makes one when none
is given and writes it to a file only its user can read. A placeholder from an example
(`change-me`) or anything short is refused, as it would be guessed. The status page's cookie
holds a signature made with the token, never the token itself, and the token never travels in a
URL (browsers keep addresses in their history, servers in their logs).
"""

from __future__ import annotations

import hashlib
import hmac
import os
import secrets
import tempfile
from pathlib import Path

SHORTEST = 16
# words of example values; a token that holds one was copied from a page, not made
_PLACEHOLDERS = (
    "changeme",
    "replaceme",
    "yourtoken",
    "yoursecret",
    "placeholder",
    "example",
    "insertyour",
    "xxxxxx",
)
SIGN_IN_SECONDS = 12 * 3600  # a browser signs in again after this
_COOKIE_PURPOSE = b"replay-proxy status page sign-in\x00"


def weak_token(token: str) -> str | None:
    """Why `token` cannot be the admin token, or None when it can."""
    letters = "".join(c for c in token.lower() if c.isalnum())
    if any(word in letters for word in _PLACEHOLDERS):
        return (
            "the admin token is a placeholder from an example; make a real one (openssl rand "
            "-hex 32), or leave it unset and the proxy makes one at start"
        )
    if len(token) < SHORTEST or len(set(token)) < SHORTEST // 2:
        return (
            f"the admin token is too easy to guess: give at least {SHORTEST} characters, not "
            "a repeated few (openssl rand -hex 32 makes one), or leave it unset and the proxy "
            "makes one at start"
        )
    if any(ord(c) < 0x21 or ord(c) > 0x7E for c in token):
        return "the admin token may hold only visible ASCII characters (it travels in a header)"
    return None


def make() -> str:
    return secrets.token_urlsafe(32)


def matches(token: str, given: str) -> bool:
    """`given` is the token, compared in constant time."""
    return hmac.compare_digest(given.encode(), token.encode())


def sign_in(token: str, now: float) -> str:
    """The status page's cookie value: when it expires, signed with the token."""
    expires = str(int(now) + SIGN_IN_SECONDS)
    return f"{expires}.{_signature(token, expires)}"


def signed_in(token: str, cookie: str, now: float) -> bool:
    """The cookie was made by sign_in with this token and has not expired."""
    expires, dot, signature = cookie.partition(".")
    if not dot or not expires.isdigit() or len(expires) > 12:
        return False
    return hmac.compare_digest(signature, _signature(token, expires)) and int(expires) > now


def _signature(token: str, expires: str) -> str:
    return hmac.new(token.encode(), _COOKIE_PURPOSE + expires.encode(), hashlib.sha256).hexdigest()


def default_file(port: int) -> Path:
    """Where a token made at start is written: the user's runtime folder, else their cache
    folder, else a folder of their own in the temporary folder."""
    name = f"admin-token-{port}"
    runtime = os.environ.get("XDG_RUNTIME_DIR")
    folders = [Path(runtime) / "replay-proxy"] if runtime else []
    folders.append(
        Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "replay-proxy"
    )
    folders.append(Path(tempfile.gettempdir()) / f"replay-proxy-{os.getuid()}")
    for folder in folders:
        if _private_folder(folder):
            return folder / name
    return folders[-1] / name  # writing it says why it cannot


def _private_folder(folder: Path) -> bool:
    """The folder exists (made if need be, 0700) and belongs to this user alone."""
    try:
        folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        info = folder.stat()
    except OSError:
        return False
    return info.st_uid == os.getuid() and info.st_mode & 0o077 == 0


def write_file(path: Path, token: str) -> None:
    """The token in `path`, readable by this user only (made so before anything is written)."""
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
    try:
        os.fchmod(fd, 0o600)  # an existing file keeps its mode through O_CREAT
        os.write(fd, token.encode() + b"\n")
    finally:
        os.close(fd)


def remove_file(path: Path, token: str) -> None:
    """Take the file away at exit, if it still holds this token, or the part of it written
    before the proxy was stopped (another proxy may have taken the same port and the file
    since)."""
    try:
        if token.startswith(path.read_text().strip()):
            path.unlink()
    except OSError:
        pass
