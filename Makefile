# plugsim: fakes of the Kubernetes node plugin interfaces (CRI, CNI, CSI) and a harness.
# `make help` lists the targets. The README's two commands are `make demo` and `make test`.

GO      ?= go
BIN     := $(CURDIR)/bin
TOOLS   := harness/tools
KUBELET := harness/tools/kubelet
SIDECARS := harness/tools/sidecars
KUBE    := harness/tools/kube
ETCD    := harness/tools/etcd
CONFORMANCE := harness/tools/conformance
HELM    := harness/tools/helm
GATEWAY_API := harness/tools/gateway-api
RUNC    := harness/tools/runc
PROGRAMS := harness/tools/programs
KUBE_VERSION := v1.37.2
# Packages that need root (network namespaces, iptables, mounts) skip with a message when not root.
TEST_FLAGS ?= -race -count=1 -timeout 15m
E2E_FLAGS  ?= -count=1 -timeout 60m -v
export PLUGSIM_BIN := $(BIN)

TOOL_BINS  := crictl critest csi-sanity cnitool portmap host-local bridge noop
# The real CSI sidecars a cluster runs against csi-fake, pinned in harness/tools/sidecars/go.mod.
SIDECAR_BINS := csi-provisioner csi-attacher csi-resizer csi-snapshotter snapshot-controller

.PHONY: help build tools helm gateway-api-crds addons runc programs kubelet sidecars control-plane kubemark kwok cluster cluster-down e2e-cluster bench-cluster cluster-scale deps test fmt-check vet e2e e2e-cri e2e-cni e2e-csi e2e-harness e2e-kubelet e2e-ui ui-screenshots bench demo clean fuzz fuzz-smoke soak conformance-tools conformance

help: ## list the targets
	@awk 'BEGIN{FS=":.*## "} /^[a-z0-9-]+:.*## /{printf "  %-12s %s\n", $$1, $$2}' $(MAKEFILE_LIST)

build: ## build bin/cri-fake, bin/cni-fake, bin/csi-fake and bin/harness
	@mkdir -p $(BIN)
	$(GO) build -o $(BIN)/ ./cri-fake ./harness
	@# cni-fake is exec'd once per CNI call: without cgo it skips the dynamic loader (about 1 ms an exec).
	@# csi-fake is also a program image's binary (cri-fake/oci), run in a root without libc: static.
	CGO_ENABLED=0 $(GO) build -o $(BIN)/ ./cni-fake ./csi-fake

# The real clients, pinned in harness/tools/go.mod; each is rebuilt only when that module changes.
tools: $(addprefix $(BIN)/,$(TOOL_BINS)) ## build the pinned real clients: crictl, critest, csi-sanity, cnitool, portmap, host-local, bridge, noop

$(BIN)/critest: $(TOOLS)/go.mod $(TOOLS)/go.sum
	@mkdir -p $(BIN)
	cd $(TOOLS) && $(GO) test -c -o $@ sigs.k8s.io/cri-tools/cmd/critest

$(BIN)/crictl $(BIN)/csi-sanity $(BIN)/cnitool: $(TOOLS)/go.mod $(TOOLS)/go.sum
	@mkdir -p $(BIN)
	cd $(TOOLS) && $(GO) build -o $@ $$($(GO) list -f '{{.ImportPath}}' tool | grep -E '/$(notdir $@)$$')

# The CNI plugins static, as the CNI project releases them (CGO_ENABLED=0 in plugins' release.yaml) and as
# cni-fake is built: cri-fake execs portmap for every pod, and the dynamic loader cost each exec about a
# millisecond of CPU (200 execs: 4.5 ms each dynamic, 3.3 ms static, on the 2-core VM).
$(BIN)/portmap $(BIN)/host-local $(BIN)/bridge $(BIN)/noop: $(TOOLS)/go.mod $(TOOLS)/go.sum
	@mkdir -p $(BIN)
	cd $(TOOLS) && CGO_ENABLED=0 $(GO) build -o $@ $$($(GO) list -f '{{.ImportPath}}' tool | grep -E '/$(notdir $@)$$')

# runc v1.5.3, the low-level runtime of program containers (cri-fake/oci). cgo for its nsenter (C), the
# seccomp tag for its seccomp filters (libseccomp-dev, from `make deps`); the version where runc's own
# Makefile puts it (-X main.version, from its VERSION file).
runc: $(BIN)/runc ## build runc v1.5.3 (with seccomp, libseccomp-dev) for cri-fake's program containers

$(BIN)/runc: $(RUNC)/go.mod $(RUNC)/go.sum
	@mkdir -p $(BIN)
	cd $(RUNC) && ver=$$($(GO) list -m -f '{{.Version}}' github.com/opencontainers/runc) && \
		CGO_ENABLED=1 $(GO) build -trimpath -tags "seccomp urfave_cli_no_docs" -o $@ \
		-ldflags "-X main.version=$${ver#v} -X main.gitCommit=$$ver" github.com/opencontainers/runc

