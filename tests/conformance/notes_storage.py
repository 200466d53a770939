"""What a storage spec that did not pass found, why a group is not selected, and what the
storage specs need of a node.

Keys of NOTES are substrings of the spec's name, keys of WHY_NOT regular expressions searched
in a group's name; the first match is the note. Written by people after reading the failure and
the suite's code (v1.37.2), never generated from a run.
"""

from __future__ import annotations

import re

# Runs of `make conformance-storage`, newest last, as measured (counts from the suite's
# JUnit): kept here because docs/conformance-storage.md is rewritten by every run.
HISTORY: tuple[str, ...] = (
    "2026-12-06, the first run, the default selection (145 specs), `--procs=2`, seed "
    "1796590254, each agent the only node of its own plane. The kubelet v1.37.2 (commit "
    "b26c01a): 137 passed, 0 failed, 8 skipped by the specs themselves (3 PVC Protection: no "
    "default StorageClass; 2 NodeAffinity: fewer than 2 nodes; 2 hostPath readOnly sources: "
    "not supported by the driver; 1 fsGroup on a block device), in 19.5 min. nodelet (commit "
    "605a287, its first PersistentVolumeClaim support): 112 passed, 25 failed, the same 8 "
    "skipped, in 58.0 min (16 of the failures wait 5 min each). The 25, all passed by the "
    "kubelet: 9 `volumes should store data` (every driver and type: the ephemeral container "
    "the spec adds got no volume mounts) and 16 local PVs on a block device in Filesystem "
    "mode (11 of LocalVolumeType block, 5 blockfswithoutformat: bind-mounted instead of "
    "formatted and mounted). Both fixed the same evening (871ea76, 0555368).",
    "2026-12-06, the 25 specs nodelet failed, by focus (commit a3df88c, with both fixes), "
    "`--procs=2`, same seed, `--out test-artifacts/conformance-storage-rerun` (the tables "
    "below keep the whole run of 605a287): 25 passed, 0 failed, in 4.5 min. (A first try "
    "of it was interrupted by a signal from outside after 2.4 min, 13 passed by then.)",
    "2026-12-06, the whole selection again on nodelet (commit 9d127cd: CSI, inline CSI "
    "volumes and volume expansion added since), `--agents nodelet --procs=2`, seed "
    "1796595844: 137 passed, 0 failed, the same 8 skipped by the specs, in 18.2 min (the "
    "kubelet's column, 19.5 min, is the first run's). Every spec the kubelet passes here, "
    "nodelet passes.",
)

# What the selected specs read from or do to the node, and what this harness gives them.
NEEDS: tuple[str, ...] = (
    "A \"hostexec\" pod per spec (test/e2e/storage/utils/host_exec.go: agnhost, privileged, "
    "hostNetwork, the host's `/` read-only at `/rootfs`) through which the local volume specs "
    "run `nsenter --mount=/rootfs/proc/1/ns/mnt -- sh -c CMD`: `mkdir`, `mount -t tmpfs`, "
    "`mount --bind`, `ln -s`, `dd`, `losetup`, `mkfs -t ext4`, `losetup | grep | awk` in the "
    "host's mount namespace, with the host's own programs (Debian's util-linux, e2fsprogs, "
    "coreutils, mawk here). The agnhost image only needs `nsenter`: util-linux's, since "
    "Debian's static busybox runs its own ash and applets (and its `losetup` lists loops in "
    "another format). On these machines no process may open pid 1's namespaces, not even root "
    "on the host (pid 1 is the VM's agent), so the image's `nsenter` is a wrapper that enters "
    "kthreadd's (pid 2), the same initial mount namespace (images/e2e.py, NSENTER_WRAPPER); "
    "the same image for both agents.",
    "Loop devices (`/dev/loop-control`): the `block` and `blockfs` volume types make a loop "
    "device of a file and give it as a block PV (`volumeMode: Block`, a device in the "
    "container) or as a filesystem PV (the node formats it ext4 and mounts it).",
    "The node's `kubernetes.io/hostname` label: local PVs carry a node affinity on it and the "
    "scheduler places the pods by it. nodelet and the kubelet (`--hostname-override`) both "
    "set it to the node's name.",
    "No StorageClass object: the local PVs and their claims name a class nothing provisions "
    "(binding by the PV controller); the PVC Protection specs want a default StorageClass with "
    "a provisioner and skip themselves without one, as here.",
    "The control plane's PV binder (persistentvolume-binder), attach-detach, "
    "ephemeral-volume and PV/PVC protection controllers (tests/support/controlplane.py); the "
    "scheduler's VolumeBinding plugin checks the PV's node affinity.",
)

