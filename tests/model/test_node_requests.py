"""The node server's pure parts: the kubelet's authorization attributes, the token file,
request parameters, and the Summary API's shape and CPU rates."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from nodelet.model.core import crilogs, nodeauth
from nodelet.model.core import noderequests as nr
from nodelet.model.core import summary as sm

USER = nodeauth.User("alice", groups=(nodeauth.AUTHENTICATED,))


@pytest.mark.parametrize(("method", "path", "verb", "subresources"), [
    ("GET", "/stats/summary", "get", ["stats"]),
    ("GET", "/stats", "get", ["stats"]),
    ("GET", "/metrics", "get", ["metrics"]),
    ("GET", "/metrics/resource", "get", ["metrics"]),
    ("GET", "/logs/syslog", "get", ["log"]),
    ("POST", "/checkpoint/default/web/main", "create", ["checkpoint"]),
    # KubeletFineGrainedAuthz (on by default since 1.33): the fine-grained subresource, then
    # proxy, so RBAC written for older kubelets keeps working.
    ("GET", "/healthz", "get", ["healthz", "proxy"]),
    ("GET", "/healthz/ping", "get", ["healthz", "proxy"]),
    ("GET", "/pods", "get", ["pods", "proxy"]),
    ("GET", "/pods/", "get", ["pods", "proxy"]),
    ("GET", "/runningpods/", "get", ["pods", "proxy"]),
    ("GET", "/configz", "get", ["configz", "proxy"]),
    ("POST", "/exec/default/web/main", "create", ["proxy"]),
    # Sessions ask `create` even over a GET (a WebSocket upgrade): `get nodes/proxy` alone
    # must not open a shell (stricter than the kubelet, which asks `get` here).
    ("GET", "/exec/default/web/main", "create", ["proxy"]),
    ("GET", "/exec/default/web/uid-1/main", "create", ["proxy"]),
    ("GET", "/attach/default/web/main", "create", ["proxy"]),
    ("GET", "/portForward/default/web", "create", ["proxy"]),
    ("HEAD", "/exec/default/web/main", "create", ["proxy"]),
    ("POST", "/portForward/default/web", "create", ["proxy"]),
    ("GET", "/execx/default/web/main", "get", ["proxy"]),  # not a session path
    ("POST", "/run/default/web/main", "create", ["proxy"]),
    ("GET", "/containerLogs/default/web/main", "get", ["proxy"]),
    ("GET", "/statsfoo", "get", ["proxy"]),  # a subpath, not a prefix, as in the kubelet
    ("GET", "/podsx", "get", ["proxy"]),
    ("PUT", "/x", "update", ["proxy"]),
    ("PATCH", "/x", "patch", ["proxy"]),
    ("DELETE", "/x", "delete", ["proxy"]),
    ("HEAD", "/healthz", "", ["healthz", "proxy"]),  # the kubelet maps only the five verbs
    ("OPTIONS", "/pods", "", ["pods", "proxy"]),
])
def test_kubelet_attribute_mapping(method: str, path: str, verb: str,
                                   subresources: list[str]) -> None:
    attributes = nodeauth.request_attributes(USER, method, path, "node-1")
    assert [a.subresource for a in attributes] == subresources
    for a in attributes:
        assert (a.verb, a.resource, a.name, a.api_group, a.path, a.user) == (
            verb, "nodes", "node-1", "", path, USER)


class _Table:
    """An authorizer answering from a table of subresource → decision, recording the order."""

    def __init__(self, **decisions: nodeauth.Decision) -> None:
        self._decisions = decisions
        self.asked: list[str] = []

    async def authorize(self, attributes: nodeauth.Attributes) -> nodeauth.Decision:
        self.asked.append(attributes.subresource)
        return self._decisions.get(attributes.subresource, nodeauth.Decision(False))


_ERROR = nodeauth.Decision(False, "no answer", error=True)


@pytest.mark.parametrize(("decisions", "allowed", "error", "asked"), [
    ({"healthz": nodeauth.Decision(True)}, True, False, ["healthz"]),  # the first one suffices
    ({"proxy": nodeauth.Decision(True)}, True, False, ["healthz", "proxy"]),  # any one allows
    ({}, False, False, ["healthz", "proxy"]),
    ({"healthz": _ERROR, "proxy": nodeauth.Decision(True)}, False, True, ["healthz"]),  # 500
])
async def test_attributes_are_authorized_in_order_until_one_is_allowed(
        decisions: dict[str, nodeauth.Decision], allowed: bool, error: bool,
        asked: list[str]) -> None:
    table = _Table(**decisions)
    decision, last = await nodeauth.authorize(
        table, nodeauth.request_attributes(USER, "GET", "/healthz", "n"))
    assert (decision.allowed, decision.error, table.asked) == (allowed, error, asked)
    assert last.subresource == asked[-1]


def test_token_file_parses_like_kube_apiserver() -> None:
    tokens = nodeauth.TokenFile.parse('t1,bob,uid-1,"admins,devs"\n\nt2,carol,uid-2\n')
    assert tokens.users["t1"] == nodeauth.User("bob", "uid-1", ("admins", "devs"))
    assert tokens.users["t2"] == nodeauth.User("carol", "uid-2")
    with pytest.raises(nodeauth.TokenFileError, match="line 1"):
        nodeauth.TokenFile.parse("only-a-token\n")


async def test_authentication_order_and_anonymous() -> None:
    tokens = nodeauth.TokenFile.parse("t1,bob,uid-1\n")
    found = await nodeauth.authenticate([tokens], nodeauth.Credentials(token="t1"),
                                        anonymous=False)
    assert found == nodeauth.User("bob", "uid-1", (nodeauth.AUTHENTICATED,))
    # A token that is not accepted is never anonymous; no credentials are, when allowed.
    assert await nodeauth.authenticate([tokens], nodeauth.Credentials(token="bad"),
                                       anonymous=True) is None
    assert await nodeauth.authenticate([tokens], nodeauth.Credentials(),
                                       anonymous=False) is None
    assert await nodeauth.authenticate([tokens], nodeauth.Credentials(),
                                       anonymous=True) == nodeauth.ANONYMOUS_USER
    cert = nodeauth.Credentials(certificate_subject=(("organizationName", "ops"),
                                                     ("commonName", "dave")))
    assert await nodeauth.authenticate([nodeauth.CertificateAuthenticator()], cert,
                                       anonymous=False) == nodeauth.User(
        "dave", groups=("ops", nodeauth.AUTHENTICATED))


async def test_standalone_authorizer_allows_only_authenticated_users() -> None:
    allow = nodeauth.AllowAuthenticated()
    assert (await nodeauth.authorize(allow, nodeauth.request_attributes(
        USER, "POST", "/exec/a/b/c", "n")))[0].allowed
    assert not (await nodeauth.authorize(allow, nodeauth.request_attributes(
        nodeauth.ANONYMOUS_USER, "GET", "/healthz", "n")))[0].allowed


@pytest.mark.parametrize(("source", "loopback"), [
    ("127.0.0.1", True), ("127.3.2.1", True), ("::1", True), ("::ffff:127.0.0.1", True),
    ("10.0.0.5", False), ("::ffff:10.0.0.5", False), ("fe80::1%eth0", False), ("", False),
    ("localhost", False),
])
async def test_the_node_local_token_counts_from_loopback_only(source: str,
                                                               loopback: bool) -> None:
    assert nodeauth.is_loopback(source) is loopback
    local = nodeauth.LocalToken("s3cret")
    found = await local.authenticate(nodeauth.Credentials(token="s3cret", source=source))
    assert found == (nodeauth.LOCAL_USER if loopback else None)
    assert await local.authenticate(nodeauth.Credentials(token="other", source=source)) is None
    assert await local.authenticate(nodeauth.Credentials(source=source)) is None


class _Deny:
    def __init__(self) -> None:
        self.asked: list[nodeauth.Attributes] = []

    async def authorize(self, attributes: nodeauth.Attributes) -> nodeauth.Decision:
        self.asked.append(attributes)
        return nodeauth.Decision(False, "no")


async def test_the_node_local_user_is_allowed_without_asking_the_mode() -> None:
    inner = _Deny()
    first = nodeauth.LocalFirst(inner)
    user = await nodeauth.authenticate([nodeauth.LocalToken("t")],
                                       nodeauth.Credentials(token="t", source="::1"),
                                       anonymous=False)
    assert user is not None and user.local
    assert (await nodeauth.authorize(first, nodeauth.request_attributes(
        user, "POST", "/exec/a/b/c", "n")))[0].allowed
    assert inner.asked == []
    # The same name and groups from another authenticator are not the local user.
    lookalike = nodeauth.User(nodeauth.LOCAL_USER.name, groups=nodeauth.LOCAL_USER.groups)
    assert not (await nodeauth.authorize(first, nodeauth.request_attributes(
        lookalike, "POST", "/exec/a/b/c", "n")))[0].allowed
    assert inner.asked


def test_stream_requests() -> None:
    pod = nr.PodRef("default", "web")
    request = nr.stream_request(nr.StreamKind.EXEC, pod, "main", {
        "command": ["sh", "-c", "echo hi"], "input": ["1"], "output": ["true"], "tty": ["1"]})
    assert (request.command, request.stdin, request.stdout, request.stderr, request.tty) == (
        ("sh", "-c", "echo hi"), True, True, False, True)
    with pytest.raises(nr.NodeRequestError, match="at least 1 of stdin"):
        nr.stream_request(nr.StreamKind.ATTACH, pod, "main", {})
    with pytest.raises(nr.NodeRequestError, match="command"):
        nr.stream_request(nr.StreamKind.EXEC, pod, "main", {"output": ["1"]})
    forward = nr.stream_request(nr.StreamKind.PORT_FORWARD, pod, "", {"port": ["80,8080"]})
    assert forward.ports == (80, 8080)
    with pytest.raises(nr.NodeRequestError, match="invalid port"):
        nr.stream_request(nr.StreamKind.PORT_FORWARD, pod, "", {"port": ["0"]})
    assert nr.run_command({"cmd": ["ls  -l /"]}) == ("ls", "-l", "/")


def test_log_options_at_the_int64_limit() -> None:
    now = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)
    options = nr.log_options({"tailLines": [str(2**63 - 1)], "limitBytes": [str(2**63 - 1)],
                              "sinceSeconds": ["63000000000"]}, now)  # ~1996 years
    assert options.tail_lines == options.limit_bytes == 2**63 - 1
    assert options.since is not None and options.since.year == 29


def test_log_options() -> None:
    now = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)
    options = nr.log_options({"follow": ["true"], "tailLines": ["3"], "limitBytes": ["10"],
                              "sinceSeconds": ["60"], "timestamps": ["true"]}, now)
    assert options == nr.LogOptions(follow=True, timestamps=True, tail_lines=3,
                                    limit_bytes=10, since=now - timedelta(seconds=60))
    assert nr.log_options({"sinceTime": ["2026-01-01T11:00:00Z"]}, now).since == \
        datetime(2026, 1, 1, 11, 0, tzinfo=UTC)
    for bad in ({"tailLines": ["x"]}, {"limitBytes": ["0"]}, {"sinceTime": ["yesterday"]},
                {"sinceSeconds": ["5"], "sinceTime": ["2026-01-01T11:00:00Z"]},
                # Out of range: a 400, never an OverflowError (a 500).
                {"sinceSeconds": ["1e11"]}, {"sinceSeconds": ["100000000000"]},
                {"sinceSeconds": [str(10**30)]}, {"tailLines": ["1e30"]},
                {"tailLines": [str(10**30)]}, {"limitBytes": [str(2**63)]}):
        with pytest.raises(nr.NodeRequestError):
            nr.log_options(bad, now)


def test_log_line_times_with_nanoseconds() -> None:
    line = crilogs.parse_line(b"2026-01-01T12:00:00.123456789Z stdout F hello")
    assert nr.parse_time(line.timestamp) == datetime(2026, 1, 1, 12, 0, 0, 123456, tzinfo=UTC)
    since = datetime(2026, 1, 1, 12, 0, 1, tzinfo=UTC)
    assert not nr.line_wanted(line, since)
    assert nr.line_wanted(line, since - timedelta(seconds=2))
    assert nr.line_wanted(crilogs.parse_line(b"garbage"), since)


def test_cpu_rates_between_samples() -> None:
    first = sm.Cpu(time_ns=1_000_000_000, usage_core_ns=500_000_000, usage_nano_cores=0)
    second = sm.Cpu(time_ns=3_000_000_000, usage_core_ns=1_500_000_000)
    assert sm.cpu_rate(None, first) == sm.Cpu(1_000_000_000, 500_000_000, None)
    assert sm.cpu_rate(first, second) == sm.Cpu(3_000_000_000, 1_500_000_000, 500_000_000)
    assert sm.cpu_rate(second, first) == sm.Cpu(1_000_000_000, 500_000_000, None)


def test_summary_json_shape() -> None:
    container = sm.ContainerUsage(
        id="c1", name="main", labels={}, start_ns=1_700_000_000_000_000_000,
        cpu=sm.Cpu(1_700_000_001_000_000_000, 42, 7),
        memory=sm.Memory(1_700_000_001_000_000_000, working_set=100, usage=120))
    pod = sm.PodUsage(sandbox_id="s1", name="web", namespace="default", uid="u1",
                      start_ns=1_700_000_000_000_000_000, containers=(container,),
                      network=sm.Network(1_700_000_001_000_000_000,
                                         default=sm.Interface("eth0", rx_bytes=5, tx_bytes=6)),
                      process_count=2)
    node = sm.NodeUsage(name="n", start_ns=1_700_000_000_000_000_000,
                        memory=sm.Memory(1_700_000_001_000_000_000, working_set=1000))
    body = sm.summary_to_api(sm.Summary(node=node, pods=(pod,)))
    assert body["node"] == {"nodeName": "n", "startTime": "2023-11-14T22:13:20Z",
                            "memory": {"time": "2023-11-14T22:13:21Z", "workingSetBytes": 1000}}
    [api_pod] = body["pods"]
    assert api_pod["podRef"] == {"name": "web", "namespace": "default", "uid": "u1"}
    assert api_pod["containers"] == [{
        "name": "main", "startTime": "2023-11-14T22:13:20Z",
        "cpu": {"time": "2023-11-14T22:13:21Z", "usageNanoCores": 7,
                "usageCoreNanoSeconds": 42},
        "memory": {"time": "2023-11-14T22:13:21Z", "usageBytes": 120,
                   "workingSetBytes": 100}}]
    assert api_pod["network"] == {
        "time": "2023-11-14T22:13:21Z", "name": "eth0", "rxBytes": 5, "txBytes": 6,
        "interfaces": [{"name": "eth0", "rxBytes": 5, "txBytes": 6}]}
    assert api_pod["process_stats"] == {"process_count": 2}
    text = sm.resource_metrics_text(sm.Summary(node=node, pods=(pod,)))
    assert 'container_cpu_usage_seconds_total{container="main",namespace="default",' \
           'pod="web"} 4.2e-08 1700000001000' in text
    assert "node_memory_working_set_bytes 1000 1700000001000" in text
    assert text.endswith("scrape_error 0\n")
