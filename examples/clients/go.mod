module github.com/plugsim/plugsim/examples/clients

go 1.26.8

require (
	github.com/container-storage-interface/spec v1.13.0
	github.com/plugsim/plugsim v0.0.0-00010101000000-000000000000
	google.golang.org/grpc v1.85.0
	k8s.io/cri-api v0.37.2
)

require (
	github.com/cespare/xxhash/v2 v2.3.0 // indirect
	github.com/containernetworking/cni v1.3.1 // indirect
	github.com/containernetworking/plugins v1.10.0 // indirect
	github.com/emicklei/go-restful/v3 v3.13.0 // indirect
	github.com/fxamacker/cbor/v2 v2.9.3 // indirect
	github.com/go-logr/logr v1.4.4 // indirect
	github.com/kubernetes-csi/csi-lib-utils v0.25.0 // indirect
	github.com/moby/profiles/seccomp v0.3.0 // indirect
	github.com/moby/spdystream v0.5.1 // indirect
	github.com/opencontainers/runtime-spec v1.3.0 // indirect
	github.com/pkg/errors v0.9.1 // indirect
	github.com/spf13/pflag v1.0.10 // indirect
	github.com/vishvananda/netlink v1.3.1 // indirect
	github.com/vishvananda/netns v0.0.5 // indirect
	github.com/x448/float16 v0.8.4 // indirect
	go.opentelemetry.io/otel v1.47.0 // indirect
	go.opentelemetry.io/otel/trace v1.47.0 // indirect
	go.yaml.in/yaml/v2 v2.4.4 // indirect
	go.yaml.in/yaml/v3 v3.0.5 // indirect
	golang.org/x/net v0.60.0 // indirect
	golang.org/x/sys v0.49.0 // indirect
	golang.org/x/text v0.42.0 // indirect
	google.golang.org/genproto/googleapis/rpc v0.0.0-20260825221802-da73d73af1c5 // indirect
	google.golang.org/protobuf v1.36.12 // indirect
	gopkg.in/inf.v0 v0.9.1 // indirect
	k8s.io/apimachinery v0.37.2 // indirect
	k8s.io/cri-streaming v0.37.2 // indirect
	k8s.io/klog/v2 v2.140.0 // indirect
	k8s.io/kubelet v0.37.2 // indirect
	k8s.io/streaming v0.37.2 // indirect
	k8s.io/utils v0.0.0-20260707023825-cf1189d6abe3 // indirect
	sigs.k8s.io/json v0.0.0-20250730193827-2d320260d730 // indirect
	sigs.k8s.io/yaml v1.6.0 // indirect
)

// wiring.Start builds cni-fake with `go build` when $PLUGSIM_BIN does not hold it (`make test`
// sets it to bin/): the tool line makes go.sum cover the plugin's dependencies.
tool github.com/plugsim/plugsim/cni-fake

replace github.com/plugsim/plugsim => ../..
