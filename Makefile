# nodelet: two commands for a newcomer.
#   make run   - install what is missing, then run nodelet on examples/ (needs root)
#   make test  - install what is missing, then lint, type-check and run the whole test suite
SHELL := /bin/bash
VENV := .venv
PY := $(VENV)/bin/python
# containerd and runc: Debian 12's 1.6 (the second runtime); libseccomp-dev and pkg-config:
# to build runc (`make runtime`); netcat-openbsd: the nc of the e2e suite's agnhost image.
APT_PACKAGES := containerd runc containernetworking-plugins busybox-static netcat-openbsd iproute2 iptables gcc libc6-dev make sqlite3 docker-registry chromium chromium-driver tmux libseccomp-dev pkg-config
PROTO := src/nodelet/adapters/cri/api.proto
GEN := src/nodelet/adapters/cri/gen
EVENTS_DIR := src/nodelet/adapters/events
EVENTS_PROTO := $(EVENTS_DIR)/events.proto $(EVENTS_DIR)/payloads.proto
EVENTS_GEN := $(EVENTS_DIR)/gen
CSI_DIR := src/nodelet/adapters/csi
CSI_PROTO := $(CSI_DIR)/csi.proto $(CSI_DIR)/pluginregistration.proto
CSI_GEN := $(CSI_DIR)/gen
DP_DIR := src/nodelet/adapters/deviceplugin
DP_PROTO := $(DP_DIR)/deviceplugin.proto
DP_GEN := $(DP_DIR)/gen
PR_DIR := src/nodelet/adapters/podresourcesapi
PR_PROTO := $(PR_DIR)/podresources.proto $(PR_DIR)/podresources_v1alpha1.proto
PR_GEN := $(PR_DIR)/gen
DRA_DIR := src/nodelet/adapters/dra
DRA_PROTO := $(DRA_DIR)/dra.proto $(DRA_DIR)/health.proto
DRA_GEN := $(DRA_DIR)/gen
IMAGES := images/out

.PHONY: setup run test test-system-runtime lint unit apt venv proto images runtime kube conformance conformance-node conformance-storage clean

setup: apt venv proto images runtime

# Debian packages: installed only when one is missing, so `make setup` is cheap when done.
apt:
	@missing=$$(for p in $(APT_PACKAGES); do dpkg -s $$p >/dev/null 2>&1 || echo $$p; done); \
	if [ -n "$$missing" ]; then \
	  echo "installing: $$missing"; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing; \
	fi

venv: $(VENV)/.installed
$(VENV)/.installed: pyproject.toml
	test -x $(PY) || python3 -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[test,lint,gen]'
	touch $@

# CRI, containerd-events, CSI and plugin-registration messages and stubs, generated from our
# own .proto subsets.
proto: $(GEN)/.generated $(EVENTS_GEN)/.generated $(CSI_GEN)/.generated $(DP_GEN)/.generated \
  $(PR_GEN)/.generated $(DRA_GEN)/.generated
$(GEN)/.generated: $(PROTO) $(VENV)/.installed
	mkdir -p $(GEN)
	PATH=$(CURDIR)/$(VENV)/bin:$$PATH $(PY) -m grpc_tools.protoc -I src/nodelet/adapters/cri --python_out=$(GEN) \
	  --grpc_python_out=$(GEN) --mypy_out=$(GEN) --mypy_grpc_out=$(GEN) $(PROTO)
	sed -i 's/^import api_pb2/from . import api_pb2/' $(GEN)/api_pb2_grpc.py $(GEN)/api_pb2_grpc.pyi
	touch $(GEN)/__init__.py $@
$(EVENTS_GEN)/.generated: $(EVENTS_PROTO) $(VENV)/.installed
	mkdir -p $(EVENTS_GEN)
	PATH=$(CURDIR)/$(VENV)/bin:$$PATH $(PY) -m grpc_tools.protoc -I $(EVENTS_DIR) --python_out=$(EVENTS_GEN) \
	  --grpc_python_out=$(EVENTS_GEN) --mypy_out=$(EVENTS_GEN) --mypy_grpc_out=$(EVENTS_GEN) $(EVENTS_PROTO)
	sed -i 's/^import events_pb2/from . import events_pb2/' $(EVENTS_GEN)/events_pb2_grpc.py $(EVENTS_GEN)/events_pb2_grpc.pyi
	touch $(EVENTS_GEN)/__init__.py $@

