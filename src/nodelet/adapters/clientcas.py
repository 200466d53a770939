"""The node server's client CA set (`ClientCAs`): the client CA file's certificates, against
which every request's client certificate is verified again, as the kubelet's x509
authenticator verifies `req.TLS.PeerCertificates` at every request against the CA bundle
loaded at that moment. Its signatures are checked here, the rest by
`model.core.nodeauth.chain_refusal`. `adapters.servingtls` imports it only when the node
server has a client CA file: `cryptography` is not loaded otherwise.
"""

from __future__ import annotations

import datetime
from typing import TypeVar

from cryptography import x509
from cryptography.exceptions import InvalidSignature, UnsupportedAlgorithm
from cryptography.hazmat.primitives.serialization import Encoding

from nodelet.model.core import nodeauth

_E = TypeVar("_E", bound=x509.ExtensionType)


# Signatures checked to verify one client chain, at most (Go's x509 gives up after 100);
# and how many chains' paths to a CA are remembered (per CA set: a reload starts afresh).
_MAX_SIGNATURE_CHECKS = 100
_REMEMBERED = 256


class ClientCAs:
    """The client CA file's certificates (every PEM certificate in it), and the verification
    of a client's chain against them at every request (on the agent's loop)."""

    def __init__(self, bundle: bytes) -> None:
        """Raises ValueError when `bundle` holds no certificate or one that does not parse."""
        self._roots: dict[x509.Name, list[x509.Certificate]] = {}
        self._root_ders: set[bytes] = set()
        for cert in x509.load_pem_x509_certificates(bundle):
            self._roots.setdefault(cert.subject, []).append(cert)
            self._root_ders.add(_der(cert))
        # By chain: the paths from its first certificate to a CA of the set, signatures
        # checked, as plain facts (`nodeauth.chain_refusal` decides on them at each request).
        self._paths: dict[tuple[bytes, ...], tuple[tuple[nodeauth.ChainCertificate, ...], ...]] \
            = {}

    def refusal(self, chain: tuple[bytes, ...], now: datetime.datetime) -> str | None:
        """Why the client's `chain` (DER, its certificate first, then what may lead to a CA:
        the chain its handshake verified) does not authenticate it at `now`, None when it
        does: a path to a CA of this set, each certificate signed by the next, that
        `nodeauth.chain_refusal` accepts (dates, CA constraints, clientAuth usage)."""
        paths = self._paths.get(chain)
        if paths is None:
            paths = self._paths[chain] = self._find_paths(chain)
            if len(self._paths) > _REMEMBERED:
                del self._paths[next(iter(self._paths))]
        if not paths:
            return "the client certificate is not signed by a CA of the client CA file"
        refusals = [nodeauth.chain_refusal(path, now) for path in paths]
        return None if None in refusals else refusals[0]

    def _find_paths(self, chain: tuple[bytes, ...]
                    ) -> tuple[tuple[nodeauth.ChainCertificate, ...], ...]:
        certs = [_parsed(der) for der in chain]
        leaf, others = certs[0] if certs else None, [c for c in certs[1:] if c is not None]
        if leaf is None:
            return ()
        if _der(leaf) in self._root_ders:  # itself a CA of the set (as Go: a chain of one)
            found = [[leaf]]
        else:
            found, budget = [], [_MAX_SIGNATURE_CHECKS]
            self._climb([leaf], others, found, budget)
        facts = []
        for path in found:
            try:
                facts.append(tuple(_facts(cert) for cert in path))
            except ValueError:  # an extension that does not parse: not a usable path
                continue
        return tuple(facts)

    def _climb(self, path: list[x509.Certificate], others: list[x509.Certificate],
               found: list[list[x509.Certificate]], budget: list[int]) -> None:
        """Every path from `path` up to a CA of the set: its issuers among the set first
        (a path ends there), then among `others` (the chain's intermediates, each once)."""
        child = path[-1]
        for issuer in self._roots.get(child.issuer, ()):
            if _signed_by(child, issuer, budget):
                found.append([*path, issuer])
        for issuer in others:
            if issuer.subject == child.issuer and all(issuer is not p for p in path) \
                    and _signed_by(child, issuer, budget):
                self._climb([*path, issuer], others, found, budget)


def _parsed(der: bytes) -> x509.Certificate | None:
    try:
        return x509.load_der_x509_certificate(der)
    except ValueError:
        return None


def _der(cert: x509.Certificate) -> bytes:
    return cert.public_bytes(Encoding.DER)


def _signed_by(child: x509.Certificate, issuer: x509.Certificate, budget: list[int]) -> bool:
    """Whether `issuer`'s key signed `child` (its issuer name `issuer`'s subject); each call
    spends one of `budget`, none left: False."""
    if budget[0] <= 0:
        return False
    budget[0] -= 1
    try:
        child.verify_directly_issued_by(issuer)
    except (ValueError, TypeError, InvalidSignature, UnsupportedAlgorithm):
        return False
    return True


def _facts(cert: x509.Certificate) -> nodeauth.ChainCertificate:
    """What `nodeauth.chain_refusal` reads of `cert`. Raises ValueError for an extension that
    does not parse."""
    extensions = cert.extensions
    constraints = _extension(extensions, x509.BasicConstraints)
    usage = _extension(extensions, x509.KeyUsage)
    extended = _extension(extensions, x509.ExtendedKeyUsage)
    return nodeauth.ChainCertificate(
        not_before=cert.not_valid_before_utc, not_after=cert.not_valid_after_utc,
        version=1 if cert.version == x509.Version.v1 else 3,
        ca=None if constraints is None else constraints.ca,
        path_length=None if constraints is None else constraints.path_length,
        cert_sign=None if usage is None else usage.key_cert_sign,
        usages=None if extended is None else frozenset(oid.dotted_string for oid in extended))


def _extension(extensions: x509.Extensions, kind: type[_E]) -> _E | None:
    try:
        return extensions.get_extension_for_class(kind).value
    except x509.ExtensionNotFound:
        return None
