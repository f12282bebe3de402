package store

import (
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// PackedSandboxConfig is a sandbox's config as the runtime keeps it for the sandbox's life, the
// way PackedConfig keeps a container's: what listings, statuses and filters read (metadata,
// labels, annotations, the log directory, the namespace options) as messages, the rest in its
// wire form, decoded by Unpack when something needs the whole config (a container's process, the
// CNI DEL, a verbose status, the state directory).
//
// Why: protobuf-go's tree of a pod config took about 1,400 bytes of the heap for each of
// cri-fake/server's BenchmarkLargeNode's 10,000 sandboxes, where the parts kept apart and the
// wire form of the rest take about half.
//
// The messages and maps a PackedSandboxConfig holds, and those of an unpacked config that come
// from them, may be shared (equal annotation and label maps and namespace options among the
// store's sandboxes: stringMaps): read them, never change them.
type PackedSandboxConfig struct {
	metadata            *runtimeapi.PodSandboxMetadata
	labels, annotations map[string]string
	logDirectory        string
	// namespaces is linux.security_context.namespace_options, which stays in rest too.
	namespaces *runtimeapi.NamespaceOption
	// rest is the config's wire form without the fields above (but the namespace options); tree
	// is the config itself when protobuf-go could not encode it (a string that is not UTF-8,
	// which only a caller in the same process can hand over).
	rest []byte
	tree *runtimeapi.PodSandboxConfig
	// shared: labels, annotations and namespaces are the store's shared ones (under its lock).
	shared bool
}

// The PodSandboxConfig fields kept apart (api.proto of k8s.io/cri-api v0.37.2).
const (
	sandboxMetadata     protowire.Number = 1
	sandboxLogDirectory protowire.Number = 3
	sandboxLabels       protowire.Number = 6
	sandboxAnnotations  protowire.Number = 7
)

// PackSandbox packs a sandbox config; nil packs as an empty one. cfg is not changed, and the
// packed config shares its metadata, label and annotation maps and namespace options.
func PackSandbox(cfg *runtimeapi.PodSandboxConfig) *PackedSandboxConfig {
	p := &PackedSandboxConfig{metadata: cfg.GetMetadata(), labels: cfg.GetLabels(), annotations: cfg.GetAnnotations(),
		logDirectory: cfg.GetLogDirectory(), namespaces: cfg.GetLinux().GetSecurityContext().GetNamespaceOptions()}
	if cfg == nil {
		return p
	}
	rest, ok := packWithout(cfg, sandboxMetadata, sandboxLogDirectory, sandboxLabels, sandboxAnnotations)
	if !ok {
		p.tree = cfg
		return p
	}
	p.rest = rest
	return p
}

// Unpack returns the whole config, a new tree each time (but the shared parts: see
// PackedSandboxConfig); nil for a nil PackedSandboxConfig.
func (p *PackedSandboxConfig) Unpack() *runtimeapi.PodSandboxConfig {
	if p == nil {
		return nil
	}
	if p.tree != nil {
		return p.tree
	}
	cfg := &runtimeapi.PodSandboxConfig{}
	// rest is protobuf-go's own output, less some whole fields: it decodes.
	_ = proto.Unmarshal(p.rest, cfg)
	cfg.Metadata, cfg.Labels, cfg.Annotations, cfg.LogDirectory = p.metadata, p.labels, p.annotations, p.logDirectory
	return cfg
}

// GetMetadata is the config's metadata.
func (p *PackedSandboxConfig) GetMetadata() *runtimeapi.PodSandboxMetadata {
	if p == nil {
		return nil
	}
	return p.metadata
}

// GetLabels is the config's labels.
func (p *PackedSandboxConfig) GetLabels() map[string]string {
	if p == nil {
		return nil
	}
	return p.labels
}

// GetAnnotations is the config's annotations.
func (p *PackedSandboxConfig) GetAnnotations() map[string]string {
	if p == nil {
		return nil
	}
	return p.annotations
}

// GetLogDirectory is the config's log directory.
func (p *PackedSandboxConfig) GetLogDirectory() string {
	if p == nil {
		return ""
	}
	return p.logDirectory
}

// NamespaceOptions is the config's linux.security_context.namespace_options (nil when it has none).
func (p *PackedSandboxConfig) NamespaceOptions() *runtimeapi.NamespaceOption {
	if p == nil {
		return nil
	}
	return p.namespaces
}