# The programs of cri-fake's program images (images.Program), in bin/programs (cri-fake's default
# --program-dir: beside its runc), each static (CGO_ENABLED=0: their roots hold no libc) with the version
# where the upstream build puts it: CoreDNS, metrics-server and sample-apiserver from their pinned modules in
# harness/tools/programs, the CSI sidecars from harness/tools/sidecars (`make sidecars`: bin/'s are links to
# these), and links to bin/etcd and bin/csi-fake, which are static already. Only the suites that run a
# program depend on it: e2e-cluster on etcd, CoreDNS, sample-apiserver (its aggregated-API check), csi-fake,
# the sidecars and metrics-server, conformance on sample-apiserver, etcd, csi-fake and the sidecars.
PROGRAM_DIR  := $(BIN)/programs
PROGRAM_BINS := coredns metrics-server sample-apiserver etcd csi-fake $(SIDECAR_BINS)
programs: $(addprefix $(PROGRAM_DIR)/,$(PROGRAM_BINS)) ## build the programs of the program images into bin/programs (static): CoreDNS v1.15.0, metrics-server v0.8.0, sample-apiserver v0.37.2, the CSI sidecars, etcd, csi-fake

$(PROGRAM_DIR)/etcd: $(BIN)/etcd
	@mkdir -p $(PROGRAM_DIR)
	ln -f $< $@

$(PROGRAM_DIR)/csi-fake: build
	@mkdir -p $(PROGRAM_DIR)
	ln -f $(BIN)/csi-fake $@

$(PROGRAM_DIR)/coredns: $(PROGRAMS)/coredns/go.mod $(PROGRAMS)/coredns/go.sum
	@mkdir -p $(PROGRAM_DIR)
	cd $(PROGRAMS)/coredns && CGO_ENABLED=0 $(GO) build -o $@ \
		-ldflags "-X github.com/coredns/coredns/coremain.GitCommit=$$($(GO) list -m -f '{{.Version}}' github.com/coredns/coredns)" github.com/coredns/coredns

$(PROGRAM_DIR)/metrics-server: $(PROGRAMS)/metrics-server/go.mod $(PROGRAMS)/metrics-server/go.sum
	@mkdir -p $(PROGRAM_DIR)
	cd $(PROGRAMS)/metrics-server && CGO_ENABLED=0 $(GO) build -o $@ \
		-ldflags "-X k8s.io/client-go/pkg/version.gitVersion=$$($(GO) list -m -f '{{.Version}}' sigs.k8s.io/metrics-server)" sigs.k8s.io/metrics-server/cmd/metrics-server

$(PROGRAM_DIR)/sample-apiserver: $(PROGRAMS)/sample-apiserver/go.mod $(PROGRAMS)/sample-apiserver/go.sum
	@mkdir -p $(PROGRAM_DIR)
	cd $(PROGRAMS)/sample-apiserver && CGO_ENABLED=0 $(GO) build -o $@ -ldflags "$(KUBE_LDFLAGS)" k8s.io/sample-apiserver

$(addprefix $(PROGRAM_DIR)/,$(SIDECAR_BINS)): $(SIDECARS)/go.mod $(SIDECARS)/go.sum
	@mkdir -p $(PROGRAM_DIR)
	cd $(SIDECARS) && pkg=$$($(GO) list -f '{{.ImportPath}}' tool | grep -E '/cmd/$(notdir $@)$$') && \
		ver=$$($(GO) list -f '{{.Module.Version}}' $$pkg) && \
		CGO_ENABLED=0 $(GO) build -o $@ -ldflags "-X main.version=$$ver" $$pkg

kubelet: $(BIN)/kubelet ## build kubelet v1.37.2 (takes minutes; only the kubelet end-to-end suite needs it)

$(BIN)/kubelet: $(KUBELET)/go.mod $(KUBELET)/go.sum
	@mkdir -p $(BIN)
	@echo "building kubelet $(KUBE_VERSION): this takes about 4 minutes on 2 cores"
	cd $(KUBELET) && $(GO) build -o $@ -ldflags "\
		-X k8s.io/component-base/version.gitVersion=$(KUBE_VERSION) \
		-X k8s.io/component-base/version.gitMajor=1 \
		-X k8s.io/component-base/version.gitMinor=37 \
		-X k8s.io/component-base/version.gitTreeState=clean" k8s.io/kubernetes/cmd/kubelet

sidecars: $(addprefix $(BIN)/,$(SIDECAR_BINS)) $(addprefix $(PROGRAM_DIR)/,$(SIDECAR_BINS) csi-fake) $(BIN)/snapshot-crds/.stamp ## build the real CSI sidecars (external-provisioner, -attacher, -resizer, -snapshotter, snapshot-controller) into bin/programs, with csi-fake, and copy the (group) snapshot CRDs

