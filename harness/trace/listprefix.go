package trace

import (
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// Listing answers grow with the node: the kubelet relists every second (ListPodSandbox and
// ListContainers of everything), and at 10,000 pods the first answer is 3 MB and the second
// 13 MB. Sizing such an answer exactly walks every element (proto.Size of 10,000 sandboxes:
// 10 ms on a 2-core VM, a quarter of what the upstream fake takes for the whole call) and
// rendering it as JSON costs ten times that, on the call's own time, only for the trace to keep
// its first MaxPayload bytes. So a message whose top level holds a list longer than longList is
// measured element by element only as far as listBudget, and past it the trace keeps a copy
// holding copies of the list's first elements, rendered when the trace is read; the rest is
// counted in Event.Truncated, estimated from a sample of the elements left out. gRPC still sizes
// and encodes the whole answer once to send it.
//
// The prefix is kept in its wire encoding and decoded when the trace is read: as Go messages the
// prefixes of a relist's two answers took about 1 MB of heap each (a container's labels and
// annotations are maps), four times their wire bytes, and cri-fake's ring held 42 of them, a
// quarter of the heap of a node of 30,000 containers (cri-fake/server's BenchmarkLargeNode).

const (
	// longList is the list length from which a message is measured as described above.
	longList = 64
	// listBudget bounds the wire bytes of the elements a kept prefix holds, all its lists
	// together: a quarter of MaxPayload, so the prefix renders to JSON under MaxPayload and a
	// node's whole relist (110 pods of 3 containers, the Kubernetes limit per node: about
	// 140 KB) is kept whole.
	listBudget = MaxPayload / 4
	// listSample is how many of the elements left out are sized to estimate their bytes.
	listSample = 16
)

// measured is a message as the trace will keep it.
type measured struct {
	msg  proto.Message // the message, or (cut) an empty one of its type
	wire []byte        // cut: the wire encoding of the prefix (see message)
	size int64         // about the wire bytes of the whole message (exact unless cut)
	kept int64         // about the wire bytes of msg
	cut  bool          // msg is a prefix of the message
}

// message is the message as kept: for a cut one, its prefix decoded from the wire.
func (m measured) message() proto.Message {
	if m.wire == nil {
		return m.msg
	}
	p := m.msg.ProtoReflect().New().Interface()
	if proto.Unmarshal(m.wire, p) != nil {
		return nil
	}
	return p
}

// measure sizes m for the trace. A message without a top-level list longer than longList is
// sized exactly (proto.Size); one with such lists is sized by its elements up to listBudget and,
// when they hold more, is cut to a prefix whose size is exact and whose remainder is estimated.
// A message whose other fields are larger than MaxPayload (an ExecSync answer does not have long
// lists, but a hostile request may have both) is sized exactly, so the callers' paths for huge
// messages apply.
func measure(m proto.Message) measured {
	if m == nil {
		return measured{}
	}
	pm := m.ProtoReflect()
	if !pm.IsValid() {
		return measured{msg: m}
	}
	var lists []protoreflect.FieldDescriptor
	others := 0
	pm.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		if fd.IsList() && fd.Kind() == protoreflect.MessageKind && v.List().Len() > longList {
			lists = append(lists, fd)
		} else {
			others++
		}
		return true
	})
	if len(lists) == 0 {
		n := int64(proto.Size(m))
		return measured{msg: m, size: n, kept: n}
	}
	var rest int64
	if others > 0 {
		r := pm.New()
		pm.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
			if !isIn(lists, fd) {
				r.Set(fd, v)
			}
			return true
		})
		rest = int64(proto.Size(r.Interface()))
		if rest > MaxPayload {
			n := int64(proto.Size(m))
			return measured{msg: m, size: n, kept: n}
		}
	}
	// How many elements of each list fit its share of the budget, sized one by one.
	share := int64(listBudget / len(lists))
	keep := make([]int, len(lists))
	size, kept := rest, rest
	cut := false
	for i, fd := range lists {
		l := pm.Get(fd).List()
		var sum int64
		k := 0
		for ; k < l.Len(); k++ {
			e := elemSize(fd, l.Get(k))
			if sum+e > share {
				break
			}
			sum += e
		}
		keep[i] = k
		kept += sum
		size += sum
		if k < l.Len() {
			cut = true
			size += estimateRest(fd, l, k)
		}
	}
	if !cut {
		return measured{msg: m, size: size, kept: kept}
	}
	// Encoded here, field by field, rather than as a message holding the prefixes (as the
	// lists' own elements): building that message by reflection and marshalling it sized every
	// kept element twice more (BenchmarkRelistTraced: 2.0 ms then, 1.8 ms now, with the map
	// keys sorted, against 10.5 ms for gRPC to encode the whole answer). The other
	// fields come first and the lists after them, each element as the tag, length and bytes a
	// repeated field is encoded as; a decoder reads fields in any order (protobuf's encoding
	// guide, "Field Order"). The elements were sized just above (elemSize), so their cached
	// sizes stand: nothing mutates a handler's answer while it is being sent.
	//
	// Kept encoded: nothing of the handler's messages stays referenced (a handler may allocate a
	// listing's elements together, as cri-fake's list handlers do, and a pointer into that array
	// would keep all of it), and the bytes are a quarter of the messages' heap.
	wire := make([]byte, 0, kept)
	var err error
	if others > 0 {
		r := pm.New()
		pm.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
			if !isIn(lists, fd) {
				r.Set(fd, v) // at most MaxPayload (above)
			}
			return true
		})
		wire, err = proto.MarshalOptions{Deterministic: true}.MarshalAppend(wire, r.Interface())
	}
	// Deterministic (maps in key order), so that an answer that did not change encodes to the
	// same bytes and shares the last one's (Recorder.sharedPrefixLocked).
	cached := proto.MarshalOptions{UseCachedSize: true, Deterministic: true}
	for i, fd := range lists {
		l := pm.Get(fd).List()
		for k := 0; k < keep[i] && err == nil; k++ {
			e := l.Get(k).Message().Interface()
			wire = protowire.AppendTag(wire, fd.Number(), protowire.BytesType)
			wire = protowire.AppendVarint(wire, uint64(cached.Size(e)))
			wire, err = cached.MarshalAppend(wire, e)
		}
	}
	if err != nil {
		return measured{msg: pm.New().Interface(), size: size, cut: true}
	}
	return measured{msg: pm.New().Interface(), wire: wire, size: size, kept: kept, cut: true}
}

// elemSize is the wire size of one element of a repeated message field: its tag, its length and
// its bytes.
func elemSize(fd protoreflect.FieldDescriptor, v protoreflect.Value) int64 {
	n := proto.Size(v.Message().Interface())
	return int64(protowire.SizeTag(fd.Number()) + protowire.SizeBytes(n))
}

// estimateRest estimates the wire bytes of l's elements from index from on: their count times
// the mean size of listSample of them, spread evenly over them.
func estimateRest(fd protoreflect.FieldDescriptor, l protoreflect.List, from int) int64 {
	left := l.Len() - from
	s := min(listSample, left)
	var sum int64
	for i := range s {
		sum += elemSize(fd, l.Get(from+i*left/s))
	}
	return sum * int64(left) / int64(s)
}

func index(fds []protoreflect.FieldDescriptor, fd protoreflect.FieldDescriptor) int {
	for i, f := range fds {
		if f == fd {
			return i
		}
	}
	return -1
}

func isIn(fds []protoreflect.FieldDescriptor, fd protoreflect.FieldDescriptor) bool {
	return index(fds, fd) >= 0
}
