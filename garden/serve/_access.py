"""Who may ask a served garden: the rule every HTTP request passes before it is routed.

A server on loopback is reachable by every program on the machine, and, through the
user's browser, by every web page the user opens. A page cannot read a packet from another
origin unless the server lets it, but it can send requests: a cross-site form or `fetch`
with `text/plain` (no preflight), or, after DNS rebinding (its own name made to resolve to
127.0.0.1), requests the browser counts as same-origin. So:

- `Host` must name the server by a loopback name or address (`localhost`, `127.0.0.1`,
  `[::1]`), by the address it is bound to, or by a name the operator allowed
  (`--allow-host`); a rebinding page's requests carry its own name and are refused (403);
- a request carrying an `Origin` other than the server's own (its scheme, an allowed host,
  its port) is refused (403): the server serves no pages, so no page has reason to ask;
- `POST /query`, `/remember` and `/forget` take `application/json` only (415 otherwise),
  which a page on another origin can send only after a CORS preflight that the server
  never grants;
- with a token (required beyond loopback, `--token-file`), every request carries
  `Authorization: Bearer TOKEN`, compared in constant time (`hmac.compare_digest`), or is
  refused (401).

The token is read once, from a file the operator names, which must be theirs and private
(no group or other bits), as every secret and derived file of the garden is.
"""
from __future__ import annotations

import hmac
import ipaddress
import os
import stat
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from garden.errors import GardenError
from garden.text import one_line, shown

MIN_TOKEN_CHARS = 16
MAX_TOKEN_BYTES = 4096
JSON_PATHS = {"/query": "query", "/remember": "write", "/forget": "write"}   # POSTs a page cannot send unasked
TOKEN_HINT = "python3 -c 'import secrets; print(secrets.token_urlsafe(32))' > FILE && chmod 600 FILE"


def is_loopback(host: str) -> bool:
    """`localhost`, or an address of the loopback network (127.0.0.0/8, ::1)."""
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def host_name(value: str) -> str | None:
    """The host a `Host` header names, lower-cased, without its port (an IPv6 address
    without its brackets); None when it is not a host with an optional port."""
    value = value.strip().lower()
    if value.startswith("["):
        end = value.find("]")
        name, rest = (value[1:end], value[end + 1:]) if end > 0 else ("", "")
    else:
        name, colon, port = value.partition(":")
        rest = colon + port
    if rest and not (rest[0] == ":" and rest[1:].isascii() and rest[1:].isdigit()):
        return None
    if not name or any(ch in name for ch in "/@[] \t"):
        return None
    return name


def read_token(path: str | Path) -> bytes:
    """The bearer token in `path`: a regular file of the user's own that nobody else may
    read or write, holding at least MIN_TOKEN_CHARS characters; GardenError naming the
    file otherwise."""
    from garden._files import open_regular

    where = f"--token-file {shown(str(path))}"
    try:
        with open_regular(Path(path)) as fh:
            st = os.fstat(fh.fileno())
            data = fh.read(MAX_TOKEN_BYTES + 1)
    except GardenError as exc:
        raise GardenError(f"{where}: {exc.messages[0]}") from None
    except OSError as exc:
        raise GardenError(f"{where}: cannot read it: {exc.strerror or exc}") from None
    if hasattr(os, "geteuid") and st.st_uid != os.geteuid():
        raise GardenError(f"{where}: owned by another user (uid {st.st_uid}); a token file must be your own")
    if stat.S_IMODE(st.st_mode) & 0o077:
        raise GardenError(f"{where}: others may read or write it (mode {stat.S_IMODE(st.st_mode):04o}); "
                          f"make it private: chmod 600 {shown(str(path))}")
    token = data.strip()
    if len(data) > MAX_TOKEN_BYTES or len(token) < MIN_TOKEN_CHARS or not token.isascii() \
            or any(ch <= 32 or ch == 127 for ch in token):
        raise GardenError(f"{where}: not a token: one line of {MIN_TOKEN_CHARS} to {MAX_TOKEN_BYTES} printable "
                          f"ASCII characters without spaces; make one with {TOKEN_HINT}")
    return token


@dataclass(frozen=True)
class Access:
    """The rule: the hosts a request may name, the port the server listens on, and the
    token it must carry (None: none is asked, only on loopback)."""

    hosts: frozenset[str]
    port: int
    token: bytes | None = None

    @classmethod
    def make(cls, bound_host: str, port: int, allowed: list[str] | tuple[str, ...] = (),
             token: bytes | None = None) -> "Access":
        hosts = {"localhost", "127.0.0.1", "::1", *(h.lower().strip("[]") for h in allowed)}
        bound = bound_host.lower().strip("[]")
        try:
            if not ipaddress.ip_address(bound).is_unspecified:   # 0.0.0.0 names no host a client asks for
                hosts.add(bound)
        except ValueError:
            hosts.add(bound)
        return cls(frozenset(hosts), port, token)

    def allows_host(self, name: str) -> bool:
        return name in self.hosts or (name != "localhost" and is_loopback(name))

    def refusal(self, method: str, path: str, headers: dict[str, str]) -> tuple[int, str, str, dict] | None:
        """(status, one line, the header it is about, extra response headers) when the
        request may not be answered; None when it may."""
        host = headers.get("host")
        name = host_name(host) if host is not None else None
        if name is None or not self.allows_host(name):
            return (403, f"Host {shown(one_line(host or '', 80), 80)} is not a name this server answers to "
                    "(loopback, or one its operator allowed with --allow-host)", "Host", {})
        origin = headers.get("origin")
        if origin is not None and not self._own_origin(origin):
            return (403, f"Origin {shown(one_line(origin, 80), 80)}: the server answers no other origin than its "
                    "own; a web page may not ask it", "Origin", {})
        if self.token is not None:
            scheme, _, given = headers.get("authorization", "").partition(" ")
            # compare_digest takes as long whatever the bytes given: the token leaks nothing through timing
            if scheme.lower() != "bearer" or not hmac.compare_digest(given.strip().encode("utf-8", "replace"),
                                                                     self.token):
                return (401, "this server asks for its token: Authorization: Bearer TOKEN", "Authorization",
                        {"www-authenticate": "Bearer"})
        if method == "POST" and path in JSON_PATHS:
            media = headers.get("content-type", "").split(";")[0].strip().lower()
            if media != "application/json":
                return (415, f"Content-Type {shown(one_line(media or 'none', 80), 80)}: a "
                        f"{JSON_PATHS[path]} is application/json", "Content-Type", {})
        return None

    def _own_origin(self, origin: str) -> bool:
        try:
            parts = urlsplit(origin.strip())
            port = parts.port or (443 if parts.scheme == "https" else 80)
        except ValueError:
            return False
        return (parts.scheme == "http" and parts.hostname is not None and self.allows_host(parts.hostname)
                and port == self.port and not parts.path.strip("/") and not parts.query)
