"""The error a library raises from ``plan`` or ``render``."""

from __future__ import annotations

from typing import TYPE_CHECKING, Optional

if TYPE_CHECKING:
    from .keys import ObjectKey


class RenderError(Exception):
    """Why a library cannot plan or render. The host reports the message
    with the library's name (and the object, when given) and keeps the last
    good configuration deployed.

    Any other exception a library raises is reported the same way, with its
    type and the line it came from; raise this one for a message written for
    the person who fixes the values or the object.
    """

    def __init__(self, message: str, object: Optional["ObjectKey"] = None) -> None:
        super().__init__(message)
        self.message = message
        self.object = object

    def __str__(self) -> str:
        if self.object is None:
            return self.message
        return f"{self.object}: {self.message}"
