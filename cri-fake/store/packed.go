package store

import (
	"slices"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// PackedConfig is a container's config as the runtime keeps it for the container's life: what
// every listing and status reads (metadata, image, labels, annotations, the resources it was
// created with) as messages, the rest in its wire form, decoded by Unpack when something needs
// the whole config (a start, a status's mounts, waking a dormant process).
//
// Why: protobuf-go's tree of a config takes several times its wire size (a struct per message,
// a map of at least one 8-slot group per label or annotation set, a string per field: 1,456 bytes
// for the 284 of cri-fake/server's BenchmarkLargeNode's config), and a node keeps one per
// container, 30,000 of them there.
//
// The messages and maps a PackedConfig holds, and those of an unpacked config that come from
// them, are shared (equal label and annotation maps among the store's containers: stringMaps):
// read them, never change them.
type PackedConfig struct {
	metadata            *runtimeapi.ContainerMetadata
	image               *runtimeapi.ImageSpec
	labels, annotations map[string]string
	resources           *runtimeapi.LinuxContainerResources
	// rest is the config's wire form without the fields above (but the resources, which stay
	// inside linux); tree is the config itself when protobuf-go could not encode it (a string
	// that is not UTF-8, which only a caller in the same process can hand over).
	rest []byte
	tree *runtimeapi.ContainerConfig
	// shared: labels and annotations are the store's shared maps (stringMaps; under its lock).
	shared bool
}

// The ContainerConfig fields kept apart (api.proto of k8s.io/cri-api v0.37.2).
const (
	configMetadata    protowire.Number = 1
	configImage       protowire.Number = 2
	configLabels      protowire.Number = 9
	configAnnotations protowire.Number = 10
)

// Pack packs a config; nil packs as an empty one. cfg is not changed, and the packed config
// shares its metadata, image, label and annotation maps and resources.
func Pack(cfg *runtimeapi.ContainerConfig) *PackedConfig {
	p := &PackedConfig{metadata: cfg.GetMetadata(), image: cfg.GetImage(), labels: cfg.GetLabels(),
		annotations: cfg.GetAnnotations(), resources: cfg.GetLinux().GetResources()}
	if cfg == nil {
		return p
	}
	rest, ok := packWithout(cfg, configMetadata, configImage, configLabels, configAnnotations)
	if !ok {
		p.tree = cfg
		return p
	}
	p.rest = rest
	return p
}

// packWithout is m's wire form without the top-level fields kept apart, in a slice of its own
// (nil when nothing is left); false when protobuf-go cannot encode m (a string that is not UTF-8)
// or, which its own output never does, the wire form does not parse.
func packWithout(m proto.Message, apart ...protowire.Number) ([]byte, bool) {
	wire, err := proto.Marshal(m)
	if err != nil {
		return nil, false
	}
	rest := wire[:0]
	for b := wire; len(b) > 0; {
		num, _, n := protowire.ConsumeField(b)
		if n < 0 {
			return nil, false
		}
		if !slices.Contains(apart, num) {
			rest = append(rest, b[:n]...) // never ahead of b: it writes over what was read
		}
		b = b[n:]
	}
	if len(rest) == 0 {
		return nil, true
	}
	return append([]byte(nil), rest...), true
}

// Unpack returns the whole config, a new tree each time (but the shared parts: see PackedConfig).
func (p *PackedConfig) Unpack() *runtimeapi.ContainerConfig {
	if p == nil {
		return nil
	}
	if p.tree != nil {
		return p.tree
	}
	cfg := &runtimeapi.ContainerConfig{}
	// rest is protobuf-go's own output, less some whole fields: it decodes.
	_ = proto.Unmarshal(p.rest, cfg)
	cfg.Metadata, cfg.Image, cfg.Labels, cfg.Annotations = p.metadata, p.image, p.labels, p.annotations
	return cfg
}

// GetMetadata is the config's metadata.
func (p *PackedConfig) GetMetadata() *runtimeapi.ContainerMetadata {
	if p == nil {
		return nil
	}
	return p.metadata
}

// GetImage is the config's image.
func (p *PackedConfig) GetImage() *runtimeapi.ImageSpec {
	if p == nil {
		return nil
	}
	return p.image
}

// GetLabels is the config's labels.
func (p *PackedConfig) GetLabels() map[string]string {
	if p == nil {
		return nil
	}
	return p.labels
}

// GetAnnotations is the config's annotations.
func (p *PackedConfig) GetAnnotations() map[string]string {
	if p == nil {
		return nil
	}
	return p.annotations
}

// Resources is the config's linux.resources, the container's resources as created.
func (p *PackedConfig) Resources() *runtimeapi.LinuxContainerResources {
	if p == nil {
		return nil
	}
	return p.resources
}
