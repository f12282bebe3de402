package fakeserver

import (
	"fmt"

	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/protoadapt"
)

// pooledAnswerMax is the largest answer encoded into a buffer of gRPC's pool: its largest tier
// (mem.DefaultBufferPool's, 1 MiB).
const pooledAnswerMax = 1 << 20

// wireCodec is gRPC's protobuf codec (google.golang.org/grpc/encoding/proto, the one a server
// uses unless told otherwise) but for where a large answer is encoded. gRPC's takes every buffer
// above its pooling threshold from its default pool, and past the pool's largest tier that is a
// sync.Pool of buffers of any size, which keeps the last answers' buffers until two collections
// have passed without a call of that size. A node's relist answers 3 and 13 MB every second at
// 30,000 containers (cri-fake/server's BenchmarkLargeNode), so the pool held 16 to 51 MB of
// cri-fake's heap, the collector counted it as live, and the process grew by twice that. Such an
// answer is encoded into a buffer of its own here, garbage once sent; the pooled tiers up to
// 1 MiB are used as gRPC uses them.
//
// encode, when set, encodes the answers it knows instead (Config.Encode), in chunks that gRPC
// lets go of one by one as it sends them (sentChunks).
type wireCodec struct {
	encode func(any) ([][]byte, bool)
}

// sentChunks is the "pool" of an encoded answer's chunks: gRPC frees each chunk once it has
// written it to the connection (its transport's reader of the answer), and Put lets it go, so
// the collector may take it while the rest is still being sent.
type sentChunks struct{}

func (sentChunks) Get(n int) *[]byte {
	b := make([]byte, n)
	return &b
}

func (sentChunks) Put(*[]byte) {}

var _ encoding.CodecV2 = wireCodec{}

func (wireCodec) Name() string { return "proto" }

func (c wireCodec) Marshal(v any) (mem.BufferSlice, error) {
	if c.encode != nil {
		if chunks, ok := c.encode(v); ok {
			out := make(mem.BufferSlice, len(chunks))
			for i := range chunks {
				// A pointer of its own, not into chunks, which would keep every chunk
				// until the last is sent.
				chunk := chunks[i]
				chunks[i] = nil
				out[i] = mem.NewBuffer(&chunk, sentChunks{})
			}
			return out, nil
		}
	}
	m := messageOf(v)
	if m == nil {
		return nil, fmt.Errorf("proto: cannot marshal %T, want a proto.Message", v)
	}
	// Sized once and encoded with that size, as gRPC's codec does: nothing changes a message
	// while it is being sent.
	size := proto.Size(m)
	o := proto.MarshalOptions{UseCachedSize: true}
	switch {
	case mem.IsBelowBufferPoolingThreshold(size):
		b, err := o.Marshal(m)
		if err != nil {
			return nil, err
		}
		return mem.BufferSlice{mem.SliceBuffer(b)}, nil
	case size <= pooledAnswerMax:
		pool := mem.DefaultBufferPool()
		buf := pool.Get(size)
		if _, err := o.MarshalAppend((*buf)[:0], m); err != nil {
			pool.Put(buf)
			return nil, err
		}
		return mem.BufferSlice{mem.NewBuffer(buf, pool)}, nil
	default:
		b, err := o.MarshalAppend(make([]byte, 0, size), m)
		if err != nil {
			return nil, err
		}
		return mem.BufferSlice{mem.SliceBuffer(b)}, nil
	}
}

func (wireCodec) Unmarshal(data mem.BufferSlice, v any) error {
	m := messageOf(v)
	if m == nil {
		return fmt.Errorf("proto: cannot unmarshal into %T, want a proto.Message", v)
	}
	buf := data.MaterializeToBuffer(mem.DefaultBufferPool())
	defer buf.Free()
	return proto.Unmarshal(buf.ReadOnlyData(), m)
}

func messageOf(v any) proto.Message {
	switch v := v.(type) {
	case protoadapt.MessageV1:
		return protoadapt.MessageV2Of(v)
	case protoadapt.MessageV2:
		return v
	}
	return nil
}
