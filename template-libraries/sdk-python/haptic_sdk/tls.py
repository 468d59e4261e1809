"""Certificates, checked by the host (``haptic:template/tls@0.3.0``): a
library hands over a Secret's PEM and learns whether HAProxy can serve it
and for which names, without carrying X.509 or crypto code itself.

Outside WebAssembly (native unit tests) there is no host: checks raise
:class:`CertificateError` saying so, and there is no default certificate.
Test TLS with ``haptic test`` fixtures, which run on the real host.
"""

from __future__ import annotations

from dataclasses import dataclass

try:  # Inside the component: the host's `tls` import.
    from componentize_py_types import Err as _Err
    from wit_world.imports import tls as _tls
except ImportError:
    _tls = None


class CertificateError(ValueError):
    """The certificate or key cannot be served; the message is one
    sentence (``the private key does not match the certificate``) and never
    contains key material."""


@dataclass(frozen=True)
class CertificateInfo:
    """What the host found in a certificate that passed its checks."""

    #: DNS names the certificate is valid for (subject alternative names,
    #: else the common name), lowercase; may hold wildcards like
    #: ``*.example.com``.
    dns_names: tuple[str, ...]
    #: Seconds since the Unix epoch.
    not_before: int
    not_after: int

    def covers(self, host: str) -> bool:
        """True when the certificate covers ``host`` (an exact name, or a
        wildcard one label deep: ``*.example.com`` covers
        ``a.example.com``, not ``example.com`` nor ``a.b.example.com``)."""
        host = host.lower()
        for name in self.dns_names:
            if name == host:
                return True
            label, dot, rest = host.partition(".")
            if name.startswith("*.") and dot and label and rest == name[2:]:
                return True
        return False


def check_certificate(certificate_pem: str, private_key_pem: str) -> CertificateInfo:
    """Checks a certificate chain and its private key (both PEM): at least
    one certificate, an unencrypted key HAProxy can load that matches the
    first certificate, and now within its validity. Raises
    :class:`CertificateError` when HAProxy could not serve them."""
    if _tls is None:
        raise CertificateError(
            "certificates are checked by the haptic host; test TLS with `haptic test` fixtures"
        )
    try:
        info = _tls.check_certificate(certificate_pem, private_key_pem)
    except _Err as error:
        raise CertificateError(str(error.value)) from None
    return CertificateInfo(tuple(info.dns_names), info.not_before, info.not_after)


def default_certificate() -> str:
    """The host's default certificate with its key, one PEM bundle to write
    as a secret file (:meth:`haptic_sdk.Output.secret_file`) and serve when
    SNI matches no host. Empty outside WebAssembly."""
    if _tls is None:
        return ""
    return _tls.default_certificate()
