"""Image references (pure): whether one parses as the kubelet parses it before anything else
(`applyDefaultImageTag`: the distribution library's `ParseNormalizedNamed`), and its words
when it does not — a container with such an image waits with `InvalidImageName`, and no pull
is tried.

The grammar is the distribution library's (`reference/regexp.go`): an optional domain
(`host[:port]/`), lower-case path components joined by `/`, an optional `:tag` and an
optional `@algorithm:hex` digest. A first component with a `.` or `:`, `localhost`, or an
upper-case letter is a domain (`splitDockerDomain`); the rest must be lower case.
"""

from __future__ import annotations

import re

_ALNUM = r"[a-z0-9]+"
_SEPARATOR = r"(?:[._]|__|[-]+)"
_PATH_COMPONENT = rf"{_ALNUM}(?:{_SEPARATOR}{_ALNUM})*"
_DOMAIN_COMPONENT = r"(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])"
_HOST = rf"(?:{_DOMAIN_COMPONENT}(?:\.{_DOMAIN_COMPONENT})*|\[[a-fA-F0-9:]+\])"
_DOMAIN = rf"{_HOST}(?::[0-9]+)?"
_TAG = r"[0-9A-Za-z_][0-9A-Za-z_.-]{0,127}"
_DIGEST = r"[A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*:[0-9a-fA-F]{32,}"
_NAME = rf"(?:{_DOMAIN}/)?{_PATH_COMPONENT}(?:/{_PATH_COMPONENT})*"
_REFERENCE = re.compile(rf"({_NAME})(?::{_TAG})?(?:@{_DIGEST})?")
_IDENTIFIER = re.compile(r"[a-f0-9]{64}")
NAME_MAX = 255
DEFAULT_DOMAIN = "docker.io"


def _split_domain(name: str) -> tuple[str, str]:
    first, slash, rest = name.partition("/")
    if not slash or (not any(c in first for c in ".:") and first != "localhost"
                     and first.lower() == first):
        domain, remainder = DEFAULT_DOMAIN, name
    else:
        domain, remainder = first, rest
    if domain == "index.docker.io":
        domain = DEFAULT_DOMAIN
    if domain == DEFAULT_DOMAIN and "/" not in remainder:
        remainder = "library/" + remainder
    return domain, remainder


def _parse_error(text: str) -> str | None:
    """The library's `Parse` errors."""
    matched = _REFERENCE.fullmatch(text)
    if matched is None:
        if not text:
            return "repository name must have at least one component"
        if _REFERENCE.fullmatch(text.lower()):
            return "invalid reference format: repository name must be lowercase"
        return "invalid reference format"
    if len(matched.group(1)) > NAME_MAX:
        return f"repository name must not be more than {NAME_MAX} characters"
    return None


def invalid(image: str) -> str | None:
    """Why the kubelet cannot parse `image` (`couldn't parse image name "x": ...`), or None."""
    if _IDENTIFIER.fullmatch(image):
        problem: str | None = (f"invalid repository name ({image}), cannot specify 64-byte "
                               "hexadecimal strings")
    else:
        domain, remainder = _split_domain(image)
        remote = remainder.partition(":")[0]
        if remote.lower() != remote:
            problem = f"invalid reference format: repository name ({remote}) must be lowercase"
        else:
            problem = _parse_error(f"{domain}/{remainder}")
    return None if problem is None else f'couldn\'t parse image name "{image}": {problem}'


def without_tag_or_digest(image: str) -> str | None:
    """`image` as written, less its `:tag` and `@digest` (the distribution library's `Parse`,
    not normalised: `busybox:1` gives `busybox`); None when it does not parse."""
    matched = _REFERENCE.fullmatch(image)
    if matched is None or len(matched.group(1)) > NAME_MAX:
        return None
    return matched.group(1)
