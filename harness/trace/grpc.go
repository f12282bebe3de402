package trace

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path"
	"strconv"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// Redacted replaces the value of every secret field in a rendered message.
const Redacted = "***stripped***"

// Boundary names the two sides of a gRPC boundary for the events an interceptor records.
type Boundary struct {
	Interface string // CRI, CSI, REG
	Caller    string // "kubelet"
	Callee    string // "cri-fake"
}

// UnaryServerInterceptor records every unary call served. Requests and responses are rendered as
// protojson, lazily, with secrets redacted (see Redact).
func (r *Recorder) UnaryServerInterceptor(b Boundary) grpc.UnaryServerInterceptor {
	return r.UnaryServerInterceptorWith(b, nil)
}

// Injector decides, before a call's handler runs, whether to inject a fault into it (package
// faults' Set is one). Inject returns the name of the fault it applied ("" for none) and the
// error to answer with instead of calling the handler (nil: call it, after whatever delay the
// fault asked for).
type Injector interface {
	Inject(ctx context.Context, fullMethod string, req any) (fault string, err error)
}

// FaultAttr is the Attrs key that names the fault injected into a call (the fault rule's ID).
const FaultAttr = "fault"

// FaultSeedAttr is the Attrs key, beside FaultAttr, of the seed of the rules that injected the
// fault, when the Injector has one (package faults' Set: its Seed method). With that seed
// (cri-fake's and csi-fake's --fault-seed) and the same calls, probabilistic rules hit the same
// calls again.
const FaultSeedAttr = "faultSeed"

// seeded is an Injector whose decisions follow from a seed.
type seeded interface{ Seed() uint64 }

// UnaryServerInterceptorWith is UnaryServerInterceptor with in, when not nil, asked before each
// handler runs, so the trace shows the fault it injected: the code it answered with and, in
// Attrs[FaultAttr], the rule (cri-fake and csi-fake pass their fault rules). Running it from here
// instead of chaining two interceptors with grpc.ChainUnaryInterceptor saves the closure gRPC's
// chain allocates on every call.
func (r *Recorder) UnaryServerInterceptorWith(b Boundary, in Injector) grpc.UnaryServerInterceptor {
	bp := &b
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		start := time.Now()
		var resp any
		var err error
		var fault string
		if in != nil {
			fault, err = in.Inject(ctx, info.FullMethod, req)
		}
		if err == nil {
			resp, err = handler(ctx, req)
		}
		end := time.Now()
		code := status.Code(err)
		if code == codes.Canceled && cutByDeadline(ctx, start, end) {
			code, err = codes.DeadlineExceeded, errDeadline
		}
		c := call{
			b: bp, caller: callerOf(ctx), fullMethod: info.FullMethod,
			start: start.UnixNano(), dur: int64(end.Sub(start)),
			code: code, err: err, req: req, resp: resp,
		}
		if fault != "" {
			// Rare (a rule hit): the event is built now, with its attribute, rather than making
			// every recorded call larger by a field that is almost always empty.
			ev := c.event()
			ev.Attrs = map[string]string{FaultAttr: fault}
			if sd, ok := in.(seeded); ok {
				ev.Attrs[FaultSeedAttr] = strconv.FormatUint(sd.Seed(), 10)
			}
			r.Record(ev)
		} else {
			r.recordCall(c)
		}
		return resp, err
	}
}

// errDeadline is the status of a call cut by its deadline, worded as grpc-go's own server words it
// when its deadline timer fires first.
var errDeadline = status.Error(codes.DeadlineExceeded, context.DeadlineExceeded.Error())

// maxDeadlineSlack bounds how early before the server's deadline a cancellation still counts as the
// deadline's (see deadlineSlack).
const maxDeadlineSlack = 250 * time.Millisecond

