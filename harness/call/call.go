// Package call invokes any CRI or CSI method by name over a unix socket, with the request given as
// JSON (or YAML turned into JSON). It needs no generated client: the method and its message types
// are looked up in the protobuf registry that k8s.io/cri-api and the CSI spec package fill when they
// are linked in, so a scenario or a replayed trace can call whatever the endpoint serves, be it
// cri-fake, csi-fake, containerd or another CSI driver.
package call

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"sort"
	"strings"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/plugsim/plugsim/internal/endpoint"
)

// The services of each interface, in the order a bare method name is looked up.
var services = map[string][]protoreflect.FullName{
	"cri": {"runtime.v1.RuntimeService", "runtime.v1.ImageService"},
	"csi": {"csi.v1.Identity", "csi.v1.Controller", "csi.v1.Node", "csi.v1.GroupController", "csi.v1.SnapshotMetadata"},
}

// Referencing the generated packages makes sure their descriptors are registered.
var (
	_ = runtimeapi.File_staging_src_k8s_io_cri_api_pkg_apis_runtime_v1_api_proto
	_ = csi.File_csi_proto
)

// Method is one RPC of a CRI or CSI service.
type Method struct {
	Interface string // "cri" or "csi"
	// FullMethod is the gRPC method path: "/runtime.v1.RuntimeService/RunPodSandbox".
	FullMethod string
	Name       string // "RunPodSandbox"
	Input      protoreflect.MessageType
	Output     protoreflect.MessageType
	// ServerStreaming methods answer with a stream of Output messages.
	ServerStreaming bool
}

// Interfaces lists the interface names Lookup knows.
func Interfaces() []string { return []string{"cri", "csi"} }

// Lookup finds a method of an interface ("cri", "csi") by its name ("RunPodSandbox"), by
// "Service/Method" ("ImageService/ImageStatus", "Node/NodeGetInfo"), or by its full gRPC path.
func Lookup(iface, name string) (*Method, error) {
	iface = strings.ToLower(iface)
	svcs, ok := services[iface]
	if !ok {
		return nil, fmt.Errorf("unknown interface %q: want one of %s", iface, strings.Join(Interfaces(), ", "))
	}
	name = strings.TrimPrefix(name, "/")
	svcHint, method := "", name
	if i := strings.LastIndex(name, "/"); i >= 0 {
		svcHint, method = name[:i], name[i+1:]
	}
	for _, s := range svcs {
		if svcHint != "" && string(s) != svcHint && string(s.Name()) != svcHint {
			continue
		}
		sd, err := serviceDescriptor(s)
		if err != nil {
			return nil, err
		}
		md := sd.Methods().ByName(protoreflect.Name(method))
		if md == nil {
			continue
		}
		in, err := protoregistry.GlobalTypes.FindMessageByName(md.Input().FullName())
		if err != nil {
			return nil, fmt.Errorf("%s: request type %s: %w", md.FullName(), md.Input().FullName(), err)
		}
		out, err := protoregistry.GlobalTypes.FindMessageByName(md.Output().FullName())
		if err != nil {
			return nil, fmt.Errorf("%s: response type %s: %w", md.FullName(), md.Output().FullName(), err)
		}
		return &Method{
			Interface:       iface,
			FullMethod:      "/" + string(s) + "/" + method,
			Name:            method,
			Input:           in,
			Output:          out,
			ServerStreaming: md.IsStreamingServer(),
		}, nil
	}
	return nil, fmt.Errorf("%s has no method %q%s", strings.ToUpper(iface), name, suggest(iface, method))
}

func serviceDescriptor(name protoreflect.FullName) (protoreflect.ServiceDescriptor, error) {
	d, err := protoregistry.GlobalFiles.FindDescriptorByName(name)
	if err != nil {
		return nil, fmt.Errorf("service %s is not registered: %w", name, err)
	}
	sd, ok := d.(protoreflect.ServiceDescriptor)
	if !ok {
		return nil, fmt.Errorf("%s is not a service", name)
	}
	return sd, nil
}

// Methods lists the method names of an interface, sorted.
func Methods(iface string) []string {
	var out []string
	for _, s := range services[strings.ToLower(iface)] {
		sd, err := serviceDescriptor(s)
		if err != nil {
			continue
		}
		for i := 0; i < sd.Methods().Len(); i++ {
			out = append(out, string(sd.Methods().Get(i).Name()))
		}
	}
	sort.Strings(out)
	return out
}

