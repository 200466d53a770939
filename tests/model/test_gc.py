"""The container GC policy (`model.core.gc`), table-driven like the kubelet's
kuberuntime_gc_test.go: no containerd, only values."""

from __future__ import annotations

import pytest

from nodelet.model.core import gc, runtime

RUNNING = runtime.ContainerState.RUNNING
EXITED = runtime.ContainerState.EXITED
CREATED = runtime.ContainerState.CREATED
UNKNOWN = runtime.ContainerState.UNKNOWN
READY = runtime.SandboxState.READY
NOTREADY = runtime.SandboxState.NOTREADY
NOW = 1_000_000.0
DEFAULT = gc.ContainerGCPolicy()


def ctr(id_: str, *, pod: str = "p1", name: str = "app", age: float = 100.0,
        state: runtime.ContainerState = EXITED, sandbox: str = "s1") -> runtime.ContainerInfo:
    """A container of `pod` created `age` seconds before NOW."""
    labels = {runtime.LABEL_POD_UID: pod} if pod else {}
    return runtime.ContainerInfo(
        id=runtime.ContainerID(id_), sandbox_id=runtime.SandboxID(sandbox), name=name,
        attempt=0, image="busybox", image_ref="busybox", state=state,
        created_at=int((NOW - age) * 1e9), labels=labels)


def box(id_: str, *, pod: str = "p1", age: float = 100.0,
        state: runtime.SandboxState = NOTREADY) -> runtime.SandboxInfo:
    labels = {runtime.LABEL_POD_UID: pod} if pod else {}
    return runtime.SandboxInfo(
        id=runtime.SandboxID(id_), name=pod, namespace="default", uid=pod, attempt=0,
        state=state, created_at=int((NOW - age) * 1e9), labels=labels)


def ids(items: tuple[runtime.ContainerInfo, ...] | tuple[runtime.SandboxInfo, ...]
        ) -> list[str]:
    return [item.id for item in items]


# -- containers -------------------------------------------------------------------------------

