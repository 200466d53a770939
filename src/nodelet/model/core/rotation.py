"""When to renew a client certificate: the kubelet's certificate manager rule (pure).

client-go's `nextRotationDeadline`: notBefore + lifetime x (0.7 + 0.2 x r) with r uniform in
[0, 1) — `wait.Jitter(total, 0.2) - 0.3 x total` — so the nodes that joined together spread
their renewals over 70-90 % of the lifetime instead of asking at the same moment. A
certificate that is not valid yet, or already past the deadline, is renewed at once.
"""

from __future__ import annotations

from datetime import datetime, timedelta

# The share of the lifetime after which renewal starts, and the jitter added to it.
RENEW_AT = 0.7
JITTER = 0.2


def rotation_deadline(not_before: datetime, not_after: datetime, r: float) -> datetime:
    """The moment to ask for a new certificate; `r` in [0, 1) spreads it (random)."""
    lifetime = (not_after - not_before).total_seconds()
    if lifetime <= 0:
        return not_before
    return not_before + timedelta(seconds=lifetime * (RENEW_AT + JITTER * r))


def seconds_until_rotation(not_before: datetime, not_after: datetime, r: float,
                           now: datetime) -> float:
    """How long to wait before renewing (0: now)."""
    return max(0.0, (rotation_deadline(not_before, not_after, r) - now).total_seconds())


def usable(not_before: datetime, not_after: datetime, now: datetime) -> bool:
    """Whether a certificate may be used now (the kubelet bootstraps again otherwise)."""
    return not_before <= now < not_after