// suggest names methods that differ from the wanted one only in case, or share its prefix, so a
// typo in a scenario gets a useful hint.
func suggest(iface, method string) string {
	var close []string
	for _, m := range Methods(iface) {
		if strings.EqualFold(m, method) || (len(method) >= 4 && strings.HasPrefix(strings.ToLower(m), strings.ToLower(method[:4]))) {
			close = append(close, m)
		}
	}
	if len(close) == 0 || len(close) > 6 {
		return " (see `harness methods " + iface + "`)"
	}
	return " (did you mean " + strings.Join(close, ", ") + "?)"
}

// NewRequest builds the method's request message from JSON (protojson: lowerCamel or proto field
// names, enum names or numbers). Empty input is an empty request.
func (m *Method) NewRequest(js []byte) (proto.Message, error) {
	msg := m.Input.New().Interface()
	if len(strings.TrimSpace(string(js))) == 0 || string(js) == "null" {
		return msg, nil
	}
	if err := protojson.Unmarshal(js, msg); err != nil {
		return nil, fmt.Errorf("request for %s (%s): %w", m.Name, m.Input.Descriptor().FullName(), err)
	}
	return msg, nil
}

// Dial connects to a unix endpoint ("unix:///run/x.sock" or a path). The connection is lazy: an
// endpoint that does not answer shows up as Unavailable on the first call.
func Dial(ep string) (*grpc.ClientConn, error) {
	path, err := endpoint.Parse(ep)
	if err != nil {
		return nil, err
	}
	return grpc.NewClient("passthrough:///"+path,
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", path)
		}),
		// The kubelet raises the CRI message limit to 16 MiB (cri-client's maxMsgSize); do the
		// same so a large ListContainers answer replays as it did for the kubelet.
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(16<<20), grpc.MaxCallSendMsgSize(16<<20)),
	)
}

// Result is what came back from a call.
type Result struct {
	// Response is the answer (nil on error). For a server-streaming method it is the last message.
	Response proto.Message
	// Stream holds every message of a server-streaming answer.
	Stream   []proto.Message
	Err      error
	Duration time.Duration
}

// Invoke calls the method. A server-streaming method is read until the server ends the stream or
// the context is done; a context ending after at least one message is not an error.
func Invoke(ctx context.Context, cc grpc.ClientConnInterface, m *Method, req proto.Message) Result {
	start := time.Now()
	if !m.ServerStreaming {
		resp := m.Output.New().Interface()
		err := cc.Invoke(ctx, m.FullMethod, req, resp)
		r := Result{Err: err, Duration: time.Since(start)}
		if err == nil {
			r.Response = resp
		}
		return r
	}
	desc := &grpc.StreamDesc{StreamName: m.Name, ServerStreams: true}
	st, err := cc.NewStream(ctx, desc, m.FullMethod)
	if err != nil {
		return Result{Err: err, Duration: time.Since(start)}
	}
	if err := st.SendMsg(req); err != nil {
		return Result{Err: err, Duration: time.Since(start)}
	}
	if err := st.CloseSend(); err != nil {
		return Result{Err: err, Duration: time.Since(start)}
	}
	var r Result
	for {
		msg := m.Output.New().Interface()
		if err := st.RecvMsg(msg); err != nil {
			if !errors.Is(err, io.EOF) && !(len(r.Stream) > 0 && ctx.Err() != nil) {
				r.Err = err
			}
			break
		}
		r.Stream = append(r.Stream, msg)
		r.Response = msg
	}
	r.Duration = time.Since(start)
	return r
}

// JSON renders a message as protojson with lowerCamel names and every field, the shape
// expectations and captures address ("podSandboxId", "status.state").
func JSON(m proto.Message) []byte {
	if m == nil {
		return []byte("null")
	}
	b, err := protojson.MarshalOptions{EmitUnpopulated: false}.Marshal(m)
	if err != nil {
		return []byte("null")
	}
	return b
}

// FullJSON renders a message with every field, zero values included, so an expectation on a field
// that holds 0, false or the first enum value finds it.
func FullJSON(m proto.Message) []byte {
	if m == nil {
		return []byte("null")
	}
	b, err := protojson.MarshalOptions{EmitUnpopulated: true}.Marshal(m)
	if err != nil {
		return []byte("null")
	}
	return b
}
