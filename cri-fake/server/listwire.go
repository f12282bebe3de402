package server

import (
	"unicode/utf8"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// The kubelet relists every second: ListPodSandbox and ListContainers of everything, 3 and 13 MB
// at 30,000 containers (BenchmarkLargeNode). Most of those bytes are labels and annotations,
// string maps, which protobuf-go sizes and encodes through reflection (a reflect.MapIter per map,
// twice: once to size, once to write), the larger part of the call's time in cri-fake. So the two
// listing answers are encoded here with Go's own map iteration, field by field as api.proto
// (k8s.io/cri-api v0.37.2) numbers them; TestListingWire checks that every field of the seven
// messages is written and that what is written decodes to the same message.
//
// Anything this does not know is left to protobuf-go, which then answers as it always did:
// unknown fields, a nil element, a string that is not valid UTF-8 (protobuf-go refuses to
// encode it, and the call fails as it would have).

// The answer is written in chunks of about answerChunk bytes, each a whole number of elements,
// which gRPC frees one by one as it sends them (fakeserver.Config.Encode): a 13 MB answer is
// not held whole until its last byte is sent, nor sized beforehand.
const answerChunk = 128 << 10

// encodeListing encodes a listing answer; false when m is not one or holds what only protobuf-go
// encodes (above).
func encodeListing(m any) ([][]byte, bool) {
	switch r := m.(type) {
	case *runtimeapi.ListContainersResponse:
		if len(r.ProtoReflect().GetUnknown()) > 0 {
			return nil, false
		}
		return encodeElements(r.Containers, (*listWriter).container)
	case *runtimeapi.ListPodSandboxResponse:
		if len(r.ProtoReflect().GetUnknown()) > 0 {
			return nil, false
		}
		return encodeElements(r.Items, (*listWriter).sandbox)
	}
	return nil, false
}

// encodeElements writes a listing's elements as its field 1, each written by write, in chunks
// (answerChunk); false at a nil element or one with unknown fields (left to protobuf-go).
func encodeElements[T proto.Message](elems []T, write func(*listWriter, T)) ([][]byte, bool) {
	w := &listWriter{b: make([]byte, 0, min(answerChunk, 512*len(elems))), ok: true}
	for _, e := range elems {
		// A nil element's ProtoReflect is a message that is not valid.
		if m := e.ProtoReflect(); !m.IsValid() || len(m.GetUnknown()) > 0 {
			return nil, false
		}
		at := w.open()
		write(w, e)
		w.close(at)
		if cap(w.b)-len(w.b) < answerChunk/16 {
			// Room for fewer than the next few elements: the next goes in a new chunk.
			w.chunks = append(w.chunks, w.b)
			w.b = make([]byte, 0, answerChunk)
		}
	}
	if len(w.b) > 0 || len(w.chunks) == 0 {
		w.chunks = append(w.chunks, w.b)
	}
	return w.chunks, w.ok
}

// elemLenBytes is the room left for an element's length: three bytes of varint, up to 2 MiB.
const elemLenBytes = 3

// listWriter writes a listing: its elements as field 1, each as its tag, length and fields, into
// b and the chunks before it. ok turns false at the first thing encodeListing leaves to
// protobuf-go.
type listWriter struct {
	b      []byte
	chunks [][]byte
	ok     bool
}

// open writes an element's tag and leaves room for its length; close writes the length.
func (w *listWriter) open() int {
	w.b = append(w.b, 1<<3|byte(protowire.BytesType), 0, 0, 0)
	return len(w.b)
}

func (w *listWriter) close(at int) {
	n := len(w.b) - at
	if n >= 1<<(7*elemLenBytes) {
		w.ok = false
		return
	}
	k := protowire.SizeVarint(uint64(n))
	protowire.AppendVarint(w.b[at-elemLenBytes:at-elemLenBytes], uint64(n))
	if k < elemLenBytes {
		copy(w.b[at-elemLenBytes+k:], w.b[at:])
		w.b = w.b[:len(w.b)-(elemLenBytes-k)]
	}
}

func (w *listWriter) str(num protowire.Number, s string) {
	if s == "" {
		return
	}
	w.ok = w.ok && utf8.ValidString(s)
	w.b = protowire.AppendString(protowire.AppendTag(w.b, num, protowire.BytesType), s)
}

func (w *listWriter) varint(num protowire.Number, v uint64) {
	if v != 0 {
		w.b = protowire.AppendVarint(protowire.AppendTag(w.b, num, protowire.VarintType), v)
	}
}

// header writes a nested message's tag and length.
func (w *listWriter) header(num protowire.Number, n int) {
	w.b = protowire.AppendVarint(protowire.AppendTag(w.b, num, protowire.BytesType), uint64(n))
}

// strMap writes a map<string, string>: an entry per key, a message of the key (1) and value (2).
func (w *listWriter) strMap(num protowire.Number, m map[string]string) {
	for k, v := range m {
		w.header(num, mapEntrySize(k, v))
		w.str1(1, k)
		w.str1(2, v)
	}
}

// str1 writes a string field even when empty, as a map entry's key and value are.
func (w *listWriter) str1(num protowire.Number, s string) {
	w.ok = w.ok && utf8.ValidString(s)
	w.b = protowire.AppendString(protowire.AppendTag(w.b, num, protowire.BytesType), s)
}

func (w *listWriter) container(c *runtimeapi.Container) {
	w.str(1, c.Id)
	w.str(2, c.PodSandboxId)
	if m := c.Metadata; m != nil {
		n, ok := containerMetadataSize(m)
		w.ok = w.ok && ok
		w.header(3, n)
		w.str(1, m.Name)
		w.varint(2, uint64(m.Attempt))
	}
	if i := c.Image; i != nil {
		n, ok := imageSpecSize(i)
		w.ok = w.ok && ok
		w.header(4, n)
		w.str(1, i.Image)
		w.strMap(2, i.Annotations)
		w.str(18, i.UserSpecifiedImage)
		w.str(19, i.RuntimeHandler)
		w.str(20, i.ImageRef)
	}
	w.str(5, c.ImageRef)
	w.varint(6, uint64(int64(c.State)))
	w.varint(7, uint64(c.CreatedAt))
	w.strMap(8, c.Labels)
	w.strMap(9, c.Annotations)
	w.str(10, c.ImageId)
}

func (w *listWriter) sandbox(p *runtimeapi.PodSandbox) {
	w.str(1, p.Id)
	if m := p.Metadata; m != nil {
		n, ok := sandboxMetadataSize(m)
		w.ok = w.ok && ok
		w.header(2, n)
		w.str(1, m.Name)
		w.str(2, m.Uid)
		w.str(3, m.Namespace)
		w.varint(4, uint64(m.Attempt))
	}
	w.varint(3, uint64(int64(p.State)))
	w.varint(4, uint64(p.CreatedAt))
	w.strMap(5, p.Labels)
	w.strMap(6, p.Annotations)
	w.str(7, p.RuntimeHandler)
}

// wireSize adds up the wire size of a nested message's fields, whose length comes before them;
// ok is false for a message with unknown fields.
type wireSize struct {
	n  int
	ok bool
}

func (w *wireSize) str(num protowire.Number, s string) {
	if s != "" {
		w.n += protowire.SizeTag(num) + protowire.SizeBytes(len(s))
	}
}

func (w *wireSize) varint(num protowire.Number, v uint64) {
	if v != 0 {
		w.n += protowire.SizeTag(num) + protowire.SizeVarint(v)
	}
}

func (w *wireSize) strMap(num protowire.Number, m map[string]string) {
	for k, v := range m {
		w.n += protowire.SizeTag(num) + protowire.SizeBytes(mapEntrySize(k, v))
	}
}

func mapEntrySize(k, v string) int {
	return 1 + protowire.SizeBytes(len(k)) + 1 + protowire.SizeBytes(len(v))
}

func containerMetadataSize(m *runtimeapi.ContainerMetadata) (int, bool) {
	w := wireSize{ok: len(m.ProtoReflect().GetUnknown()) == 0}
	w.str(1, m.Name)
	w.varint(2, uint64(m.Attempt))
	return w.n, w.ok
}

func imageSpecSize(i *runtimeapi.ImageSpec) (int, bool) {
	w := wireSize{ok: len(i.ProtoReflect().GetUnknown()) == 0}
	w.str(1, i.Image)
	w.strMap(2, i.Annotations)
	w.str(18, i.UserSpecifiedImage)
	w.str(19, i.RuntimeHandler)
	w.str(20, i.ImageRef)
	return w.n, w.ok
}

func sandboxMetadataSize(m *runtimeapi.PodSandboxMetadata) (int, bool) {
	w := wireSize{ok: len(m.ProtoReflect().GetUnknown()) == 0}
	w.str(1, m.Name)
	w.str(2, m.Uid)
	w.str(3, m.Namespace)
	w.varint(4, uint64(m.Attempt))
	return w.n, w.ok
}
