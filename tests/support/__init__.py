"""The tests' infrastructure, in one place: real programs started and stopped for the tests
(the control plane `controlplane` with its fixtures `clusterfixtures`, the local registry
`registry`, the kubelet as a peer `kubeletpeer`), nodelet in-process (`harness`), faults
injected in front of real parts (`faultproxy` before kube-apiserver, `criproxy` before
containerd), small filesystems (`disks`), a log flood (`flood`) and polling for state
(`polling`). tests/README.md says what is real and what is injected.
"""
