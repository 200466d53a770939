"""A static pod cannot use a projected service account token (a TokenRequest is bound to a pod
the API server knows; NodeRestriction refuses mirror pods that reference a service account):
nodelet refuses it at admission, with the path and the reason, instead of skipping the token
or failing its volume for ever."""

from __future__ import annotations

from nodelet.model.core import status as st
from support.harness import Harness, pod_manifest


async def test_a_static_pod_with_a_token_source_is_refused(agent: Harness) -> None:
    agent.write("token.yaml", pod_manifest("token", extra_spec="""\
        serviceAccountName: robot
        volumes:
          - name: api
            projected:
              sources:
                - serviceAccountToken: {path: token}
        """, container_extra="""\
        volumeMounts:
          - {name: api, mountPath: /var/run/secrets/kubernetes.io/serviceaccount}
        """))

    def failed(pod_status: st.PodStatus) -> bool:
        return pod_status.phase == "Failed"

    pod_status = await agent.wait_status("token", failed, what="token pod refused")
    assert pod_status.reason == "UnsupportedPodSpec"
    assert pod_status.message.startswith(
        "Pod was rejected: spec.volumes[0].projected.sources[0].serviceAccountToken: a static "
        "pod cannot use a service account token")
    assert pod_status.container_statuses == ()
    assert [e.reason for e in agent.events_of("token") if e.type == "Warning"] == [
        "UnsupportedPodSpec"]