CONTAINER_CASES = [
    pytest.param([ctr("a", state=RUNNING)], DEFAULT, set(), [], id="running-never"),
    pytest.param([ctr("a")], DEFAULT, set(), [], id="one-dead-kept"),
    pytest.param([ctr("new", age=10), ctr("old", age=20), ctr("oldest", age=30)], DEFAULT,
                 set(), ["oldest", "old"], id="keep-newest-per-container-oldest-first"),
    pytest.param([ctr("run", age=1, state=RUNNING), ctr("d1", age=10), ctr("d2", age=20)],
                 DEFAULT, set(), ["d2"], id="running-instance-not-counted"),
    pytest.param([ctr("run", age=1, state=RUNNING), ctr("c", age=10, state=CREATED),
                  ctr("u", age=20, state=UNKNOWN), ctr("e", age=30)], DEFAULT, set(),
                 ["e", "u"], id="created-and-unknown-are-dead"),
    # The worker created the newest instance and is about to start it: the dead one before
    # it (lastState) is the one kept, not the new one.
    pytest.param([ctr("new", age=0.01, state=CREATED, sandbox="s2"),
                  ctr("last", age=10, sandbox="s1"), ctr("older", age=20, sandbox="s0")],
                 DEFAULT, set(), ["older"], id="a-created-newest-instance-is-being-started"),
    pytest.param([ctr("new", age=0.01, state=CREATED), ctr("last", age=10)],
                 gc.ContainerGCPolicy(max_per_pod_container=0), set(), ["last"],
                 id="being-started-even-with-no-dead-kept"),
    pytest.param([ctr("new", age=5, state=CREATED, name="b"), ctr("last", age=10)],
                 DEFAULT, set(), [], id="being-started-per-container-name"),
    pytest.param([ctr("new", age=0.01, state=CREATED), ctr("last", age=10)], DEFAULT,
                 {"p1"}, ["last", "new"], id="a-removable-pods-created-instance-goes"),
    pytest.param([ctr("a1", name="a", age=10), ctr("a2", name="a", age=20),
                  ctr("b1", name="b", age=30)], DEFAULT, set(), ["a2"],
                 id="per-container-name"),
    pytest.param([ctr("x1", pod="p1", age=10), ctr("y1", pod="p2", age=20)], DEFAULT, set(),
                 [], id="per-pod"),
    pytest.param([ctr("a", age=10), ctr("b", age=20)],
                 gc.ContainerGCPolicy(max_per_pod_container=2), set(), [],
                 id="max-per-pod-container-2"),
    pytest.param([ctr("a", age=10), ctr("b", age=20)],
                 gc.ContainerGCPolicy(max_per_pod_container=0), set(), ["b", "a"],
                 id="max-per-pod-container-0"),
    pytest.param([ctr("a", age=10), ctr("b", age=20), ctr("c", age=30)],
                 gc.ContainerGCPolicy(max_per_pod_container=-1), set(), [],
                 id="no-per-container-limit"),
    pytest.param([ctr("young", age=5), ctr("mid", age=50), ctr("old", age=500)],
                 gc.ContainerGCPolicy(min_age=60), set(), [],
                 id="min-age-protects-young-ones"),
    pytest.param([ctr("young", age=5), ctr("mid", age=70), ctr("old", age=500)],
                 gc.ContainerGCPolicy(min_age=60), set(), ["old"],
                 id="min-age-then-per-container"),
    pytest.param([ctr("young", age=5), ctr("old", age=500)],
                 gc.ContainerGCPolicy(min_age=60), {"p1"}, ["old"],
                 id="min-age-holds-for-removable-pods-too"),
    pytest.param([ctr("run", age=1, state=RUNNING), ctr("d1", age=10), ctr("d2", age=20)],
                 DEFAULT, {"p1"}, ["d2", "d1"], id="removable-pod-loses-all-dead"),
    pytest.param([ctr("x", pod="p1", age=10), ctr("y", pod="p2", age=20)], DEFAULT, {"p2"},
                 ["y"], id="only-the-removable-pod"),
    pytest.param([ctr("nolabel", pod="", age=10), ctr("nolabel2", pod="", age=20)],
                 gc.ContainerGCPolicy(max_per_pod_container=0, max_containers=0), set(), [],
                 id="not-the-agents"),
    # max_containers 2 over three units of one each: a fair share of max(1, 2 // 3) = 1
    # leaves three, so the oldest of all goes.
    pytest.param([ctr("a", pod="p1", age=10), ctr("b", pod="p2", age=20),
                  ctr("c", pod="p3", age=30)],
                 gc.ContainerGCPolicy(max_containers=2), set(), ["c"],
                 id="node-limit-oldest-overall"),
    # Unlimited per container, 4 on the node over two units: each keeps its newest 2 (the
    # fair share), which is within the limit, so p2's younger instances survive p1's.
    pytest.param([ctr("a1", pod="p1", age=1), ctr("a2", pod="p1", age=2),
                  ctr("a3", pod="p1", age=3), ctr("a4", pod="p1", age=4),
                  ctr("b1", pod="p2", age=50), ctr("b2", pod="p2", age=60),
                  ctr("b3", pod="p2", age=70)],
                 gc.ContainerGCPolicy(max_per_pod_container=-1, max_containers=4), set(),
                 ["a4", "a3", "b3"], id="node-limit-fair-share-first"),
    pytest.param([ctr("a1", pod="p1", age=1), ctr("a2", pod="p1", age=2),
                  ctr("b1", pod="p2", age=50), ctr("b2", pod="p2", age=60)],
                 gc.ContainerGCPolicy(max_per_pod_container=-1, max_containers=0), set(),
                 ["a2", "b2", "b1", "a1"], id="node-limit-zero"),
    pytest.param([ctr("a", pod="p1", age=10), ctr("b", pod="p2", age=20)],
                 gc.ContainerGCPolicy(max_containers=5), set(), [], id="within-node-limit"),
    # The removable pod's containers are gone before the node limit is counted.
    pytest.param([ctr("a", pod="p1", age=10), ctr("b", pod="p2", age=20),
                  ctr("c", pod="p3", age=30)],
                 gc.ContainerGCPolicy(max_containers=2), {"p3"}, ["c"],
                 id="removable-counted-before-node-limit"),
]


@pytest.mark.parametrize(("containers", "policy", "removable", "expected"), CONTAINER_CASES)
def test_containers_to_remove(containers: list[runtime.ContainerInfo],
                              policy: gc.ContainerGCPolicy, removable: set[str],
                              expected: list[str]) -> None:
    assert ids(gc.containers_to_remove(containers, policy, now=NOW,
                                       removable=frozenset(removable))) == expected


def test_min_age_boundary_is_evictable() -> None:
    """Created exactly `min_age` ago is old enough (the kubelet skips only younger ones)."""
    units = gc.evict_units([ctr("a", age=60), ctr("b", age=59.5)], now=NOW, min_age=60)
    assert {k: ids(tuple(v)) for k, v in units.items()} == {("p1", "app"): ["a"]}


def test_pod_policy_drops_only_the_node_limit() -> None:
    policy = gc.ContainerGCPolicy(min_age=5, max_per_pod_container=2, max_containers=10)
    assert gc.pod_policy(policy) == gc.ContainerGCPolicy(5, 2, -1)


