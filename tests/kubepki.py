"""The test API server's PKI: its CA, its serving certificate, and the CSR signer.

- `Authority.create()`: a fresh EC P-256 CA (the cluster CA: it signs the serving certificate
  and every client certificate, as kubeadm's single `ca.crt` does);
- `Authority.serving_context()`: the server's `ssl.SSLContext`, which asks for a client
  certificate (optional, as kube-apiserver with `--client-ca-file`) and verifies it against the
  CA; `subject_of(der)` reads the user (CN) and groups (O) from a presented certificate;
- `Authority.sign_csr(...)`: the `kubernetes.io/kube-apiserver-client-kubelet` signer of
  kube-controller-manager: the request must be for `system:node:<name>` in exactly
  `system:nodes`, with usages within digital signature, key encipherment and client auth; the
  certificate lasts `min(expirationSeconds, duration)` and starts a little in the past (the
  real signer backdates by 5 minutes for clock skew; here by 1 s, so short test lifetimes
  stay as asked). Test knob `faulty`: while it lists modes, each signing takes the first and
  issues something unusable instead: `"garbage"` (bytes that are no certificate) or
  `"mismatched"` (a valid certificate for another key).
"""

from __future__ import annotations

import datetime
import ipaddress
import ssl
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

KUBELET_CLIENT_SIGNER = "kubernetes.io/kube-apiserver-client-kubelet"
# The usages the kubelet client signer accepts (pkg/controller/certificates/signer).
_ALLOWED_USAGES = {"digital signature", "key encipherment", "client auth"}


# What the `faulty` signer's "garbage" issues: PEM armour around bytes that are no certificate.
GARBAGE_PEM = (b"-----BEGIN CERTIFICATE-----\nbm90IGEgY2VydGlmaWNhdGU=\n"
               b"-----END CERTIFICATE-----\n")


class SigningError(Exception):
    """The signer refuses the request; the message goes into the CSR's Failed condition."""


def _now() -> datetime.datetime:
    return datetime.datetime.now(datetime.UTC)


def _pem_key(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption())


