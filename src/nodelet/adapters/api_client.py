"""A tiny synchronous client of nodelet's local HTTP API, for the CLI readers (stdlib urllib).

`nodelet get pods` and `nodelet describe pod` read `/pods` and `/events` from a running agent
through this client and render them with `model.reports.presenting`.

Exceptions:

    ApiClientError           the agent cannot be reached, refused the request, or answered
                             something that is not the expected JSON; the message names the URL
                             and says what to check
"""

from __future__ import annotations

import json
import urllib.error
import urllib.parse
import urllib.request
from typing import Any

DEFAULT_URL = "http://127.0.0.1:10255"


class ApiClientError(Exception):
    """A request to the local nodelet API failed; the message says why and what to do."""


class ApiClient:
    """Reads the local API at `base_url`, sending `Authorization: Bearer <token>` if given."""

    def __init__(
        self, base_url: str = DEFAULT_URL, *, token: str | None = None, timeout: float = 10.0
    ) -> None:
        # `localhost:10255` as kubectl's --server takes it: plain HTTP when no scheme is given.
        self._base_url = (base_url if "://" in base_url else f"http://{base_url}").rstrip("/")
        self._token = token
        self._timeout = timeout

    def pods(self, *, precise: bool = False) -> dict[str, Any]:
        """The v1 PodList (`precise`: transition times with microseconds)."""
        return self._get_json_object("/pods", {"precise": "true"} if precise else {})

    def events(
        self, *, pod: str | None = None, namespace: str | None = None, precise: bool = False
    ) -> dict[str, Any]:
        """The v1 EventList, optionally of one pod name / namespace (`precise`: times with
        microseconds)."""
        query = {k: v for k, v in (("pod", pod), ("namespace", namespace)) if v}
        if precise:
            query["precise"] = "true"
        return self._get_json_object("/events", query)

    def manifests(self) -> list[dict[str, Any]]:
        """How each static pod manifest document was read."""
        body = self._get_json("/manifests", {})
        if not isinstance(body, list):
            raise ApiClientError(f"{self._base_url}/manifests did not return a JSON list")
        return body

    def healthz(self, *, verbose: bool = False) -> tuple[bool, str]:
        """(healthy, body text): a 500 from /healthz is an answer, not an error."""
        status, body = self._get("/healthz", {"verbose": "true"} if verbose else {})
        return status == 200, body.decode("utf-8", "replace")

    def _get_json_object(self, path: str, query: dict[str, str]) -> dict[str, Any]:
        body = self._get_json(path, query)
        if not isinstance(body, dict):
            raise ApiClientError(f"{self._base_url}{path} did not return a JSON object")
        return body

    def _get_json(self, path: str, query: dict[str, str]) -> Any:
        status, body = self._get(path, query)
        if status != 200:
            raise ApiClientError(f"{self._base_url}{path} answered HTTP {status}: {body[:200]!r}")
        try:
            return json.loads(body)
        except ValueError as exc:
            raise ApiClientError(f"{self._base_url}{path} returned invalid JSON: {exc}") from exc

    def _get(self, path: str, query: dict[str, str]) -> tuple[int, bytes]:
        url = self._base_url + path
        if query:
            url += "?" + urllib.parse.urlencode(query)
        request = urllib.request.Request(url, headers=self._headers())
        try:
            with urllib.request.urlopen(request, timeout=self._timeout) as response:
                return int(response.status), bytes(response.read())
        except urllib.error.HTTPError as exc:
            if exc.code == 401:
                raise self._unauthorized() from exc
            return exc.code, exc.read()
        except (urllib.error.URLError, OSError) as exc:
            raise self._unreachable(exc) from exc

    def _headers(self) -> dict[str, str]:
        headers = {"Accept": "application/json"}
        if self._token is not None:
            headers["Authorization"] = f"Bearer {self._token}"
        return headers

    def _unauthorized(self) -> ApiClientError:
        hint = "the token was rejected" if self._token else "it requires a token"
        return ApiClientError(
            f"nodelet at {self._base_url} refused the request (401 Unauthorized): {hint} — "
            f"pass the agent's --auth-token-file"
        )

    def _unreachable(self, exc: BaseException) -> ApiClientError:
        reason = exc.reason if isinstance(exc, urllib.error.URLError) else exc
        if isinstance(reason, ConnectionRefusedError):
            why = "connection refused"
        elif isinstance(reason, TimeoutError):
            why = f"no answer within {self._timeout:g}s"
        else:
            why = str(reason)
        return ApiClientError(
            f"cannot reach nodelet at {self._base_url}: {why} — is `nodelet run` running?"
        )
