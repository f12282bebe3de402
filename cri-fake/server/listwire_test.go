package server

import (
	"bytes"
	"slices"
	"strconv"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// encodeListing writes every field of the seven messages it encodes (a field added to api.proto
// fails this until it is written too), and what it writes decodes to the message it was given:
// full, empty, negative, non-ASCII, and one field at a time.
func TestListingWire(t *testing.T) {
	handled := map[protoreflect.FullName][]protoreflect.FieldNumber{
		"runtime.v1.ListContainersResponse": {1},
		"runtime.v1.Container":              {1, 2, 3, 4, 5, 6, 7, 8, 9, 10},
		"runtime.v1.ContainerMetadata":      {1, 2},
		"runtime.v1.ImageSpec":              {1, 2, 18, 19, 20},
		"runtime.v1.ListPodSandboxResponse": {1},
		"runtime.v1.PodSandbox":             {1, 2, 3, 4, 5, 6, 7},
		"runtime.v1.PodSandboxMetadata":     {1, 2, 3, 4},
	}
	for _, m := range []proto.Message{&runtimeapi.ListContainersResponse{}, &runtimeapi.Container{}, &runtimeapi.ContainerMetadata{},
		&runtimeapi.ImageSpec{}, &runtimeapi.ListPodSandboxResponse{}, &runtimeapi.PodSandbox{}, &runtimeapi.PodSandboxMetadata{}} {
		d := m.ProtoReflect().Descriptor()
		var got []protoreflect.FieldNumber
		for i := range d.Fields().Len() {
			got = append(got, d.Fields().Get(i).Number())
		}
		if !slices.Equal(got, handled[d.FullName()]) {
			t.Errorf("%s has fields %v; listwire.go writes %v", d.FullName(), got, handled[d.FullName()])
		}
	}

	full := &runtimeapi.Container{
		Id: strings.Repeat("c", 64), PodSandboxId: strings.Repeat("p", 64),
		Metadata: &runtimeapi.ContainerMetadata{Name: "app", Attempt: 3},
		Image: &runtimeapi.ImageSpec{Image: "registry.k8s.io/pause:3.10", Annotations: map[string]string{"a": "b", "": ""},
			UserSpecifiedImage: "pause", RuntimeHandler: "runc", ImageRef: "sha256:ab"},
		ImageRef: "registry.k8s.io/pause@sha256:ab", State: runtimeapi.ContainerState_CONTAINER_EXITED, CreatedAt: 1 << 60,
		Labels:      map[string]string{"io.kubernetes.pod.uid": "u-1", "ключ": "значение", "long": strings.Repeat("x", 300)},
		Annotations: map[string]string{"io.kubernetes.container.hash": "3d1a5f7c", "empty": ""},
		ImageId:     "sha256:ab",
	}
	sandbox := &runtimeapi.PodSandbox{
		Id: strings.Repeat("s", 64), Metadata: &runtimeapi.PodSandboxMetadata{Name: "pod", Uid: "u-1", Namespace: "default", Attempt: 1},
		State: runtimeapi.PodSandboxState_SANDBOX_NOTREADY, CreatedAt: -5, Labels: map[string]string{"k": "v"},
		Annotations: map[string]string{"x": "y"}, RuntimeHandler: "runc",
	}
	containers := []*runtimeapi.Container{full, {}, {Metadata: &runtimeapi.ContainerMetadata{}, Image: &runtimeapi.ImageSpec{}},
		{State: runtimeapi.ContainerState(-1), CreatedAt: -1},
		// Lengths of one, two and three bytes of varint: the room left for them is three.
		{Id: "c"}, {Labels: map[string]string{"big": strings.Repeat("b", 20<<10)}}}
	sandboxes := []*runtimeapi.PodSandbox{sandbox, {}, {Metadata: &runtimeapi.PodSandboxMetadata{}, State: runtimeapi.PodSandboxState(-2)}}
	// One field at a time, so that a field written under the wrong number cannot pass by
	// swapping with another of its kind.
	each := func(m proto.Message, add func(proto.Message)) {
		r := m.ProtoReflect()
		r.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
			one := r.New()
			one.Set(fd, v)
			add(one.Interface())
			return true
		})
	}
	each(full, func(m proto.Message) { containers = append(containers, m.(*runtimeapi.Container)) })
	each(full.Image, func(m proto.Message) {
		containers = append(containers, &runtimeapi.Container{Image: m.(*runtimeapi.ImageSpec)})
	})
	each(full.Metadata, func(m proto.Message) {
		containers = append(containers, &runtimeapi.Container{Metadata: m.(*runtimeapi.ContainerMetadata)})
	})
	each(sandbox, func(m proto.Message) { sandboxes = append(sandboxes, m.(*runtimeapi.PodSandbox)) })
	each(sandbox.Metadata, func(m proto.Message) {
		sandboxes = append(sandboxes, &runtimeapi.PodSandbox{Metadata: m.(*runtimeapi.PodSandboxMetadata)})
	})
	// A listing of many chunks, one element larger than a chunk among them.
	var many []*runtimeapi.Container
	for i := range 3000 {
		many = append(many, containers[i%len(containers)])
	}
	many[1500] = &runtimeapi.Container{Id: "huge", Labels: map[string]string{"huge": strings.Repeat("h", 2*answerChunk)}}
	for _, c := range []struct {
		in   proto.Message
		back proto.Message
	}{
		{&runtimeapi.ListContainersResponse{Containers: many}, &runtimeapi.ListContainersResponse{}},
		{&runtimeapi.ListContainersResponse{Containers: containers}, &runtimeapi.ListContainersResponse{}},
		{&runtimeapi.ListPodSandboxResponse{Items: sandboxes}, &runtimeapi.ListPodSandboxResponse{}},
		{&runtimeapi.ListContainersResponse{}, &runtimeapi.ListContainersResponse{}},
	} {
		chunks, ok := encodeListing(c.in)
		b := bytes.Join(chunks, nil)
		if !ok {
			t.Fatalf("%T not encoded", c.in)
		}
		if len(b) != proto.Size(c.in) {
			t.Errorf("%T: %d bytes written, protobuf-go's %d", c.in, len(b), proto.Size(c.in))
		}
		if err := proto.Unmarshal(b, c.back); err != nil || !proto.Equal(c.back, c.in) {
			t.Fatalf("%T decodes (%v) to\n%v\nnot\n%v", c.in, err, c.back, c.in)
		}
		// Each chunk holds whole elements (gRPC sends and frees them one by one): it decodes
		// on its own, and the chunks' elements are the listing's.
		n := 0
		for i, chunk := range chunks {
			part := c.back.ProtoReflect().New().Interface()
			if err := proto.Unmarshal(chunk, part); err != nil {
				t.Fatalf("%T: chunk %d of %d does not decode on its own: %v", c.in, i, len(chunks), err)
			}
			n += part.ProtoReflect().Get(part.ProtoReflect().Descriptor().Fields().ByNumber(1)).List().Len()
		}
		if all := c.in.ProtoReflect().Get(c.in.ProtoReflect().Descriptor().Fields().ByNumber(1)).List().Len(); n != all {
			t.Fatalf("%T: the chunks hold %d elements, want %d", c.in, n, all)
		}
		if r, ok := c.in.(*runtimeapi.ListContainersResponse); ok && len(r.Containers) == len(many) && len(chunks) < 10 {
			t.Fatalf("%d elements, %d bytes in %d chunks: want them in chunks of about %d bytes", len(many), len(b), len(chunks), answerChunk)
		}
	}
}