# -- sandboxes --------------------------------------------------------------------------------

SANDBOX_CASES = [
    pytest.param([box("s1")], [], set(), [], id="newest-kept-even-dead"),
    pytest.param([box("new", age=10), box("old", age=20), box("oldest", age=30)], [], set(),
                 ["oldest", "old"], id="older-dead-oldest-first"),
    pytest.param([box("new", age=10), box("old", age=20, state=READY)], [], set(), [],
                 id="ready-is-active"),
    pytest.param([box("new", age=10), box("old", age=20)], [ctr("c", sandbox="old")], set(),
                 [], id="referenced-is-active"),
    pytest.param([box("new", age=10), box("old", age=20)],
                 [ctr("c", sandbox="old", state=RUNNING)], set(), [],
                 id="referenced-by-running-is-active"),
    # The newest is kept by position: an active older one does not make the newest go.
    pytest.param([box("new", age=10), box("mid", age=20, state=READY), box("old", age=30)],
                 [], set(), ["old"], id="newest-kept-by-position"),
    pytest.param([box("new", age=10), box("old", age=20)], [], {"p1"}, ["old", "new"],
                 id="removable-pod-loses-all-inactive"),
    pytest.param([box("new", age=10, state=READY), box("old", age=20)], [], {"p1"}, ["old"],
                 id="removable-pod-keeps-ready"),
    pytest.param([box("new", age=10), box("old", age=20)], [ctr("c", sandbox="new")], {"p1"},
                 ["old"], id="removable-pod-keeps-referenced"),
    pytest.param([box("a1", pod="p1", age=10), box("a2", pod="p1", age=30),
                  box("b1", pod="p2", age=5), box("b2", pod="p2", age=20)], [], set(),
                 ["a2", "b2"], id="per-pod-oldest-first-overall"),
    pytest.param([box("x", pod="", age=10), box("y", pod="", age=20)], [], {""}, [],
                 id="not-the-agents"),
]


@pytest.mark.parametrize(("sandboxes", "containers", "removable", "expected"), SANDBOX_CASES)
def test_sandboxes_to_remove(sandboxes: list[runtime.SandboxInfo],
                             containers: list[runtime.ContainerInfo], removable: set[str],
                             expected: list[str]) -> None:
    assert ids(gc.sandboxes_to_remove(sandboxes, containers,
                                      removable=frozenset(removable))) == expected


# -- pod log directories ----------------------------------------------------------------------


@pytest.mark.parametrize(("name", "uid"), [
    ("default_web-node1_0b3f9c2e", "0b3f9c2e"),
    ("kube-system_dns-abc_1234-5678", "1234-5678"),
    ("stray", ""),
])
def test_log_directory_uid(name: str, uid: str) -> None:
    assert gc.log_directory_uid(name) == uid


def test_log_directories_of_removable_pods_only() -> None:
    names = ["default_a_u1", "default_b_u2", "lost+found", "default_c_u3"]
    assert gc.log_directories_to_remove(names, removable=frozenset({"u3", "u1"})) == (
        "default_a_u1", "default_c_u3")


# -- the links to container logs (the kubelet's removal of dead symlinks) ----------------------

LONG_ID = "a" * 64


@pytest.mark.parametrize(
    ("dangling", "containers", "removed"),
    [
        # The container exited, or the runtime no longer has it: the link goes.
        (["p_ns_app-abcdef12.log"], [ctr("abcdef12")], ["p_ns_app-abcdef12.log"]),
        (["p_ns_app-abcdef12.log"], [], ["p_ns_app-abcdef12.log"]),
        # Alive (running, created, unknown): its log is missing only while it is rotated.
        (["p_ns_app-abcdef12.log"], [ctr("abcdef12", state=RUNNING)], []),
        (["p_ns_app-abcdef12.log"], [ctr("abcdef12", state=CREATED)], []),
        (["p_ns_app-abcdef12.log"], [ctr("abcdef12", state=UNKNOWN)], []),
        # A name cut at 255 bytes ends with the start of the ID.
        (["p_ns_app-abcdef.log"], [ctr("abcdef12", state=RUNNING)], []),
        # No container ID in the name (none, or under 6 characters): removed, as the kubelet.
        (["p_ns_app-abc.log", "stray.log"], [ctr("abc", state=RUNNING)],
         ["p_ns_app-abc.log", "stray.log"]),
    ],
)
def test_dangling_links_to_remove(dangling: list[str], containers: list[runtime.ContainerInfo],
                                  removed: list[str]) -> None:
    assert list(gc.dangling_links_to_remove(dangling, containers)) == removed
