"""A template library that misbehaves on request, for the host's sandbox
tests (``host/tests/python.rs``): the Python twin of ``misbehaving``.
Never bundled.

``templateLibraries.misbehavingPython.mode`` picks what ``render`` does:
``ok`` renders one backend, ``loop`` never returns, ``oom`` allocates
without bound, ``raise`` raises an unexpected exception, ``escape`` tries
to leave the sandbox and reports what it saw, ``contract`` uses every
import and output kind contract 0.3.0 adds (a ``type=kubernetes.io/tls``
watch, the ``tls`` and ``crypt`` imports, secret text and files, a warning,
an owned object) and reports what the host answered in
``contract-python/report.txt``.
"""

import os
import socket

import haptic_sdk as haptic

MODES = ("ok", "loop", "oom", "raise", "escape", "contract")

#: `openssl passwd -6 -salt pythonsdk s3cret`: a hash HAProxy matches.
GOOD_HASH = "$6$pythonsdk$NGCE9N1p7Uu1H7IsbHpdzf6p.UyVZaFRmi4Evc5cKUHA42jZ9zB1AMsicoH1Pp/3SoSH3Mn/xyBP8u2AxNzr/1"
#: Apache's MD5 (`htpasswd -m`), which Debian's HAProxy never matches.
APACHE_HASH = "$apr1$pythonsd$9Ul5fJ0wVVbEBwMcJHAPs/"


class Misbehaving(haptic.Library):
    name = "misbehaving-python"
    order = 900
    defaults = {"mode": "ok"}

    def plan(self, values):
        if values["mode"] not in MODES:
            raise haptic.RenderError(f"unknown mode `{values['mode']}`; one of {', '.join(MODES)}")
        if values["mode"] == "contract":
            secrets = haptic.Watch("secrets", "v1", "Secret", field_selector="type=kubernetes.io/tls")
            return haptic.Plan([secrets], applies=["v1/ConfigMap"])
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
        if mode == "contract":
            use_the_contract(ctx, out)
            return
        out.section(haptic.SectionKind.BACKEND, "misbehaving-python-ok", "    server a 127.0.0.1:1\n")


def use_the_contract(ctx, out):
    report = [f"secret {key.namespace}/{key.name}" for key, _ in ctx.items("secrets")]
    for name, candidate in [("good", GOOD_HASH), ("apache", APACHE_HASH)]:
        try:
            found = haptic.crypt.check_password_hash(candidate)
            report.append(f"hash {name}: {found.scheme} weak={found.weak}")
        except haptic.crypt.PasswordHashError as error:
            report.append(f"hash {name}: refused: {error}")
    bundle = haptic.tls.default_certificate()
    # The bundle is the chain, then the key.
    key_at = bundle.find("-----BEGIN", bundle.rfind("-----END CERTIFICATE-----"))
    try:
        info = haptic.tls.check_certificate(bundle[:key_at], bundle[key_at:])
        report.append(f"default certificate: {len(info.dns_names)} name(s), covers x.invalid={info.covers('x.invalid')}")
    except haptic.tls.CertificateError as error:
        report.append(f"default certificate: refused: {error}")
    try:
        haptic.tls.check_certificate("not a certificate", "")
    except haptic.tls.CertificateError as error:
        report.append(f"bad certificate: refused: {error}")
    out.file("contract-python/report.txt", "".join(f"{line}\n" for line in report))
    out.secret_file("contract-python/default.pem", bundle)
    out.secret_section(haptic.SectionKind.USERLIST, "contract-python-users", f"    user admin password {GOOD_HASH}\n")
    out.section(haptic.SectionKind.BACKEND, "misbehaving-python-ok", "    server a 127.0.0.1:1\n")
    for key, _ in ctx.items("secrets"):
        out.warning(key, "ContractPython", f"saw TLS Secret {key.namespace}/{key.name}.")
        out.owned_object(key, "v1", "ConfigMap", f"contract-python-{key.name}", {"data": {"seen": "yes"}})


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
