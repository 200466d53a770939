"""A client certificate verified again at each request (model.core.nodeauth.chain_refusal),
as the kubelet's x509 authenticator verifies the peer's certificates at every request with
Go's x509 Verify (KeyUsages ClientAuth): dates, CA constraints and extended key usage of
each certificate of a path to a CA served now; and a certificate presented but refused is
never anonymous."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest

from nodelet.model.core import nodeauth

NOW = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)
LEAF = nodeauth.ChainCertificate(not_before=NOW - timedelta(days=1),
                                 not_after=NOW + timedelta(days=1),
                                 ca=False, usages=frozenset({nodeauth.CLIENT_AUTH}))
CA = nodeauth.ChainCertificate(not_before=NOW - timedelta(days=365),
                               not_after=NOW + timedelta(days=365), ca=True, cert_sign=True)
SERVER_AUTH = "1.3.6.1.5.5.7.3.1"


@pytest.mark.parametrize(("chain", "refused"), [
    ((LEAF, CA), None),
    ((replace(LEAF, usages=None), CA), None),  # no extended key usage: any
    ((replace(LEAF, usages=frozenset()), CA), None),
    ((replace(LEAF, usages=frozenset({nodeauth.ANY_EXTENDED_KEY_USAGE})), CA), None),
    ((replace(LEAF, usages=frozenset({SERVER_AUTH})), CA), "extended key usage"),
    ((LEAF, replace(CA, usages=frozenset({SERVER_AUTH}))), "its issuer 1's extended key"),
    ((LEAF, replace(CA, usages=frozenset({SERVER_AUTH, nodeauth.CLIENT_AUTH}))), None),
    # Dates, at the edges included.
    ((replace(LEAF, not_after=NOW - timedelta(seconds=1)), CA), "has expired"),
    ((replace(LEAF, not_after=NOW), CA), None),
    ((replace(LEAF, not_before=NOW + timedelta(seconds=1)), CA), "not yet valid"),
    ((LEAF, replace(CA, not_after=NOW - timedelta(days=1))), "its issuer 1 has expired"),
    # Issuers: a CA (a v1 root without extensions too), keyCertSign when it has key usage.
    ((LEAF, replace(CA, ca=False)), "is not a CA"),
    ((LEAF, replace(CA, ca=None)), "is not a CA"),
    ((LEAF, replace(CA, ca=None, version=1)), None),
    ((LEAF, replace(CA, cert_sign=False)), "keyCertSign"),
    ((LEAF, replace(CA, cert_sign=None)), None),
    # Intermediates: a CA whatever their version; the path length of those above them.
    ((LEAF, replace(CA, ca=None, version=1), CA), "its issuer 1 is not a CA"),
    ((LEAF, CA, CA), None),
    ((LEAF, CA, replace(CA, path_length=0)), "its issuer 2 allows 0 intermediate"),
    ((LEAF, replace(CA, path_length=0), replace(CA, path_length=1)), None),
    # The client's certificate itself a CA of the file: a chain of one.
    ((replace(LEAF, ca=True),), None),
])
def test_a_client_chain_checked_at_a_request(chain: tuple[nodeauth.ChainCertificate, ...],
                                             refused: str | None) -> None:
    found = nodeauth.chain_refusal(chain, NOW)
    if refused is None:
        assert found is None
    else:
        assert found is not None and refused in found, found


async def test_a_certificate_presented_but_refused_is_never_anonymous() -> None:
    """The kubelet fails on the x509 authenticator's error rather than falling through to
    anonymous; a token may still authenticate the request."""
    refused = nodeauth.Credentials(certificate_presented=True)
    certs = [nodeauth.CertificateAuthenticator()]
    assert await nodeauth.authenticate(certs, refused, anonymous=True) is None
    assert await nodeauth.authenticate(certs, nodeauth.Credentials(),
                                       anonymous=True) == nodeauth.ANONYMOUS_USER
    tokens = nodeauth.TokenFile.parse("t1,bob,uid-1\n")
    found = await nodeauth.authenticate([*certs, tokens],
                                        replace(refused, token="t1"), anonymous=False)
    assert found is not None and found.name == "bob"
