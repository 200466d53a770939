"""Image references as the kubelet parses them (distribution's ParseNormalizedNamed): the
words of each refusal (the differential harness found nodelet pulling `Not//Valid`)."""

from __future__ import annotations

import pytest

from nodelet.model.core import imagerefs


@pytest.mark.parametrize(("image", "problem"), [
    ("busybox", None),
    ("localhost/nodelet/busybox:latest", None),
    ("127.0.0.1:5000/a/b:1.0", None),
    ("registry.example.com/team/app@sha256:" + "a" * 64, None),
    ("[::1]:5000/x", None),
    ("Registry.Example.com/app", None),  # an upper-case domain is a domain
    ("a__b/c-d.e:T_1", None),
    # The kubelet's own example (docs/differential.md, scenario image-bad-name).
    ("Not//Valid", "invalid reference format: repository name (/Valid) must be lowercase"),
    ("busybox:", "invalid reference format"),
    ("ex/Upper", "invalid reference format: repository name (ex/Upper) must be lowercase"),
    ("a" * 64, f"invalid repository name ({'a' * 64}), cannot specify 64-byte hexadecimal "
               "strings"),
    ("x" * 300, "repository name must not be more than 255 characters"),
    ("a/b:bad tag", "invalid reference format"),
])
def test_invalid(image: str, problem: str | None) -> None:
    expected = None if problem is None else f'couldn\'t parse image name "{image}": {problem}'
    assert imagerefs.invalid(image) == expected
