"""Password hashes, checked by the host (``haptic:template/crypt@0.3.0``).

``haproxy -c`` accepts any string as a ``userlist`` password hash; at
runtime HAProxy hands the hash to crypt(3), and one it cannot compute
(Apache's ``$apr1$``, which ``htpasswd -m`` writes, a truncated hash, a
typo) never matches, so every request of that user gets 401 without a
word. :func:`check_password_hash` tells a library before it writes the line.

Outside WebAssembly (native unit tests) there is no host: checks raise
:class:`PasswordHashError` saying so. Test hashes with ``haptic test``
fixtures, which run on the real host.
"""

from __future__ import annotations

from dataclasses import dataclass

try:  # Inside the component: the host's `crypt` import.
    from componentize_py_types import Err as _Err
    from wit_world.imports import crypt as _crypt
except ImportError:
    _crypt = None


class PasswordHashError(ValueError):
    """HAProxy would never match a password against the hash; the message
    is one sentence saying what is wrong and how to make a good hash, and
    never contains the hash."""


@dataclass(frozen=True)
class PasswordHash:
    """What the host found in a hash HAProxy will match."""

    #: crypt(5)'s name for the scheme: ``yescrypt``, ``sha512-crypt``,
    #: ``bcrypt``, ``md5-crypt``, ...
    scheme: str
    #: The scheme is weak or obsolete (DES, MD5, NT hash, SHA-1): HAProxy
    #: matches it, but the library should warn (:meth:`haptic_sdk.Output.warning`).
    weak: bool


def check_password_hash(hash: str) -> PasswordHash:  # noqa: A002 - the contract's name
    """Checks that HAProxy will match passwords against ``hash`` at
    runtime; raises :class:`PasswordHashError` when it would not."""
    if _crypt is None:
        raise PasswordHashError(
            "password hashes are checked by the haptic host; test them with `haptic test` fixtures"
        )
    try:
        info = _crypt.check_password_hash(hash)
    except _Err as error:
        raise PasswordHashError(str(error.value)) from None
    return PasswordHash(info.scheme, info.weak)