$(CSI_GEN)/.generated: $(CSI_PROTO) $(VENV)/.installed
	mkdir -p $(CSI_GEN)
	PATH=$(CURDIR)/$(VENV)/bin:$$PATH $(PY) -m grpc_tools.protoc -I $(CSI_DIR) --python_out=$(CSI_GEN) \
	  --grpc_python_out=$(CSI_GEN) --mypy_out=$(CSI_GEN) --mypy_grpc_out=$(CSI_GEN) $(CSI_PROTO)
	sed -i -E 's/^import (csi|pluginregistration)_pb2/from . import \1_pb2/' \
	  $(CSI_GEN)/*_pb2_grpc.py $(CSI_GEN)/*_pb2_grpc.pyi
	touch $(CSI_GEN)/__init__.py $@

$(DP_GEN)/.generated: $(DP_PROTO) $(VENV)/.installed
	mkdir -p $(DP_GEN)
	PATH=$(CURDIR)/$(VENV)/bin:$$PATH $(PY) -m grpc_tools.protoc -I $(DP_DIR) --python_out=$(DP_GEN) \
	  --grpc_python_out=$(DP_GEN) --mypy_out=$(DP_GEN) --mypy_grpc_out=$(DP_GEN) $(DP_PROTO)
	sed -i 's/^import deviceplugin_pb2/from . import deviceplugin_pb2/' \
	  $(DP_GEN)/deviceplugin_pb2_grpc.py $(DP_GEN)/deviceplugin_pb2_grpc.pyi
	touch $(DP_GEN)/__init__.py $@

$(PR_GEN)/.generated: $(PR_PROTO) $(VENV)/.installed
	mkdir -p $(PR_GEN)
	PATH=$(CURDIR)/$(VENV)/bin:$$PATH $(PY) -m grpc_tools.protoc -I $(PR_DIR) --python_out=$(PR_GEN) \
	  --grpc_python_out=$(PR_GEN) --mypy_out=$(PR_GEN) --mypy_grpc_out=$(PR_GEN) $(PR_PROTO)
	sed -i -E 's/^import (podresources(_v1alpha1)?_pb2)/from . import \1/' \
	  $(PR_GEN)/*_pb2_grpc.py $(PR_GEN)/*_pb2_grpc.pyi
	touch $(PR_GEN)/__init__.py $@

$(DRA_GEN)/.generated: $(DRA_PROTO) $(VENV)/.installed
	mkdir -p $(DRA_GEN)
	PATH=$(CURDIR)/$(VENV)/bin:$$PATH $(PY) -m grpc_tools.protoc -I $(DRA_DIR) --python_out=$(DRA_GEN) \
	  --grpc_python_out=$(DRA_GEN) --mypy_out=$(DRA_GEN) --mypy_grpc_out=$(DRA_GEN) $(DRA_PROTO)
	sed -i 's/^import \(dra\|health\)_pb2/from . import \1_pb2/' $(DRA_GEN)/*_pb2_grpc.py \
	  $(DRA_GEN)/*_pb2_grpc.pyi
	touch $(DRA_GEN)/__init__.py $@

# Local OCI image archives (pause + busybox); nodelet imports them into containerd when missing.
images: $(IMAGES)/pause.tar $(IMAGES)/busybox.tar $(IMAGES)/nmeter
$(IMAGES)/nmeter: images/nmeter.c
	mkdir -p $(IMAGES)
	gcc -static -Os -Wall -Werror -o $@ $<
	strip $@
$(IMAGES)/pause: images/pause.c
	mkdir -p $(IMAGES)
	gcc -static -Os -Wall -Werror -o $@ $<
	strip $@
$(IMAGES)/pause.tar: $(IMAGES)/pause $(VENV)/.installed images/build.py
	$(PY) images/build.py pause --binary $(IMAGES)/pause --out $@
$(IMAGES)/busybox.tar: /bin/busybox $(VENV)/.installed images/build.py
	$(PY) images/build.py busybox --binary /bin/busybox --out $@

# The runtime nodelet runs by default: containerd 2.x and runc built from their Go modules into
# build/runtime/<containerd version>/ (kube/versions.env); about 90 s the first time.
runtime: apt
	kube/build.sh runtime

# The upstream programs the tests use as peers and judges (etcd, kube-apiserver,
# kube-controller-manager, kube-scheduler, kube-proxy, kubectl, the kubelet), built from their Go
# modules into build/kube/<version>/ (kube/versions.env). A binary built already is kept.
kube:
	kube/build.sh

# Kubernetes' own [NodeConformance] e2e tests against the real control plane with nodelet as
# its only node (tests/conformance/run.py); writes docs/conformance.md. Needs root.
# The e2e suite and what its test images are made of (about 4 minutes after `make kube`).
E2E_PROGRAMS := e2e.test ginkgo agnhost nnp sample-device-plugin
conformance: setup
	kube/build.sh etcd kube-apiserver kube-controller-manager kube-scheduler kubectl $(E2E_PROGRAMS) e2e_node.test
	$(PY) tests/conformance/run.py $(CONFORMANCE_ARGS)

# The node's own suite: e2e_node.test's [NodeConformance] specs of test/e2e_node on nodelet,
# then on the real kubelet, each the only node of a fresh control plane
# (tests/conformance/run_node.py): those the kubelet's presubmit runs (no [Serial],
# [Disruptive], [Flaky], [Slow]) in parallel, then the [Serial], [Disruptive] and [Slow] ones
# one at a time (they restart and reconfigure the agent through a stand-in for systemd); writes
# docs/conformance-node.md with a column for each. Needs root and the machine's kubelet ports.
# Not part of `make test`, which runs a subset on nodelet alone
# (tests/conformance/test_node_suite_subset.py).
conformance-node: setup
	kube/build.sh etcd kube-apiserver kube-controller-manager kube-scheduler kubectl kubelet $(E2E_PROGRAMS) e2e_node.test
	$(PY) tests/conformance/run_node.py --host-defaults $(CONFORMANCE_NODE_ARGS)

# Kubernetes' own storage tests (e2e.test [sig-storage]: the in-tree local and hostPath
# drivers, PersistentVolumes-local, Ephemeralstorage, PV/PVC protection; no [Serial],
# [Disruptive], [Flaky], [Slow], [Feature:*]) on nodelet, then on the real kubelet, each the
# only node of a fresh control plane (tests/conformance/run_storage.py); writes
# docs/conformance-storage.md with a column for each. Needs root. Not part of `make test`.
conformance-storage: setup
	kube/build.sh etcd kube-apiserver kube-controller-manager kube-scheduler kubectl kubelet $(E2E_PROGRAMS)
	$(PY) tests/conformance/run_storage.py $(CONFORMANCE_STORAGE_ARGS)

# A local cluster: the control plane from `make kube`'s binaries and a nodelet node joined to
# it by a bootstrap token, in the background; prints the admin kubeconfig (docs/cluster.md).
CLUSTER_DIR := build/cluster
cluster: setup kube
	$(PY) tests/support/controlplane.py --dir $(CLUSTER_DIR) --join --background

# Stops it (nodelet, then `nodelet reset` of its node, then the control plane), by PID.
cluster-down:
	@if [ -f $(CLUSTER_DIR)/supervisor.pid ]; then \
	  pid=$$(cat $(CLUSTER_DIR)/supervisor.pid); kill -TERM $$pid 2>/dev/null; \
	  while kill -0 $$pid 2>/dev/null; do sleep 0.5; done; echo "cluster stopped"; \
	else echo "no cluster runs in $(CLUSTER_DIR)"; fi

run: setup
	$(VENV)/bin/nodelet run --manifests examples/

lint: setup
	$(VENV)/bin/ruff check src tests bench images
	$(VENV)/bin/mypy src
	$(VENV)/bin/lint-imports

unit: setup
	$(VENV)/bin/pytest tests/model -q

# The cluster tests run against the real control plane: `kube` builds it (skipped when built).
test: lint kube
	kube/build.sh $(E2E_PROGRAMS) e2e_node.test  # the [NodeConformance] subsets in tests/conformance
	$(VENV)/bin/pytest -q --durations=25

# The runtime-facing tests again on the other runtime: the containerd on PATH (Debian's 1.6).
RUNTIME_FACING := tests/runtime tests/agent/test_lifecycle.py tests/agent/test_timing.py \
  tests/agent/test_security.py tests/agent/test_sandbox_lifecycle.py \
  tests/agent/test_statuses.py tests/agent/test_failures.py tests/agent/test_runtime_events.py \
  tests/agent/test_recursive_read_only.py tests/agent/test_user_namespaces.py \
  tests/agent/test_image_volumes.py tests/agent/test_runtime_identities.py
test-system-runtime: setup
	NODELET_TEST_RUNTIME=system $(VENV)/bin/pytest -q $(RUNTIME_FACING)

clean:
	rm -rf $(GEN) $(EVENTS_GEN) $(CSI_GEN) $(IMAGES) $(VENV)