// What encodeListing leaves to protobuf-go: another message, a nil element, unknown fields at
// any depth, a string that is not UTF-8 (which protobuf-go refuses to encode).
func TestListingWireLeavesTheRest(t *testing.T) {
	unknown := func(m proto.Message) proto.Message {
		m.ProtoReflect().SetUnknown(protoreflect.RawFields{0x98, 0x06, 0x01}) // field 99, varint 1
		return m
	}
	for name, m := range map[string]any{
		"another message": &runtimeapi.ListImagesResponse{},
		"not a message":   "x",
		"nil container":   &runtimeapi.ListContainersResponse{Containers: []*runtimeapi.Container{nil}},
		"nil sandbox":     &runtimeapi.ListPodSandboxResponse{Items: []*runtimeapi.PodSandbox{{}, nil}},
		"unknown, top":    unknown(&runtimeapi.ListPodSandboxResponse{}),
		"unknown, item":   &runtimeapi.ListContainersResponse{Containers: []*runtimeapi.Container{unknown(&runtimeapi.Container{}).(*runtimeapi.Container)}},
		"unknown, image": &runtimeapi.ListContainersResponse{Containers: []*runtimeapi.Container{{
			Image: unknown(&runtimeapi.ImageSpec{}).(*runtimeapi.ImageSpec)}}},
		"unknown, metadata": &runtimeapi.ListPodSandboxResponse{Items: []*runtimeapi.PodSandbox{{
			Metadata: unknown(&runtimeapi.PodSandboxMetadata{}).(*runtimeapi.PodSandboxMetadata)}}},
		"an element over 2 MiB": &runtimeapi.ListContainersResponse{Containers: []*runtimeapi.Container{{
			Annotations: map[string]string{"huge": strings.Repeat("h", 2<<20)}}}},
		"bad UTF-8 id":    &runtimeapi.ListContainersResponse{Containers: []*runtimeapi.Container{{Id: "\xff"}}},
		"bad UTF-8 label": &runtimeapi.ListPodSandboxResponse{Items: []*runtimeapi.PodSandbox{{Labels: map[string]string{"k": "\xc3"}}}},
		"bad UTF-8 key":   &runtimeapi.ListContainersResponse{Containers: []*runtimeapi.Container{{Image: &runtimeapi.ImageSpec{Annotations: map[string]string{"\xc3": ""}}}}},
	} {
		if _, ok := encodeListing(m); ok {
			t.Errorf("%s: encoded", name)
		}
	}
}

