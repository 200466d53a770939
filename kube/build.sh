#!/usr/bin/env bash
# Builds the upstream programs that nodelet's tests use as peers and judges, from their Go
# modules (kube/kubernetes, kube/etcd, kube/containerd, kube/runc...), into build/kube/<version>/
# and build/runtime/<containerd version>/. A binary that exists for its version is not built
# again. Usage: kube/build.sh [PROGRAM ...]   (default: the Kubernetes programs and etcd)
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
# shellcheck source=versions.env
source "$here/versions.env"
out="$here/../build/kube/$KUBE_VERSION"
mkdir -p "$out"
export GOTOOLCHAIN=local GOFLAGS="-mod=mod -trimpath" CGO_ENABLED=0

kube_ldflags() {
  local major minor
  IFS=. read -r major minor _ <<<"${KUBE_VERSION#v}"
  local flags="-s -w" key val
  for kv in "gitVersion=$KUBE_VERSION" "gitMajor=$major" "gitMinor=$minor" \
            "gitTreeState=clean" "buildDate=1970-01-01T00:00:00Z"; do
    key=${kv%%=*} val=${kv#*=}
    flags+=" -X k8s.io/component-base/version.$key=$val -X k8s.io/client-go/pkg/version.$key=$val"
  done
  echo "$flags"
}

build_kube() {  # build_kube NAME PACKAGE
  [ -x "$out/$1" ] && return 0
  echo "building $1 $KUBE_VERSION"
  (cd "$here/kubernetes" && go build -ldflags "$(kube_ldflags)" -o "$out/$1.tmp" "$2")
  mv "$out/$1.tmp" "$out/$1"
}

build_e2e() {  # the e2e suites are test binaries: go test -c
  [ -x "$out/$1" ] && return 0
  echo "building $1 $KUBE_VERSION"
  (cd "$here/kubernetes" && go test -c -ldflags "$(kube_ldflags)" -o "$out/$1.tmp" "$2")
  mv "$out/$1.tmp" "$out/$1"
}

build_kubelet_cover() {  # the kubelet counting which of its own functions ran (bench/walk.py)
  [ -x "$out/kubelet-cover" ] && return 0
  echo "building kubelet-cover $KUBE_VERSION"
  (cd "$here/kubernetes" && go build -cover -ldflags "$(kube_ldflags)" \
     -coverpkg=k8s.io/kubernetes/cmd/kubelet,k8s.io/kubernetes/pkg/kubelet/...,k8s.io/cri-client/... \
     -o "$out/kubelet-cover.tmp" k8s.io/kubernetes/cmd/kubelet)
  mv "$out/kubelet-cover.tmp" "$out/kubelet-cover"
}

runtime_out="$here/../build/runtime/$CONTAINERD_VERSION"

build_containerd() {  # build_containerd NAME: containerd's own version ldflags
  [ -x "$runtime_out/$1" ] && return 0
  echo "building $1 $CONTAINERD_VERSION"
  mkdir -p "$runtime_out"
  local pkg=github.com/containerd/containerd/v2
  (cd "$here/containerd" && go build -ldflags "-s -w -X $pkg/version.Version=$CONTAINERD_VERSION \
     -X $pkg/version.Package=$pkg" -o "$runtime_out/$1.tmp" "$pkg/cmd/$1")
  mv "$runtime_out/$1.tmp" "$runtime_out/$1"
}

build_runc() {  # cgo and libseccomp (Debian libseccomp-dev); libpathrs is not packaged here
  [ -x "$runtime_out/runc" ] && return 0
  echo "building runc $RUNC_VERSION"
  mkdir -p "$runtime_out"
  (cd "$here/runc" && CGO_ENABLED=1 go build -tags "seccomp urfave_cli_no_docs" \
     -ldflags "-s -w" -o "$runtime_out/runc.tmp" github.com/opencontainers/runc)
  mv "$runtime_out/runc.tmp" "$runtime_out/runc"
}

build_etcd() {
  [ -x "$out/etcd" ] && return 0
  echo "building etcd $ETCD_VERSION"
  (cd "$here/etcd" && go build -ldflags "-s -w" -o "$out/etcd.tmp" go.etcd.io/etcd/server/v3)
  mv "$out/etcd.tmp" "$out/etcd"
}

build_metrics_server() {  # its own module and version: build/kube/metrics-server-<version>/
  local dir="$here/../build/kube/metrics-server-$METRICS_SERVER_VERSION"
  [ -x "$dir/metrics-server" ] && return 0
  echo "building metrics-server $METRICS_SERVER_VERSION"
  mkdir -p "$dir"
  # Its Makefile's version ldflags (client-go's version package).
  (cd "$here/metrics-server" && go build -o "$dir/metrics-server.tmp" \
    -ldflags "-s -w -X k8s.io/client-go/pkg/version.gitVersion=$METRICS_SERVER_VERSION" \
    sigs.k8s.io/metrics-server/cmd/metrics-server)
  mv "$dir/metrics-server.tmp" "$dir/metrics-server"
}

build_local_path_provisioner() {  # its own module and version, as metrics-server
  local dir="$here/../build/kube/local-path-provisioner-$LOCAL_PATH_PROVISIONER_VERSION"
  [ -x "$dir/local-path-provisioner" ] && return 0
  echo "building local-path-provisioner $LOCAL_PATH_PROVISIONER_VERSION"
  mkdir -p "$dir"
  # Its scripts/build's ldflags: main.VERSION, static (CGO_ENABLED=0 above).
  (cd "$here/local-path-provisioner" && go build -o "$dir/local-path-provisioner.tmp" \
    -ldflags "-s -w -X main.VERSION=$LOCAL_PATH_PROVISIONER_VERSION" \
    github.com/rancher/local-path-provisioner)
  mv "$dir/local-path-provisioner.tmp" "$dir/local-path-provisioner"
}

build_csi_sidecar() {  # build_csi_sidecar NAME MODULE-DIR PACKAGE VERSION: kubernetes-csi's
  # sidecars, each its own module and version (build/kube/<name>-<version>/); their
  # release-tools' ldflags: main.version, static (CGO_ENABLED=0 above).
  local dir="$here/../build/kube/$1-$4"
  [ -x "$dir/$1" ] && return 0
  echo "building $1 $4"
  mkdir -p "$dir"
  (cd "$here/$2" && go build -o "$dir/$1.tmp" -ldflags "-s -w -X main.version=$4" "$3")
  mv "$dir/$1.tmp" "$dir/$1"
}

build_csi_mock_driver() {  # the e2e suite's CSI mock driver, at KUBE_VERSION (kube/csi-mock)
  [ -x "$out/csi-mock-driver" ] && return 0
  echo "building csi-mock-driver $KUBE_VERSION"
  (cd "$here/csi-mock" && go build -ldflags "-s -w" -o "$out/csi-mock-driver.tmp" \
     nodelet.local/kube/csi-mock)
  mv "$out/csi-mock-driver.tmp" "$out/csi-mock-driver"
}

programs=("$@")
[ ${#programs[@]} -gt 0 ] || programs=(etcd kube-apiserver kube-controller-manager kube-scheduler kubectl kubelet kube-proxy metrics-server local-path-provisioner
  csi-mock-driver csi-provisioner csi-attacher csi-resizer sample-device-plugin test-device-plugin
  podresources-client dra-test-driver)
for p in "${programs[@]}"; do
  case $p in
    etcd) build_etcd ;;
    metrics-server) build_metrics_server ;;
    local-path-provisioner) build_local_path_provisioner ;;
    csi-mock-driver) build_csi_mock_driver ;;
    csi-provisioner) build_csi_sidecar csi-provisioner external-provisioner \
      github.com/kubernetes-csi/external-provisioner/v6/cmd/csi-provisioner \
      "$CSI_PROVISIONER_VERSION" ;;
    csi-attacher) build_csi_sidecar csi-attacher external-attacher \
      github.com/kubernetes-csi/external-attacher/v4/cmd/csi-attacher "$CSI_ATTACHER_VERSION" ;;
    csi-resizer) build_csi_sidecar csi-resizer external-resizer \
      github.com/kubernetes-csi/external-resizer/v2/cmd/csi-resizer "$CSI_RESIZER_VERSION" ;;
    kube-apiserver|kube-controller-manager|kube-scheduler|kube-proxy|kubectl|kubelet)
      build_kube "$p" "k8s.io/kubernetes/cmd/$p" ;;
    kubelet-cover) build_kubelet_cover ;;
    e2e.test) build_e2e e2e.test k8s.io/kubernetes/test/e2e ;;
    e2e_node.test) build_e2e e2e_node.test k8s.io/kubernetes/test/e2e_node ;;
    containerd|containerd-shim-runc-v2|ctr) build_containerd "$p" ;;
    runc) build_runc ;;
    runtime) for r in containerd containerd-shim-runc-v2 ctr; do build_containerd "$r"; done
             build_runc ;;
    # The e2e suite's test images' programs (images/e2e.py packages them): both live in the
    # k8s.io/kubernetes module itself, so they are built at the same pinned version.
    agnhost) build_kube agnhost k8s.io/kubernetes/test/images/agnhost ;;
    nnp) build_kube nnp k8s.io/kubernetes/test/images/nonewprivs ;;
    # The node e2e suite's sample device plugin (example.com/resource, two devices): a host
    # process beside nodelet in the device plugin tests (tests/support/deviceplugins.py).
    sample-device-plugin) build_kube sample-device-plugin \
      k8s.io/kubernetes/test/images/sample-device-plugin ;;
    # The kubelet's device plugin stub (the sample plugin's) with devices and their health
    # given by flag and stdin (kube/kubernetes/testdeviceplugin), as the suite's
    # testdeviceplugin changes them: the device health tests (tests/support/deviceplugins.py).
    test-device-plugin) build_kube test-device-plugin nodelet.dev/kube/testdeviceplugin ;;
    # A client of the pod resources API: the kubelet's own v1 client, its answers as JSON
    # (kube/kubernetes/podresourcesclient), for the pod resources tests.
    podresources-client) build_kube podresources-client nodelet.dev/kube/podresourcesclient ;;
    # The DRA e2e suites' test driver (test-driver.cdi.k8s.io): its kubelet plugin runs as a
    # host process beside nodelet in the DRA tests (tests/support/dra.py).
    dra-test-driver) build_kube dra-test-driver k8s.io/kubernetes/test/e2e/dra/test-driver ;;
    # The ginkgo CLI at the build list's version: it runs e2e.test in parallel processes.
    ginkgo) build_kube ginkgo github.com/onsi/ginkgo/v2/ginkgo ;;
    *) echo "kube/build.sh: unknown program $p" >&2; exit 2 ;;
  esac
done
