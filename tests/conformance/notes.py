"""What a [NodeConformance] test that did not pass found in nodelet, or why it does not apply.

Keys are substrings of the spec's full name; the first match is the note. Written by people
after reading the failure and the kubelet's code, never generated from a run. A note about a
bug that is fixed stays until a run shows the test passing, saying what was fixed.
"""

from __future__ import annotations

NOTES: dict[str, str] = {
    # Test images: what the locally built images (images/e2e.py) lack.
    "Secrets should be consumable via the environment": (
        "the test image: its `sh -c env` runs Debian busybox 1.35's ash, which drops "
        "environment variables whose names are not shell identifiers (`data-1`); measured "
        "here: `env data-1=x busybox sh -c env` prints no data-1. nodelet sets them "
        "(envFrom, tests/model/test_envvars.py)"),
    "ConfigMap should be consumable via the environment": (
        "the test image: Debian busybox 1.35's ash drops variables named `data-1` (see the "
        "Secrets test)"),
    # nodelet bugs found and not fixed yet.
    "should override timeoutGracePeriodSeconds when StartupProbe field is set": (
        "nodelet bug: a container killed for a failed startup probe gets the liveness probe's "
        "terminationGracePeriodSeconds or the pod's (500 s here), not the startup probe's "
        "(5 s): podactions.unhealthy_grace does not know which probe failed "
        "(probing.liveness_failed returns names only); the kubelet's "
        "setTerminationGracePeriod uses the failed probe's"),
    "back-off timer reset on image update": (
        "needs e2e-test-images/nginx, not built here (images/e2e.py NOT_BUILT)"),
}


def note(name: str) -> str:
    return next((text for key, text in NOTES.items() if key in name), "")