# Why a group of the suite is not selected (searched in the group's name, in order).
WHY_NOT: tuple[tuple[str, str], ...] = (
    (r"gce-localssd", "needs a GCE local SSD (`SkipUnlessLocalSSDExists`); its specs are "
                      "[Serial] too"),
    (r"\[Driver: (nfs|nfs3)\]|PersistentVolumes NFS|NFSPersistentVolumes",
     "needs the NFS server image (e2e-test-images/volume/nfs), not built here"),
    (r"\[Driver: iscsi\]", "needs the iSCSI target image and the iSCSI initiator on the node "
                           "([Feature:Volumes])"),
    (r"Flexvolumes", "needs a flexvolume driver installed on the node ([Feature:Flexvolumes])"),
    (r"NonGracefulNodeShutdown|StaticPods \[Feature:Kind\]",
     "another provider (GCE's PD driver, kind) and [Disruptive]"),
    (r"CSI Volumes \[Driver: csi-hostpath\]|Volume metrics|CSIInlineVolumes|CSIStorageCapacity"
     r"|VolumeAttributesClass|CSI Mock|MutableCSINode",
     "deploys a CSI driver (csi-hostpath or mock: the hostpathplugin image and the CSI "
     "sidecars, registrar, provisioner, attacher...), images not built here; Generic "
     "Ephemeral-volume specs exist only for CSI and cloud drivers"),
    (r"\[Provider:|\[Driver: (azure|cinder|vsphere|pd\.csi)",
     "a cloud provider's disks"),
    (r"\[Driver: emptydir\]", "emptyDir is not what this run is for: its specs are in "
                              "docs/conformance.md's [NodeConformance] set"),
    (r"HostPathType", "all [Slow] (a privileged pod makes the files, then one pod per type "
                      "waits for its event); not in the default selection"),
    (r"^(ConfigMap|Secrets|Downward API volume|Projected|EmptyDir|HostPath$|Subpath)",
     "pod-level volumes, not PV/PVC storage: their [NodeConformance] specs run in `make "
     "conformance` (docs/conformance.md)"),
    (r"PersistentVolumes-local (StatefulSet|Stress|Local volume that cannot)",
     "[Slow] or [Serial]; the StatefulSet and Stress ones need 2 or more nodes"),
    (r"GenericPersistentVolume|Downward API \[Feature:EphemeralStorage\]|EmptyDir wrapper",
     "[Disruptive]/[Serial]: restart the kubelet or fill the node"),
    (r"VolumeAttachment|CSINodes|StorageClasses",
     "API-only [Conformance] lifecycle specs of storage objects (no node involved); not "
     "what this run is for"),
    (r"Default StorageClass|Dynamic Provisioning|Retroactive StorageClass",
     "needs a default StorageClass with a provisioner (a cloud's or a CSI driver's)"),
    (r"PersistentVolumes-expansion", "left out of this first selection: it grows a "
                                     "loop-backed local block PV, which the node expands "
                                     "online; a candidate for the next run"),
)

# A local PV whose path is a block device, used in Filesystem mode.
LOCAL_BLOCK_FS = (
    "nodelet (until 0555368): a local PV whose path is a block device (a loop device here) in "
    "Filesystem mode was bind-mounted as if it were a directory: `mount -o bind /dev/loopN "
    "<pod>/volumes/"
    "kubernetes.io~local-volume/<pv>` fails (`mount(2) system call failed: Not a directory`, "
    "FailedMount), and the pod waits until the spec gives up after 5 min. The kubelet's local "
    "plugin formats such a device if it has no filesystem (the PV's fsType, ext4 by default: "
    "SafeFormatAndMount), mounts it once on the node (its device mount path under "
    "plugins/kubernetes.io/local-volume/mounts/<pv>) and bind-mounts that into each pod"
)
# The "Repeating the test on an ephemeral container" step of every `volumes should store
# data` spec (test/e2e/framework/volume/fixtures.go, testVolumeClient).
EPHEMERAL_MOUNTS = (
    "nodelet (until 871ea76): an ephemeral container got none of its volumeMounts or "
    "volumeDevices. The spec adds "
    "`volume-ephemeral-container` (the client container's copy, mounting the volume at "
    "/opt/0) to the running client pod and reads /opt/0/index.html in it: `cat: can't open "
    "'/opt/0/index.html': No such file or directory`, where the client container itself read "
    "it. volumes.prepare returned the mounts of init and regular containers only, and "
    "syncing's _container_mounts looked the ephemeral one up by name and found nothing (the "
    "kubelet's makeMounts serves ephemeral containers as any other)"
)

# What a spec that did not pass found (a substring of its name → the note).
NOTES: tuple[tuple[str, str], ...] = (
    ("[LocalVolumeType: blockfswithoutformat]", LOCAL_BLOCK_FS),
    ("[LocalVolumeType: block] [Testpattern: Pre-provisioned PV (default fs)]",
     LOCAL_BLOCK_FS),
    ("[LocalVolumeType: block] [Testpattern: Pre-provisioned PV (ext4)]", LOCAL_BLOCK_FS),
    ("[LocalVolumeType: block] [Testpattern: Pre-provisioned PV (filesystem volmode)]",
     LOCAL_BLOCK_FS),
    ("volumes should store data", EPHEMERAL_MOUNTS),
)


def why_not(group: str) -> str:
    for pattern, why in WHY_NOT:
        if re.search(pattern, group):
            return why
    return "not in this run's focus"


def note(name: str) -> str:
    return next((text for key, text in NOTES if key in name), "")
