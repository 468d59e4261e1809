"""HAProxy-safe names and escaping, the same rules as the Rust SDK's
``haptic_sdk::names``, so a backend one library defines is the backend
another routes to."""

from __future__ import annotations

import re
import unicodedata
from typing import Optional

_NOT_ALLOWED = re.compile(r"[^A-Za-z0-9_.:-]")


def sanitize(name: str) -> str:
    """Replaces every character HAProxy does not allow in a proxy or server
    name (anything outside ``[A-Za-z0-9_.:-]``) with ``_``; an empty name
    becomes ``_``."""
    return _NOT_ALLOWED.sub("_", name) if name else "_"


def backend_name(namespace: str, service: str, port: int) -> str:
    """The backend of one Service port, ``<namespace>_<service>_<port>``
    with the Service port *number* (``default_web_8080``), as
    ``kubernetes-backends`` names it."""
    return sanitize(f"{namespace}_{service}_{port}")


def quote(text: str) -> str:
    """One HAProxy configuration word in single quotes, so nothing in
    ``text`` (spaces, ``#``, ``$``, ``"``, backslashes) is interpreted.
    Control characters cannot be on a config line and become spaces."""
    out = ["'"]
    for c in text:
        if c == "'":
            out.append("'\\''")
        elif _is_control(c):
            out.append(" ")
        else:
            out.append(c)
    out.append("'")
    return "".join(out)


def map_line(key: str, value: str) -> Optional[str]:
    """One ``key value`` line of a map file, or ``None`` when ``key`` cannot
    be a map key (empty, or with whitespace, control characters or ``#``)
    or ``value`` spans lines."""
    if not key or any(c.isspace() or _is_control(c) or c == "#" for c in key):
        return None
    if "\n" in value or "\r" in value:
        return None
    return f"{key} {value}\n"


def _is_control(c: str) -> bool:
    return unicodedata.category(c) == "Cc"
