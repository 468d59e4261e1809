"""Logging through the host: lines go to haptic's log, tagged with the
library's name. ``print`` works too (it goes to the log as the library's
stdout); these add a level. Outside WebAssembly (unit tests) they go to
stderr."""

from __future__ import annotations

import sys

try:  # Inside the component: the host's `log` import.
    from wit_world.imports import host as _host
    from wit_world.imports import types as _types

    _LEVELS = {
        "trace": _types.LogLevel.TRACE,
        "debug": _types.LogLevel.DEBUG,
        "info": _types.LogLevel.INFO,
        "warn": _types.LogLevel.WARN,
        "error": _types.LogLevel.ERROR,
    }
except ImportError:
    _host = None


def log(level: str, message: str) -> None:
    """Writes ``message`` at ``level`` (``trace``, ``debug``, ``info``,
    ``warn`` or ``error``)."""
    if _host is None:
        print(f"[{level}] {message}", file=sys.stderr)
        return
    _host.log(_LEVELS.get(level, _types.LogLevel.INFO), message)


def debug(message: str) -> None:
    """Logs at debug level."""
    log("debug", message)


def info(message: str) -> None:
    """Logs at info level."""
    log("info", message)


def warn(message: str) -> None:
    """Logs at warn level."""
    log("warn", message)


def error(message: str) -> None:
    """Logs at error level."""
    log("error", message)