// cutByDeadline reports whether a call that ended Canceled was in fact cut by the caller's deadline,
// so that the trace says DeadlineExceeded, as the caller saw it.
//
// The server cannot tell from the wire: grpc-go's server derives the call's context from the
// grpc-timeout header with context.WithTimeout when it parses the headers (internal/transport/
// http2_server.go, operateHeaders), so its deadline is later than the client's by the time the
// headers took to arrive; the client, when its deadline expires, resets the stream with
// RST_STREAM(CANCEL), the same frame a cancellation sends (clientStream.finish). When that frame is
// read before the server's own deadline timer fires, grpc-go cancels the context and ctx.Err() is
// Canceled: in most calls (8 of 10 with a 200 ms timeout, 30 of 40 with 500 ms, on two busy
// cores). So a call whose context is done and whose deadline is within the slack of the moment it
// ended (or already past) counts as cut by the deadline; a call canceled earlier (or one without
// a deadline) stays Canceled.
func cutByDeadline(ctx context.Context, start, end time.Time) bool {
	dl, ok := ctx.Deadline()
	if !ok || ctx.Err() == nil {
		return false
	}
	return dl.Sub(end) <= deadlineSlack(start, dl)
}

// deadlineSlack is how far the server's deadline may lie after the client's: half the time the
// call had (a cancellation in the first half of a call's time is a cancellation), at most
// maxDeadlineSlack. The lag is the header's transit. Measured against cri-fake under go test
// -race on two cores at a load average above 30, the time left to the server's deadline when a
// cut call's handler returned was up to 55 ms for the first call of the process and at most 2 µs
// for the calls after it. Many calls started at once on such a machine can have their headers
// parsed later than that; a deadline-cut call among them may then still be traced Canceled.
func deadlineSlack(start, deadline time.Time) time.Duration {
	return min(deadline.Sub(start)/2, maxDeadlineSlack)
}

// call is a served unary call as the interceptor saw it (see slot).
type call struct {
	b          *Boundary
	caller     string // the client's own name (CallerMetadata), or "" for the boundary's
	fullMethod string
	seq        uint64
	start, dur int64 // unix ns, ns
	code       codes.Code
	err        error
	req, resp  any
}

// measure sizes the call's messages for the trace (see measure): its request, and its response
// when it succeeded.
func (c *call) measure() (req, resp measured) {
	if m, ok := c.req.(proto.Message); ok {
		req = measure(m)
	}
	if m, ok := c.resp.(proto.Message); ok && c.err == nil {
		resp = measure(m)
	}
	return req, resp
}

// size is about how many bytes the call's event will hold with its messages whole: their wire
// sizes (their JSON is of the same order; eventLocked corrects it once rendered) and the names.
func (c *call) size(req, resp measured) int64 {
	n := int64(len(c.fullMethod)+len(c.caller)+64) + req.size + resp.size
	if c.err != nil {
		n += int64(len(c.err.Error()))
	}
	return n
}

// hugeMessage is the wire size past which a message is not rendered at all: its JSON (protojson,
// then compacted) would cost seconds and several times its size in memory only to be cut to
// MaxPayload. Its event says what it was and how big instead.
const hugeMessage = 4 * MaxPayload

// bounded is the call's event with payloads bounded by MaxPayload: a message cut to a prefix of
// its long lists (see measure) is kept as that prefix and rendered when read; another message
// past MaxPayload is rendered now and cut, or, past hugeMessage, replaced by a note of its type
// and size without being rendered. pending is about the bytes the prefixes and the other
// messages kept unrendered will render to, which Size does not count yet.
func (c *call) bounded(req, resp measured) (ev Event, pending int64) {
	ev = c.event()
	var cut int64
	part := func(m measured) func() json.RawMessage {
		switch {
		case m.msg == nil:
			return func() json.RawMessage { return nil }
		case m.cut || m.size <= MaxPayload:
			cut += m.size - m.kept
			pending += m.kept
			return func() json.RawMessage { return RenderProto(m.message()) }
		case m.size <= hugeMessage:
			e := Event{Response: RenderProto(m.msg)}
			e.Truncate(MaxPayload)
			cut += e.Truncated
			return func() json.RawMessage { return e.Response }
		default:
			cut += m.size
			b, _ := json.Marshal(fmt.Sprintf("%s of %d bytes, not kept", m.msg.ProtoReflect().Descriptor().FullName(), m.size))
			return func() json.RawMessage { return b }
		}
	}
	renderReq, renderResp := part(req), part(resp)
	ev.SetRenderer(func(e *Event) { e.Request, e.Response = renderReq(), renderResp() })
	ev.Truncated += cut
	return ev, pending
}