# One build of each sidecar, static, in bin/programs: the cluster runs them as program images in the CSI
# driver's pods (examples/csi/controller.yaml), and the CSI suite as processes (bin/ holds links). Each is
# rebuilt only when the sidecars' module changes; the version goes where their own release builds put it
# (-X main.version, above), so --version and the startup log name it.
$(addprefix $(BIN)/,$(SIDECAR_BINS)): $(BIN)/%: $(PROGRAM_DIR)/%
	ln -f $< $@

# The v1 CRDs of external-snapshotter v8: VolumeSnapshot{,Class,Content}, which csi-snapshotter and
# snapshot-controller need, and VolumeGroupSnapshot{,Class,Content}, which both wait for at start
# (up to --retry-crd-interval-max, 30 s) while their VolumeGroupSnapshot gate is on (GA, the
# default) and which let csi-fake's GroupController be reached through them. Copied from the
# external-snapshotter client module in the module cache (the version the sidecars' module pins)
# into bin/ for the cluster to apply: the repository carries no copy of them.
$(BIN)/snapshot-crds/.stamp: $(SIDECARS)/go.mod $(SIDECARS)/go.sum
	@mkdir -p $(BIN)/snapshot-crds
	dir=$$(cd $(SIDECARS) && $(GO) mod download -json github.com/kubernetes-csi/external-snapshotter/client/v8 | sed -n 's/^\t"Dir": "\(.*\)",$$/\1/p') && \
		test -n "$$dir" && for g in snapshot groupsnapshot; do for k in $${g}classes $${g}contents $${g}s; do \
			install -m 0644 "$$dir/config/crd/$$g.storage.k8s.io_volume$$k.yaml" $(BIN)/snapshot-crds/ || exit 1; \
		done; done
	@touch $@

# Helm v4.3.2 (harness/tools/helm), built as Helm's own Makefile builds it: static, -trimpath, the
# version where its release puts it (helm version prints it).
helm: $(BIN)/helm $(BIN)/charts/metrics-server.tgz ## build Helm v4.3.2 into bin/helm and package the metrics-server chart of metrics-server v0.8.0 into bin/charts

