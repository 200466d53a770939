"""Whether an exited container is restarted (pure): the pod's restartPolicy, a container's own
restartPolicy and its restartPolicyRules (ContainerRestartRules, beta and on by default from
Kubernetes 1.35, which nodelet reports itself as).

As the kubelet's `ContainerShouldRestart` (pkg/api/v1/pod/util.go): a container with its own
`restartPolicy` first looks for the first of its rules whose exit codes match (`In` / `NotIn`);
a matching `Restart` rule restarts it; otherwise its own policy decides (Always; OnFailure: a
non-zero exit; Never). Without one the pod's policy decides the same way. An init container
with `restartPolicy: Always` is a sidecar and is always restarted; that is the caller's rule,
as in the kubelet.
"""

from __future__ import annotations

from nodelet.model.core import pods

RESTART = "Restart"


def matching_rule(container: pods.Container, exit_code: int) -> pods.RestartRule | None:
    """The first rule its exit code matches (the kubelet's FindMatchingContainerRestartRule)."""
    for rule in container.restart_rules:
        listed = exit_code in rule.values
        if (rule.operator == "In" and listed) or (rule.operator == "NotIn" and not listed):
            return rule
    return None


def _by_policy(policy: str, exit_code: int) -> bool:
    if policy == "Never":
        return False
    if policy == "OnFailure":
        return exit_code != 0
    return True  # Always, and the API server's default


def should_restart(pod_policy: pods.RestartPolicy, container: pods.Container,
                   exit_code: int) -> bool:
    """Whether the container, exited with `exit_code`, is to be restarted."""
    if container.restart_policy:
        rule = matching_rule(container, exit_code)
        if rule is not None and rule.action == RESTART:
            return True
        return _by_policy(container.restart_policy, exit_code)
    return _by_policy(pod_policy, exit_code)


def restarted_after_probe_kill(pod_policy: pods.RestartPolicy,
                               container: pods.Container) -> bool:
    """Whether a container killed for a failed liveness or startup probe starts again: only
    the policies count, no rule (the container was running, so no exit code was chosen by it;
    computePodActions)."""
    if container.restart_policy:
        return container.restart_policy != "Never"
    return pod_policy != "Never"