// event turns the call into its Event, to be rendered lazily.
func (c *call) event() Event {
	b := *c.b
	if c.caller != "" {
		b.Caller = c.caller
	}
	ev := callEvent(b, c.fullMethod, time.Unix(0, c.start), c.req, c.resp, c.err)
	ev.Seq, ev.DurationNS = c.seq, c.dur
	return ev
}

// StreamServerInterceptor records every streaming call when it ends (GetContainerEvents, the
// Stream* list calls). The request is the first message the client sent.
func (r *Recorder) StreamServerInterceptor(b Boundary) grpc.StreamServerInterceptor {
	return func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
		start := time.Now()
		rs := &recordingStream{ServerStream: ss}
		err := handler(srv, rs)
		if status.Code(err) == codes.Canceled && cutByDeadline(ss.Context(), start, time.Now()) {
			err = errDeadline
		}
		ev := callEvent(withCaller(ss.Context(), b), info.FullMethod, start, rs.first, nil, err)
		if ev.Attrs == nil {
			ev.Attrs = map[string]string{}
		}
		ev.Attrs["stream"], ev.Attrs["sent"] = "true", strconv.Itoa(rs.sent)
		r.Record(ev)
		return err
	}
}

// CallerMetadata is the gRPC metadata key a client may set to name itself in the trace
// ("external-provisioner", "kubelet"): one socket serves several callers (the CSI sidecars and the
// kubelet share a driver's Identity service). The harness sets it for the component it plays, in
// its own process; real clients do not, and are named from the socket's peer (PeerListener);
// without either the Boundary's caller is recorded.
const CallerMetadata = "plugsim-caller"

func withCaller(ctx context.Context, b Boundary) Boundary {
	if c := callerOf(ctx); c != "" {
		b.Caller = c
	}
	return b
}

// callerOf names the client: the name it gave itself in CallerMetadata, else the process at the
// other end of the socket (PeerListener), else "" (the Boundary's caller).
func callerOf(ctx context.Context) string {
	// ValueFromIncomingContext, unlike FromIncomingContext, does not copy the whole metadata map
	// on every call.
	if v := metadata.ValueFromIncomingContext(ctx, CallerMetadata); len(v) > 0 {
		return v[0]
	}
	return peerCaller(ctx)
}

type recordingStream struct {
	grpc.ServerStream
	first any
	sent  int
}

func (s *recordingStream) RecvMsg(m any) error {
	err := s.ServerStream.RecvMsg(m)
	if err == nil && s.first == nil {
		s.first = m
	}
	return err
}

func (s *recordingStream) SendMsg(m any) error {
	s.sent++
	return s.ServerStream.SendMsg(m)
}

func callEvent(b Boundary, fullMethod string, start time.Time, req, resp any, err error) Event {
	ev := Event{
		Time:       start,
		Interface:  b.Interface,
		Caller:     b.Caller,
		Callee:     b.Callee,
		Service:    path.Dir(fullMethod)[1:],
		Method:     path.Base(fullMethod),
		Code:       status.Code(err).String(),
		DurationNS: int64(time.Since(start)),
	}
	if err != nil {
		ev.Error = status.Convert(err).Message()
		// A fault rule's error names the rule (faults.InjectedError), whichever interceptor
		// returned it: a stream's, or one chained after call logging.
		var inj interface{ InjectedFault() string }
		if errors.As(err, &inj) {
			ev.Attrs = map[string]string{FaultAttr: inj.InjectedFault()}
		}
	}
	ev.SetRenderer(func(e *Event) {
		e.Request = RenderProto(req)
		if err == nil {
			e.Response = RenderProto(resp)
		}
	})
	return ev
}