// BenchmarkListingWire encodes a relist answer of 30,000 containers shaped as BenchmarkLargeNode's
// (and the kubelet's) with encodeListing and with protobuf-go, as gRPC's codec calls it (size,
// then encode).
func BenchmarkListingWire(b *testing.B) {
	const n = 30_000
	r := &runtimeapi.ListContainersResponse{}
	for i := range n {
		uid := "uid-" + strconv.Itoa(i/3)
		r.Containers = append(r.Containers, &runtimeapi.Container{
			Id: strings.Repeat("c", 60) + strconv.Itoa(1000+i%1000), PodSandboxId: strings.Repeat("p", 64),
			Metadata: &runtimeapi.ContainerMetadata{Name: "app" + strconv.Itoa(i%3)},
			Image:    &runtimeapi.ImageSpec{Image: "registry.k8s.io/e2e-test-images/busybox:1.29-2"},
			ImageRef: "registry.k8s.io/e2e-test-images/busybox@sha256:" + strings.Repeat("d", 64), ImageId: "sha256:" + strings.Repeat("d", 64),
			State: runtimeapi.ContainerState_CONTAINER_RUNNING, CreatedAt: 1 << 60,
			Labels:      map[string]string{"io.kubernetes.container.name": "app", "io.kubernetes.pod.uid": uid, "io.kubernetes.pod.name": "pod-" + uid, "io.kubernetes.pod.namespace": "default"},
			Annotations: map[string]string{"io.kubernetes.container.hash": "3d1a5f7c", "io.kubernetes.container.restartCount": "0"},
		})
	}
	b.Run("listwire", func(b *testing.B) {
		for b.Loop() {
			encodeListing(r)
		}
	})
	b.Run("protobuf-go", func(b *testing.B) {
		for b.Loop() {
			buf := make([]byte, 0, proto.Size(r))
			proto.MarshalOptions{UseCachedSize: true}.MarshalAppend(buf, r)
		}
	})
}
