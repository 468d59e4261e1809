"""A template library that misbehaves on request, for the host's sandbox
tests (``host/tests/python.rs``): the Python twin of ``misbehaving``.
Never bundled.

``templateLibraries.misbehavingPython.mode`` picks what ``render`` does:
``ok`` renders one backend, ``loop`` never returns, ``oom`` allocates
without bound, ``raise`` raises an unexpected exception, ``escape`` tries
to leave the sandbox and reports what it saw.
"""

import os
import socket

import haptic_sdk as haptic

MODES = ("ok", "loop", "oom", "raise", "escape")


class Misbehaving(haptic.Library):
    name = "misbehaving-python"
    order = 900
    defaults = {"mode": "ok"}

    def plan(self, values):
        if values["mode"] not in MODES:
            raise haptic.RenderError(f"unknown mode `{values['mode']}`; one of {', '.join(MODES)}")
        return haptic.Plan()

    def render(self, ctx, out):
        mode = ctx.values["mode"]
        if mode == "loop":
            while True:
                pass
        if mode == "oom":
            hoard = []
            while True:
                hoard.append(bytearray(8 << 20))
        if mode == "raise":
            return {}["no such key"]
        if mode == "escape":
            raise haptic.RenderError("; ".join(escape_attempts()))
        out.section(haptic.SectionKind.BACKEND, "misbehaving-python-ok", "    server a 127.0.0.1:1\n")


def escape_attempts():
    def attempt(what, action):
        try:
            return f"{what}: {action()}"
        except Exception as error:  # noqa: BLE001 - any failure is the point
            return f"{what}: failed ({type(error).__name__})"

    yield attempt("read /etc/passwd", lambda: len(open("/etc/passwd").read()))
    yield attempt("listdir /", lambda: len(os.listdir("/")))
    yield f"env: {len(os.environ)} vars"
    yield attempt("connect 127.0.0.1:22", lambda: socket.socket().connect(("127.0.0.1", 22)))


Library = haptic.export(Misbehaving)