// RenderProto renders a protobuf message as compact protojson with secrets redacted; anything else
// renders as nil.
func RenderProto(v any) json.RawMessage {
	m, ok := v.(proto.Message)
	if !ok || m == nil {
		return nil
	}
	b, err := protojson.MarshalOptions{UseProtoNames: false, EmitUnpopulated: false}.Marshal(Redact(m))
	if err != nil {
		return nil
	}
	// protojson output is not stable in its white space; compact it so traces diff cleanly (in
	// one pass: it is valid JSON already).
	var out bytes.Buffer
	out.Grow(len(b))
	if json.Compact(&out, b) != nil {
		return nil
	}
	return out.Bytes()
}

// secretNames are the CRI fields that carry credentials (runtime.v1 AuthConfig).
var secretNames = map[protoreflect.Name]bool{
	"password":       true,
	"auth":           true,
	"identity_token": true,
	"registry_token": true,
}

// Redact returns m, or a copy of m in which every secret is replaced: CSI fields marked with the
// csi_secret option (the rule csi-lib-utils' protosanitizer applies) and the credential fields of
// CRI's AuthConfig. Messages without secrets are returned as they are, without a copy.
func Redact(m proto.Message) proto.Message {
	if !hasSecret(m.ProtoReflect()) {
		return m
	}
	c := proto.Clone(m)
	redact(c.ProtoReflect())
	return c
}

func isSecret(fd protoreflect.FieldDescriptor) bool {
	if fd.Kind() == protoreflect.StringKind && secretNames[fd.Name()] && fd.ContainingMessage().Name() == "AuthConfig" {
		return true
	}
	opts := fd.Options()
	if opts == nil {
		return false
	}
	s, ok := proto.GetExtension(opts, csi.E_CsiSecret).(bool)
	return ok && s
}

func hasSecret(m protoreflect.Message) bool {
	found := false
	m.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		switch {
		case isSecret(fd):
			found = true
		case fd.Kind() == protoreflect.MessageKind && fd.IsList():
			l := v.List()
			for i := 0; i < l.Len() && !found; i++ {
				found = hasSecret(l.Get(i).Message())
			}
		case fd.Kind() == protoreflect.MessageKind && fd.IsMap():
			if fd.MapValue().Kind() == protoreflect.MessageKind {
				v.Map().Range(func(_ protoreflect.MapKey, mv protoreflect.Value) bool {
					found = hasSecret(mv.Message())
					return !found
				})
			}
		case fd.Kind() == protoreflect.MessageKind:
			found = hasSecret(v.Message())
		}
		return !found
	})
	return found
}

func redact(m protoreflect.Message) {
	m.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		switch {
		case isSecret(fd) && fd.IsMap():
			mp := m.Mutable(fd).Map()
			mp.Range(func(k protoreflect.MapKey, _ protoreflect.Value) bool {
				mp.Set(k, protoreflect.ValueOfString(Redacted))
				return true
			})
		case isSecret(fd) && fd.Kind() == protoreflect.StringKind && !fd.IsList():
			m.Set(fd, protoreflect.ValueOfString(Redacted))
		case isSecret(fd):
			m.Clear(fd)
		case fd.Kind() == protoreflect.MessageKind && fd.IsList():
			l := v.List()
			for i := 0; i < l.Len(); i++ {
				redact(l.Get(i).Message())
			}
		case fd.Kind() == protoreflect.MessageKind && fd.IsMap():
			if fd.MapValue().Kind() == protoreflect.MessageKind {
				v.Map().Range(func(_ protoreflect.MapKey, mv protoreflect.Value) bool {
					redact(mv.Message())
					return true
				})
			}
		case fd.Kind() == protoreflect.MessageKind:
			redact(v.Message())
		}
		return true
	})
}