# The metrics-server chart the pinned sigs.k8s.io/metrics-server module carries (charts/metrics-server,
# chart 3.12.2), packaged as it is but for its appVersion: the module's Chart.yaml still says 0.7.2, and
# the chart's image tag defaults to v<appVersion>, so helm package --app-version gives it the v0.8.0 this
# module is (the program image registry.k8s.io/metrics-server/metrics-server:v0.8.0). Offline, no chart
# repository is reachable: `helm install metrics-server bin/charts/metrics-server.tgz ...`.
$(BIN)/charts/metrics-server.tgz: $(BIN)/helm $(PROGRAMS)/metrics-server/go.mod $(PROGRAMS)/metrics-server/go.sum
	@mkdir -p $(BIN)/charts
	cd $(PROGRAMS)/metrics-server && dir=$$($(GO) mod download -json sigs.k8s.io/metrics-server | sed -n 's/^\t"Dir": "\(.*\)",$$/\1/p') && \
		ver=$$($(GO) list -m -f '{{.Version}}' sigs.k8s.io/metrics-server) && test -n "$$dir" && tmp=$$(mktemp -d) && \
		HELM_CONFIG_HOME=$$tmp HELM_CACHE_HOME=$$tmp HELM_DATA_HOME=$$tmp $(BIN)/helm package --app-version $${ver#v} -d $$tmp "$$dir/charts/metrics-server" >/dev/null && \
		mv $$tmp/metrics-server-*.tgz $@ && rm -rf $$tmp

# What the add-on pages of examples/addons need beside a cluster: Helm and the chart, metrics-server's
# program, the Gateway API CRDs.
addons: helm gateway-api-crds $(PROGRAM_DIR)/metrics-server ## build what examples/addons uses: Helm and the metrics-server chart, metrics-server v0.8.0, the Gateway API CRDs

$(BIN)/helm: $(HELM)/go.mod $(HELM)/go.sum
	@mkdir -p $(BIN)
	cd $(HELM) && ver=$$($(GO) list -m -f '{{.Version}}' helm.sh/helm/v4) && \
		CGO_ENABLED=0 $(GO) build -trimpath -o $@ -ldflags "-w -s -X helm.sh/helm/v4/internal/version.version=$$ver" helm.sh/helm/v4/cmd/helm

# The Gateway API CRDs of the pinned sigs.k8s.io/gateway-api (harness/tools/gateway-api): the module's
# config/crd, copied from the module cache (the repository carries no copy), for `kubectl kustomize
# bin/gateway-api/crd` and `kubectl apply -k bin/gateway-api/crd` (examples/addons/kustomize-gateway-api.md).
gateway-api-crds: $(BIN)/gateway-api/crd/.stamp ## copy the Gateway API v1.6.3 CRDs' kustomization (config/crd) into bin/gateway-api/crd

$(BIN)/gateway-api/crd/.stamp: $(GATEWAY_API)/go.mod $(GATEWAY_API)/go.sum
	dir=$$(cd $(GATEWAY_API) && $(GO) mod download -json sigs.k8s.io/gateway-api | sed -n 's/^\t"Dir": "\(.*\)",$$/\1/p') && \
		test -n "$$dir" && rm -rf $(BIN)/gateway-api/crd && mkdir -p $(BIN)/gateway-api && \
		cp -R "$$dir/config/crd" $(BIN)/gateway-api/crd && chmod -R u+w,go-w $(BIN)/gateway-api/crd
	@touch $@

# Without these the components report v0.0.0-master, and a kubelet newer than its API server by that is refused.
KUBE_LDFLAGS := -X k8s.io/component-base/version.gitVersion=$(KUBE_VERSION) \
	-X k8s.io/component-base/version.gitMajor=1 \
	-X k8s.io/component-base/version.gitMinor=37 \
	-X k8s.io/component-base/version.gitTreeState=clean

control-plane: $(BIN)/kube $(BIN)/kubectl $(BIN)/kube-proxy $(BIN)/etcd ## build etcd v3.6.16 and kube-apiserver, -controller-manager, -scheduler, kubectl v1.37.2 (one binary, bin/kube), kube-proxy (bin/kube-proxy)

# One multi-call binary (harness/tools/kube/main.go): apiserver, controller-manager, scheduler and kubectl.
$(BIN)/kube: $(KUBE)/go.mod $(KUBE)/go.sum $(KUBE)/main.go
	@mkdir -p $(BIN)
	@echo "building kube-apiserver, kube-controller-manager, kube-scheduler and kubectl $(KUBE_VERSION) as bin/kube: minutes on 2 cores"
	cd $(KUBE) && $(GO) build -o $@ -ldflags "$(KUBE_LDFLAGS)" .

$(BIN)/kubectl: $(BIN)/kube
	ln -sf kube $@

# kube-proxy runs once per node, so it is a binary of its own: in the multi-call binary it carried every
# component's packages and their init, 104 MiB RSS a node against 64 MiB alone (measured idle, same flags).
# Its packages are bin/kube's, compiled once; this is one more link.
$(BIN)/kube-proxy: $(KUBE)/go.mod $(KUBE)/go.sum
	@mkdir -p $(BIN)
	cd $(KUBE) && $(GO) build -o $@ -ldflags "$(KUBE_LDFLAGS)" k8s.io/kubernetes/cmd/kube-proxy

# kubemark's hollow node (cmd/kubemark of k8s.io/kubernetes v1.37.2), built in the control plane's module
# (same staging replaces, so it shares their packages and the kubelet's in the build cache). Only
# bench-cluster runs it, beside plugsim's nodes; not part of CI.
kubemark: $(BIN)/kubemark ## build kubemark v1.37.2 (hollow nodes, for bench-cluster's comparison)

$(BIN)/kubemark: $(KUBE)/go.mod $(KUBE)/go.sum
	@mkdir -p $(BIN)
	cd $(KUBE) && $(GO) build -o $@ -ldflags "$(KUBE_LDFLAGS)" k8s.io/kubernetes/cmd/kubemark

# KWOK's controller, pinned in harness/tools/kwok/go.mod, and its stock stages (node-fast,
# node-heartbeat-with-lease, pod-fast) copied from its module into bin/kwok-stages. Only bench-cluster
# runs it; not part of CI.
KWOK := harness/tools/kwok
kwok: $(BIN)/kwok $(BIN)/kwok-stages/.stamp ## build KWOK's controller v0.8.0 and copy its stages (for bench-cluster's comparison)

$(BIN)/kwok: $(KWOK)/go.mod $(KWOK)/go.sum
	@mkdir -p $(BIN)
	cd $(KWOK) && $(GO) build -o $@ -ldflags "-X sigs.k8s.io/kwok/pkg/consts.Version=$$($(GO) list -m -f '{{.Version}}' sigs.k8s.io/kwok)" sigs.k8s.io/kwok/cmd/kwok

$(BIN)/kwok-stages/.stamp: $(KWOK)/go.mod $(KWOK)/go.sum
	@mkdir -p $(BIN)/kwok-stages
	dir=$$(cd $(KWOK) && $(GO) list -m -f '{{.Dir}}' sigs.k8s.io/kwok) && test -n "$$dir" && \
		install -m 0644 $$dir/kustomize/stage/node/fast/node-initialize.yaml \
			$$dir/kustomize/stage/node/heartbeat-with-lease/node-heartbeat-with-lease.yaml \
			$$dir/kustomize/stage/pod/fast/pod-ready.yaml $$dir/kustomize/stage/pod/fast/pod-complete.yaml \
			$$dir/kustomize/stage/pod/fast/pod-delete.yaml $(BIN)/kwok-stages/
	@touch $@


# Static: it is also the binary of the etcd program image (registry.k8s.io/etcd in cri-fake's catalog).
$(BIN)/etcd: $(ETCD)/go.mod $(ETCD)/go.sum $(ETCD)/main.go Makefile
	@mkdir -p $(BIN)
	cd $(ETCD) && CGO_ENABLED=0 $(GO) build -o $@ .

CLUSTER_DIR ?= /var/lib/plugsim/cluster
NODES       ?= 1

# As root: the control plane and NODES kubelets on the fakes, each node in a network namespace of its own.
cluster: deps build $(BIN)/portmap $(BIN)/crictl runc $(PROGRAM_DIR)/etcd $(PROGRAM_DIR)/coredns kubelet control-plane sidecars ## start a cluster (NODES=1) in CLUSTER_DIR: etcd, API server, controllers, scheduler, kubelets on the fakes
	$(BIN)/harness cluster up --nodes $(NODES) --dir $(CLUSTER_DIR)

cluster-down: ## stop the cluster in CLUSTER_DIR and remove what it left (namespaces, mounts, processes)
	$(BIN)/harness cluster down --dir $(CLUSTER_DIR)

deps: ## install what the kernel-touching tests need (iptables, iproute2), runc's libseccomp-dev and the browser tests' Chromium, when root
	@missing=""; \
	for c in iptables:iptables ip:iproute2 nsenter:util-linux unshare:util-linux chromium:chromium; do \
		command -v $${c%%:*} >/dev/null 2>&1 || missing="$$missing $${c#*:}"; \
	done; \
	test -f /usr/include/seccomp.h || missing="$$missing libseccomp-dev"; \
	if [ -z "$$missing" ]; then exit 0; fi; \
	if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
		echo "deps: installing$$missing"; \
		(apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing) >/dev/null || echo "deps: could not install$$missing; the tests that need them skip or fail"; \
	else \
		echo "deps: missing$$missing; install them (as root: apt-get install$$missing), or the tests that need them skip"; \
	fi

fmt-check:
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt: not formatted:"; echo "$$out"; exit 1; fi

# examples/clients is a module of its own (plugsim through a replace, as a test author's module has
# it): ./... of the root module leaves it out, so vet and test run it on their own.
CLIENTS := examples/clients

vet:
	$(GO) vet ./...
	cd $(CLIENTS) && $(GO) vet ./...

test: deps build tools runc fmt-check vet ## gofmt check, go vet, and go test -race ./... here and in examples/clients (root-only tests skip when not root)
	$(GO) test $(TEST_FLAGS) ./...
	cd $(CLIENTS) && $(GO) test $(TEST_FLAGS) ./...

e2e: e2e-cri e2e-cni e2e-csi e2e-harness e2e-ui e2e-kubelet e2e-cluster ## every end-to-end suite against the real clients (critest, csi-sanity, cnitool, portmap, kubelet)

e2e-cri: deps build tools ## critest and crictl against cri-fake
	$(GO) test -tags e2e $(E2E_FLAGS) ./cri-fake/e2e/

e2e-cni: deps build tools ## libcni, cnitool and the real portmap against cni-fake (root: in a throw-away netns)
	$(GO) test -tags e2e $(E2E_FLAGS) ./cni-fake/e2e/

e2e-csi: deps build tools sidecars ## csi-sanity against csi-fake (all-in-one, split endpoints, ephemeral-only); the real sidecars named in its trace
	$(GO) test -tags e2e $(E2E_FLAGS) ./csi-fake/e2e/

e2e-harness: deps build tools ## every example scenario, kubelet load, record and replay
	$(GO) test -tags e2e $(E2E_FLAGS) ./harness/e2e/

e2e-ui: deps build ## the live boundary view in headless Chromium: a scenario watched, clicked, filtered, a fault added from the page; the page under kubelet load
	$(GO) test -tags e2e $(E2E_FLAGS) ./harness/ui/e2e/

# The screenshots harness/README.md shows, written into harness/docs/ by the browser tests: the pod
# lifecycle (with its CNI chain, a call's detail, a fault added from the page) on a node, and a PVC
# pod on a 1-node cluster (root; needs what make cluster needs).
ui-screenshots: deps build $(BIN)/portmap $(BIN)/crictl runc kubelet control-plane sidecars ## regenerate harness/docs/ui-*.png from the browser tests (node and cluster; root)
	PLUGSIM_UI_SCREENSHOTS=$(CURDIR)/harness/docs $(GO) test -tags e2e $(E2E_FLAGS) -run 'TestPodLifecycleInTheBrowser' ./harness/ui/e2e/
	PLUGSIM_UI_SCREENSHOTS=$(CURDIR)/harness/docs $(GO) test -tags e2e $(E2E_FLAGS) -run 'TestClusterView' ./harness/cluster/e2e/

e2e-kubelet: deps build tools kubelet ## a real kubelet v1.37.2 runs static pods on the fakes, in a throw-away netns (root)
	$(GO) test -tags e2e $(E2E_FLAGS) ./examples/kubelet/

e2e-cluster: deps build $(BIN)/portmap $(BIN)/crictl runc $(PROGRAM_DIR)/etcd $(PROGRAM_DIR)/coredns $(PROGRAM_DIR)/sample-apiserver kubelet control-plane sidecars addons ## a whole cluster on the fakes: harness cluster up, kubectl checks, down leaves nothing (root)
	$(GO) test -tags e2e $(E2E_FLAGS) ./harness/cluster/e2e/

# The figures of harness/README.md's cluster section: up to Ready (1 and 3 nodes), memory per node, a
# 100-replica Deployment to all Running (BenchmarkCluster; each sub-benchmark starts and stops a cluster
# of its own), and issue 29's side-by-side table: plugsim's nodes beside kubemark's hollow nodes and
# KWOK's on one control plane, given the same Deployments (BenchmarkClusterKinds).
bench-cluster: deps build $(BIN)/portmap runc $(PROGRAM_DIR)/coredns kubelet control-plane sidecars kubemark kwok ## time to a Ready cluster, memory per node, and plugsim beside kubemark and KWOK: pods/s, start-up p50/p90/p99, memory and CPU (root)
	$(GO) test -tags e2e -run '^$$' -bench '^BenchmarkCluster(Kinds)?$$' -benchtime 1x -timeout 90m ./harness/cluster/e2e/

# Not part of CI: steps the node count up (PLUGSIM_CLUSTER_SCALE_STEPS, default 8,...,128) until a step
# fails or free memory would not hold it; its last line names the largest node count held Ready.
cluster-scale: deps build $(BIN)/portmap runc $(PROGRAM_DIR)/coredns kubelet control-plane sidecars ## the largest cluster this machine holds Ready (long; root)
	PLUGSIM_CLUSTER_SCALE=1 $(GO) test -tags e2e -run '^$$' -bench '^BenchmarkClusterScale$$' -benchtime 1x -timeout 240m ./harness/cluster/e2e/

bench: build tools ## benchmarks, each compared in the same run with its reference
	$(GO) test -run '^$$' -bench . -benchmem -count=1 ./...

# The Kubernetes conformance suite as the outside yardstick (a measurement, not part of `make e2e` or
# CI: the whole set takes about 45 minutes on 2 cores). e2e.test v1.37.2 and the ginkgo CLI its go.mod pins (v2.32.0, for the parallel
# run) come from harness/tools/conformance, a module of its own with the same staging replaces as
# ../kube: each binary is rebuilt only when that module changes.
conformance-tools: $(BIN)/e2e.test $(BIN)/ginkgo ## build e2e.test v1.37.2 and ginkgo v2.32.0 (e2e.test: many minutes on 2 cores)

$(BIN)/e2e.test: $(CONFORMANCE)/go.mod $(CONFORMANCE)/go.sum
	@mkdir -p $(BIN)
	@echo "building e2e.test $(KUBE_VERSION): many minutes on 2 cores"
	cd $(CONFORMANCE) && $(GO) test -c -vet=off -o $@ -ldflags "$(KUBE_LDFLAGS)" k8s.io/kubernetes/test/e2e

$(BIN)/ginkgo: $(CONFORMANCE)/go.mod $(CONFORMANCE)/go.sum
	@mkdir -p $(BIN)
	cd $(CONFORMANCE) && $(GO) build -o $@ github.com/onsi/ginkgo/v2/ginkgo

CONFORMANCE_DIR     ?= /var/lib/plugsim/conformance
CONFORMANCE_OUT     ?= $(CURDIR)/conformance-out
CONFORMANCE_PROCS   ?= 4
CONFORMANCE_TIMEOUT ?= 4h
CONFORMANCE_FOCUS   ?= \[Conformance\]
CONFORMANCE_SKIP    ?=
CONFORMANCE_FLAGS   ?=
CONFORMANCE_GINKGO  ?=

# A 3-node cluster in CONFORMANCE_DIR, the specs matching CONFORMANCE_FOCUS (default: every
# [Conformance] spec) run by CONFORMANCE_PROCS ginkgo processes against its kubeconfig (the [Serial]
# ones run alone at the end, as ginkgo does with its Serial decorator), the JUnit report and the
# full log in CONFORMANCE_OUT, then `harness conformance summary` of it; the cluster is stopped on
# every way out (failure, interrupt). It succeeds when the report was written: failing specs are
# the measurement. CONFORMANCE_TIMEOUT bounds the whole run (ginkgo --timeout: the specs left are
# reported as not run); CONFORMANCE_GINKGO adds ginkgo flags (--randomize-all --seed N: a bounded
# run is then a random sample), CONFORMANCE_FLAGS e2e.test's.
conformance: deps build $(BIN)/portmap runc $(PROGRAM_DIR)/etcd $(PROGRAM_DIR)/sample-apiserver kubelet control-plane sidecars conformance-tools ## run the [Conformance] specs of e2e.test against a 3-node cluster; JUnit and summary in CONFORMANCE_OUT (root; about 45 min)
	@rm -rf $(CONFORMANCE_OUT) && mkdir -p $(CONFORMANCE_OUT)
	@trap '$(BIN)/harness cluster down --dir $(CONFORMANCE_DIR) >$(CONFORMANCE_OUT)/cluster-down.log 2>&1' EXIT; trap 'exit 130' INT TERM; \
	$(BIN)/harness cluster up --nodes 3 --dir $(CONFORMANCE_DIR) || exit 1; \
	echo "e2e.test: $(CONFORMANCE_PROCS) processes, focus '$(CONFORMANCE_FOCUS)', log in $(CONFORMANCE_OUT)/e2e.log"; \
	start=$$(date +%s); \
	$(BIN)/ginkgo run --procs $(CONFORMANCE_PROCS) --timeout $(CONFORMANCE_TIMEOUT) --no-color \
		--focus '$(CONFORMANCE_FOCUS)' $(if $(CONFORMANCE_SKIP),--skip '$(CONFORMANCE_SKIP)') $(CONFORMANCE_GINKGO) \
		--output-dir $(CONFORMANCE_OUT) --junit-report ginkgo-junit.xml \
		$(BIN)/e2e.test -- --kubeconfig $(CONFORMANCE_DIR)/kubeconfig --provider skeleton \
		--kubectl-path $(BIN)/kubectl --report-dir $(CONFORMANCE_OUT) --e2e-output-dir $(CONFORMANCE_OUT) \
		--disable-log-dump $(CONFORMANCE_FLAGS) >$(CONFORMANCE_OUT)/e2e.log 2>&1; \
	rc=$$?; echo "ginkgo exited $$rc after $$(( $$(date +%s) - start ))s"; \
	report=$(CONFORMANCE_OUT)/junit_01.xml; test -f $$report || report=$(CONFORMANCE_OUT)/ginkgo-junit.xml; \
	test -f $$report || { echo "no JUnit report: see $(CONFORMANCE_OUT)/e2e.log"; tail -20 $(CONFORMANCE_OUT)/e2e.log; exit 1; }; \
	$(BIN)/harness conformance summary --max-specs 5 $$report | tee $(CONFORMANCE_OUT)/summary.txt

# Go native fuzzing: every parser of outside input and the CRI and CSI handlers (package:target;
# each target's seeds and testdata/fuzz corpus also run in plain `go test`). `make fuzz` runs each
# for FUZZTIME; CI runs `make fuzz-smoke`, a few seconds each. A crasher is written to the
# package's testdata/fuzz/<target>/ and fails the run: fix it and keep the file as a seed. A bare
# "context deadline exceeded" with no input written is Go 1.26's coordinator race at the end of
# -fuzztime (go.dev/issue/75804), not a finding: it is reported, and does not fail the run.
FUZZ_TARGETS := \
	cni-fake/plugin:FuzzParseConfig cni-fake/plugin:FuzzParseCNIArgs cni-fake/plugin:FuzzRun \
	cni-fake/ipam:FuzzParseConfig cni-fake/ipam:FuzzLeaseFile \
	cri-fake/network:FuzzCNIResult cri-fake/network:FuzzCachedResult cri-fake/network:FuzzConfFile \
	cri-fake/network:FuzzCapabilityArgs cri-fake/network:FuzzPodCIDRs \
	cri-fake/process/shell:FuzzShellParse cri-fake/process:FuzzShell cri-fake/process:FuzzIPCTools internal/mountinfo:FuzzParse \
	cri-fake/process/agnhost:FuzzReviews cri-fake/process/netapplets:FuzzDNSAnswer cri-fake/process/awk:FuzzAwk \
	cri-fake/images:FuzzParseReference cri-fake/images:FuzzParseCatalog \
	cri-fake/process/seccomp:FuzzSeccompProfile cri-fake/store:FuzzLoad cri-fake/server:FuzzCRI cri-fake/server:FuzzStateDir \
	csi-fake/state:FuzzOpen csi-fake/server:FuzzCSI csi-fake/server:FuzzStateDir \
	harness/fixtures:FuzzParse harness/faults/rules:FuzzParseJSON harness/faults/rules:FuzzGlob \
	harness/scenario:FuzzParse harness/trace/event:FuzzRead harness/replay:FuzzScenario
FUZZTIME ?= 30s
FUZZ_SMOKE_TIME ?= 3s

fuzz: ## run every fuzz target for FUZZTIME (default 30s each); a crasher lands in testdata/fuzz and fails
	@fail=0; out=$$(mktemp); for t in $(FUZZ_TARGETS); do pkg=$${t%%:*}; name=$${t#*:}; \
		$(GO) test -run '^$$' -fuzz "^$$name\$$" -fuzztime $(FUZZTIME) -parallel $${FUZZ_PARALLEL:-2} ./$$pkg/ >$$out 2>&1; rc=$$?; \
		last=$$(grep '^fuzz: elapsed' $$out | tail -n 1); \
		if [ $$rc -eq 0 ]; then echo "ok   $$pkg $$name: $${last#fuzz: }"; \
		elif ! grep -q 'Failing input written' $$out && grep -qx '    context deadline exceeded' $$out && \
			! grep -vE '^(fuzz: .*|--- FAIL: .*|    context deadline exceeded|FAIL|FAIL[[:space:]].*|exit status 1|)$$' $$out | grep -q .; then \
			echo "ok   $$pkg $$name: $${last#fuzz: } (then Go's fuzz coordinator reported its own -fuzztime deadline as a failure, no input failed: go.dev/issue/75804, fixed in Go 1.27)"; \
		else fail=1; echo "FAIL $$pkg $$name"; grep -v '^fuzz: elapsed' $$out | tail -n 30; fi; \
	done; rm -f $$out; exit $$fail

fuzz-smoke: ## every fuzz target for FUZZ_SMOKE_TIME (3s; what CI runs)
	@$(MAKE) --no-print-directory fuzz FUZZTIME=$(FUZZ_SMOKE_TIME)

# The long forms of the crash, load and bound tests `go test` runs briefly: SOAK_CYCLES kill -9
# rounds of cni-fake (8 concurrent ADDs a round), csi-fake and cri-fake (4 concurrent clients,
# restart on the same state); 64 clients × SOAK_LIFECYCLES pod lifecycles against cri-fake and volume lifecycles
# against csi-fake under -race, then goroutines, open fds and heap back to their baseline (go test:
# 64 × 2); a container printing 100 MB to its log; a client holding 1,000 unread event streams; the
# issue's 40 ExecSync answers of 15 MB; and a 70 MB trace line (skipped under -race).
SOAK_CYCLES ?= 300
SOAK_LIFECYCLES ?= 1000

soak: ## kill -9 rounds (SOAK_CYCLES=300), 64 × SOAK_LIFECYCLES=1000 pod and volume lifecycles under -race, a 100 MB container log, 1,000 unread event streams, the ExecSync flood, a 70 MB trace line
	PLUGSIM_CRASH_CYCLES=$(SOAK_CYCLES) $(GO) test -count=1 -timeout 60m -v -run '^TestKill9' ./cni-fake/ ./csi-fake/ ./cri-fake/
	PLUGSIM_LOAD_LIFECYCLES=$(SOAK_LIFECYCLES) $(GO) test -race -count=1 -timeout 300m -v -run '^TestLoad' ./cri-fake/server/ ./csi-fake/server/
	PLUGSIM_LOG_FLOOD_MB=100 $(GO) test -race -count=1 -timeout 60m -v -run '^TestContainerLogFloodStaysBounded$$' ./cri-fake/server/
	PLUGSIM_EVENT_STREAMS=1000 $(GO) test -race -count=1 -timeout 60m -v -run '^TestUnreadEventStreamsStayBounded$$' ./cri-fake/server/
	PLUGSIM_EXEC_FLOOD_CALLS=40 $(GO) test -count=1 -v -run '^TestExecSyncFloodStaysBounded$$' ./cri-fake/server/
	$(GO) test -count=1 -v -run '^TestReadSurvivesAnyLine$$' ./harness/trace/

DEMO_OUT := $(CURDIR)/demo-out

# The harness starts cri-fake (cni-fake → portmap chain) and csi-fake afresh for each scenario, prints
# every boundary crossing under the step that caused it, and writes one SVG (and Mermaid) diagram per
# scenario. As root it runs in a network namespace of its own, so portmap's iptables rules stay there.
demo: deps build $(BIN)/portmap ## the main job: start the fakes and show what crosses each boundary
	@mkdir -p $(DEMO_OUT)
	$(BIN)/harness run --diagram-dir $(DEMO_OUT) --junit $(DEMO_OUT)/junit.xml examples/scenarios/*.yaml
	@echo ""
	@echo "Sequence diagrams, one per scenario (open them in a browser):"
	@ls -1 $(DEMO_OUT)/*.svg | sed 's/^/  /'
	@echo "Mermaid versions beside them (*.mmd); JUnit report: $(DEMO_OUT)/junit.xml"

clean: ## remove bin/ and the test caches
	rm -rf $(BIN)
	$(GO) clean -testcache