@dataclass
class Authority:
    key: ec.EllipticCurvePrivateKey
    cert: x509.Certificate
    faulty: list[str] = field(default_factory=list)  # see the module doc

    @classmethod
    def create(cls, name: str = "kubernetes") -> Authority:
        key = ec.generate_private_key(ec.SECP256R1())
        subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
        cert = (x509.CertificateBuilder().subject_name(subject).issuer_name(subject)
                .public_key(key.public_key()).serial_number(x509.random_serial_number())
                .not_valid_before(_now() - datetime.timedelta(minutes=5))
                .not_valid_after(_now() + datetime.timedelta(days=1))
                .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
                .add_extension(x509.KeyUsage(
                    digital_signature=True, content_commitment=False, key_encipherment=False,
                    data_encipherment=False, key_agreement=False, key_cert_sign=True,
                    crl_sign=True, encipher_only=False, decipher_only=False), critical=True)
                .sign(key, hashes.SHA256()))
        return cls(key, cert)

    @property
    def ca_pem(self) -> bytes:
        return self.cert.public_bytes(serialization.Encoding.PEM)

    def _issue(self, public_key: ec.EllipticCurvePublicKey, subject: x509.Name,
               lifetime: datetime.timedelta, *, server: bool = False) -> x509.Certificate:
        start = _now() - datetime.timedelta(seconds=1)
        builder = (x509.CertificateBuilder().subject_name(subject)
                   .issuer_name(self.cert.subject).public_key(public_key)
                   .serial_number(x509.random_serial_number())
                   .not_valid_before(start).not_valid_after(start + lifetime)
                   .add_extension(x509.BasicConstraints(ca=False, path_length=None),
                                  critical=True)
                   .add_extension(x509.ExtendedKeyUsage(
                       [ExtendedKeyUsageOID.SERVER_AUTH if server
                        else ExtendedKeyUsageOID.CLIENT_AUTH]), critical=False))
        if server:
            builder = builder.add_extension(x509.SubjectAlternativeName(
                [x509.IPAddress(ipaddress.ip_address("127.0.0.1")), x509.DNSName("localhost")]),
                critical=False)
        return builder.sign(self.key, hashes.SHA256())

    def client_pem(self, user: str, groups: tuple[str, ...] = (),
                   lifetime: float = 3600.0) -> tuple[bytes, bytes]:
        """A client certificate and key (PEM) for `user` in `groups`, e.g. an admin's."""
        key = ec.generate_private_key(ec.SECP256R1())
        subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, user)] +
                            [x509.NameAttribute(NameOID.ORGANIZATION_NAME, g) for g in groups])
        cert = self._issue(key.public_key(), subject, datetime.timedelta(seconds=lifetime))
        return cert.public_bytes(serialization.Encoding.PEM), _pem_key(key)

    def serving_context(self) -> ssl.SSLContext:
        key = ec.generate_private_key(ec.SECP256R1())
        cert = self._issue(key.public_key(), x509.Name(
            [x509.NameAttribute(NameOID.COMMON_NAME, "kube-apiserver")]),
            datetime.timedelta(days=1), server=True)
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        context.verify_mode = ssl.CERT_OPTIONAL
        context.load_verify_locations(cadata=self.ca_pem.decode())
        with tempfile.TemporaryDirectory(prefix="kubeapi-") as tmp:
            cert_file, key_file = Path(tmp) / "tls.crt", Path(tmp) / "tls.key"
            cert_file.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
            key_file.write_bytes(_pem_key(key))
            context.load_cert_chain(cert_file, key_file)
        return context

    def sign_csr(self, request_pem: bytes, *, signer: str, usages: list[str],
                 expiration_seconds: int | None, duration: float) -> bytes:
        """The PEM certificate for an approved CSR; SigningError when the signer refuses."""
        if signer != KUBELET_CLIENT_SIGNER:
            raise SigningError(f"signer {signer!r} is not served here")
        try:
            csr = x509.load_pem_x509_csr(request_pem)
        except ValueError as exc:
            raise SigningError(f"invalid certificate request: {exc}") from exc
        if not csr.is_signature_valid:
            raise SigningError("the request's signature is invalid")
        user, groups = names(csr.subject)
        if not user.startswith("system:node:") or groups != ("system:nodes",):
            raise SigningError(f"subject CN={user} O={','.join(groups)} is not a node's "
                               "(CN system:node:<name>, O system:nodes)")
        if not usages or not set(usages) <= _ALLOWED_USAGES:
            raise SigningError(f"usages {usages} are not within {sorted(_ALLOWED_USAGES)}")
        lifetime = duration if expiration_seconds is None else min(duration,
                                                                   expiration_seconds)
        public_key = csr.public_key()
        assert isinstance(public_key, ec.EllipticCurvePublicKey), "the test signer wants EC keys"
        fault = self.faulty.pop(0) if self.faulty else ""
        if fault == "garbage":
            return GARBAGE_PEM
        if fault == "mismatched":
            public_key = ec.generate_private_key(ec.SECP256R1()).public_key()
        cert = self._issue(public_key, csr.subject, datetime.timedelta(seconds=lifetime))
        return cert.public_bytes(serialization.Encoding.PEM)


def names(subject: x509.Name) -> tuple[str, tuple[str, ...]]:
    """(CN, O values) of a subject: Kubernetes' user and groups of a client certificate."""
    cn = subject.get_attributes_for_oid(NameOID.COMMON_NAME)
    orgs = subject.get_attributes_for_oid(NameOID.ORGANIZATION_NAME)
    return (str(cn[0].value) if cn else "", tuple(str(o.value) for o in orgs))


def subject_of(der: bytes) -> tuple[str, tuple[str, ...]] | None:
    """The user and groups of a verified peer certificate (DER, from the TLS connection);
    None once it expired: kube-apiserver verifies the certificate at every request, so a
    connection opened with it authenticates no more requests after its notAfter."""
    cert = x509.load_der_x509_certificate(der)
    if not cert.not_valid_before_utc <= _now() < cert.not_valid_after_utc:
        return None
    return names(cert.subject)
