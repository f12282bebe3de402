package trace

import (
	"context"
	"encoding/json"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// sandboxes is a relist answer of n sandboxes shaped as the kubelet's.
func sandboxes(n int) *runtimeapi.ListPodSandboxResponse {
	r := &runtimeapi.ListPodSandboxResponse{}
	for i := range n {
		name, uid := "pod-"+strconv.Itoa(i), "uid-"+strconv.Itoa(i)
		r.Items = append(r.Items, &runtimeapi.PodSandbox{
			Id:       strings.Repeat("ab", 32),
			Metadata: &runtimeapi.PodSandboxMetadata{Name: name, Namespace: "default", Uid: uid},
			State:    runtimeapi.PodSandboxState_SANDBOX_READY,
			Labels:   map[string]string{"io.kubernetes.pod.name": name, "io.kubernetes.pod.namespace": "default", "io.kubernetes.pod.uid": uid},
		})
	}
	return r
}

// serve runs one call answering resp through r's interceptor and returns what the client got.
func serve(t testing.TB, r *Recorder, method string, req, resp proto.Message) any {
	t.Helper()
	icpt := r.UnaryServerInterceptor(Boundary{Interface: CRI, Caller: "kubelet", Callee: "cri-fake"})
	got, err := icpt(context.Background(), req, &grpc.UnaryServerInfo{FullMethod: method},
		func(context.Context, any) (any, error) { return resp, nil })
	if err != nil {
		t.Fatal(err)
	}
	return got
}

// A relist of 10,000 sandboxes is answered whole, and the trace keeps its first sandboxes as
// valid JSON with the rest counted in Truncated (estimated within a few percent, the sandboxes
// being alike), the ring counting only what it keeps.
func TestLongListingKeepsAPrefix(t *testing.T) {
	r, err := New(Options{})
	if err != nil {
		t.Fatal(err)
	}
	resp := sandboxes(10_000)
	whole := proto.Size(resp)
	got := serve(t, r, "/runtime.v1.RuntimeService/ListPodSandbox", &runtimeapi.ListPodSandboxRequest{}, resp)
	if n := len(got.(*runtimeapi.ListPodSandboxResponse).Items); n != 10_000 {
		t.Fatalf("the client got %d sandboxes", n)
	}
	if r.Bytes() > 2*listBudget {
		t.Fatalf("the ring counts %d bytes for one cut listing (budget %d)", r.Bytes(), listBudget)
	}
	ev := r.Events()[0]
	var kept runtimeapi.ListPodSandboxResponse
	if err := protoUnmarshalJSON(ev.Response, &kept); err != nil {
		t.Fatalf("the kept prefix is not a ListPodSandboxResponse: %v (%.80s)", err, ev.Response)
	}
	if len(kept.Items) == 0 || len(kept.Items) >= 10_000 || kept.Items[0].Metadata.Name != "pod-0" {
		t.Fatalf("kept %d sandboxes, the first %v", len(kept.Items), kept.Items[0].GetMetadata())
	}
	keptWire := proto.Size(&kept)
	if keptWire > listBudget {
		t.Fatalf("the prefix is %d wire bytes, budget %d", keptWire, listBudget)
	}
	if want := int64(whole - keptWire); ev.Truncated < want*95/100 || ev.Truncated > want*105/100 {
		t.Fatalf("truncated %d, the bytes left out are %d", ev.Truncated, want)
	}
	if len(ev.Response) > MaxPayload {
		t.Fatalf("the rendered prefix is %d bytes", len(ev.Response))
	}
}

// A listing within the budget is kept whole, as any other message.
func TestShortListingIsKeptWhole(t *testing.T) {
	r, err := New(Options{})
	if err != nil {
		t.Fatal(err)
	}
	serve(t, r, "/runtime.v1.RuntimeService/ListPodSandbox", &runtimeapi.ListPodSandboxRequest{}, sandboxes(300))
	ev := r.Events()[0]
	var kept runtimeapi.ListPodSandboxResponse
	if err := protoUnmarshalJSON(ev.Response, &kept); err != nil || len(kept.Items) != 300 || ev.Truncated != 0 {
		t.Fatalf("kept %d of 300 sandboxes (%v), truncated %d", len(kept.Items), err, ev.Truncated)
	}
}

// A prefix is redacted as the whole message is: a CreateVolume request with a long list of
// capabilities keeps its secrets field, stripped.
func TestCutRequestIsRedacted(t *testing.T) {
	r, err := New(Options{})
	if err != nil {
		t.Fatal(err)
	}
	req := &csi.CreateVolumeRequest{Name: "v", Secrets: map[string]string{"password": "hunter2"}}
	for range 20_000 {
		req.VolumeCapabilities = append(req.VolumeCapabilities, &csi.VolumeCapability{
			AccessType: &csi.VolumeCapability_Mount{Mount: &csi.VolumeCapability_MountVolume{FsType: "ext4", MountFlags: []string{"noatime", "nodiratime"}}},
			AccessMode: &csi.VolumeCapability_AccessMode{Mode: csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER},
		})
	}
	serve(t, r, "/csi.v1.Controller/CreateVolume", req, &csi.CreateVolumeResponse{})
	ev := r.Events()[0]
	if ev.Truncated == 0 || strings.Contains(string(ev.Request), "hunter2") || !strings.Contains(string(ev.Request), Redacted) {
		t.Fatalf("truncated %d, request %.300s", ev.Truncated, ev.Request)
	}
	if req.Secrets["password"] != "hunter2" {
		t.Fatal("redaction changed the handler's request")
	}
}

// A hostile list (a few small elements first, then elements of 256 KB) cannot make the ring hold
// more than its budget per call: the prefix stops at the first element past it, and the
// estimate of the rest is only a count.
func TestCutListingHoldsOnlyItsBudget(t *testing.T) {
	const calls = 40
	r, err := New(Options{})
	if err != nil {
		t.Fatal(err)
	}
	grown := heapGrowth(func() {
		for range calls {
			resp := &runtimeapi.ListContainersResponse{}
			big := strings.Repeat("x", 256<<10)
			for i := range 100 {
				c := &runtimeapi.Container{Id: strconv.Itoa(i)}
				if i >= 10 {
					c.Labels = map[string]string{"big": big + strconv.Itoa(i)}
				}
				resp.Containers = append(resp.Containers, c)
			}
			serve(t, r, "/runtime.v1.RuntimeService/ListContainers", &runtimeapi.ListContainersRequest{}, resp)
		}
	})
	// 40 answers of 25 MB each: the ring keeps a budget's worth of each at most.
	if grown > calls*listBudget+(16<<20) {
		t.Fatalf("heap grew by %d MB after %d listings", grown>>20, calls)
	}
	for _, ev := range r.Events() {
		var kept runtimeapi.ListContainersResponse
		if err := protoUnmarshalJSON(ev.Response, &kept); err != nil || len(kept.Containers) != 10 || ev.Truncated < 20<<20 {
			t.Fatalf("kept %d containers (%v), truncated %d", len(kept.Containers), err, ev.Truncated)
		}
	}
}

// heapGrowth is how much the live heap grew over f, each side measured after a collection.
func heapGrowth(f func()) int64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	f()
	runtime.GC()
	runtime.ReadMemStats(&after)
	return int64(after.HeapAlloc) - int64(before.HeapAlloc)
}

func protoUnmarshalJSON(b json.RawMessage, m proto.Message) error {
	return protojson.Unmarshal(b, m)
}

// A listing whose elements a handler allocated together (cri-fake's do, in one slice) is not kept
// whole through the prefix's elements: the trace copies what it keeps.
func TestCutListingKeepsNoneOfTheHandlersArray(t *testing.T) {
	const calls, n = 40, 20_000
	r, err := New(Options{})
	if err != nil {
		t.Fatal(err)
	}
	grown := heapGrowth(func() {
		for range calls {
			msgs := make([]runtimeapi.Container, n)
			resp := &runtimeapi.ListContainersResponse{Containers: make([]*runtimeapi.Container, n)}
			for i := range msgs {
				msgs[i].Id = strings.Repeat("c", 64)
				resp.Containers[i] = &msgs[i]
			}
			serve(t, r, "/runtime.v1.RuntimeService/ListContainers", &runtimeapi.ListContainersRequest{}, resp)
			resp.Containers[0].Id = "changed after the call"
		}
	})
	// Each array of 20,000 containers is about 4 MB: 40 of them kept would be 160 MB. A kept
	// prefix is listBudget wire bytes, and a small message's Go struct is about three times its
	// wire size.
	if grown > calls*4*listBudget+(16<<20) {
		t.Fatalf("heap grew by %d MB after %d listings", grown>>20, calls)
	}
	if ev := r.Events()[0]; !strings.Contains(string(ev.Response), strings.Repeat("c", 64)) || strings.Contains(string(ev.Response), "changed") {
		t.Fatalf("the kept prefix: %.120s", ev.Response)
	}
}

// A cut listing's prefix is kept as its wire bytes, not as messages: a relist of containers
// with labels and annotations (maps) holds about four times its wire bytes as Go messages, and
// cri-fake's ring held 42 such prefixes at 30,000 containers. 40 listings of 5,000 such
// containers keep at most their budgets' bytes and a little more.
func TestCutListingKeepsItsWireBytes(t *testing.T) {
	const calls, n = 40, 5000
	r, err := New(Options{})
	if err != nil {
		t.Fatal(err)
	}
	listing := func() *runtimeapi.ListContainersResponse {
		resp := &runtimeapi.ListContainersResponse{}
		for i := range n {
			uid := "uid-" + strconv.Itoa(i/3)
			resp.Containers = append(resp.Containers, &runtimeapi.Container{
				Id: strings.Repeat("cd", 32) + strconv.Itoa(i), PodSandboxId: strings.Repeat("ab", 32),
				Metadata:    &runtimeapi.ContainerMetadata{Name: "app" + strconv.Itoa(i%3)},
				Image:       &runtimeapi.ImageSpec{Image: "registry.k8s.io/e2e-test-images/busybox:1.29-2"},
				State:       runtimeapi.ContainerState_CONTAINER_RUNNING,
				Labels:      map[string]string{"io.kubernetes.container.name": "app", "io.kubernetes.pod.uid": uid},
				Annotations: map[string]string{"io.kubernetes.container.hash": "3d1a5f7c", "io.kubernetes.container.restartCount": "0"},
			})
		}
		return resp
	}
	grown := heapGrowth(func() {
		for range calls {
			serve(t, r, "/runtime.v1.RuntimeService/ListContainers", &runtimeapi.ListContainersRequest{}, listing())
		}
	})
	if limit := int64(calls) * listBudget * 3 / 2; grown > limit {
		t.Fatalf("%d cut listings: the heap grew by %.1f MB, over %.1f MB (their budgets' wire bytes and half again)", calls, float64(grown)/1e6, float64(limit)/1e6)
	}
	t.Logf("%d cut listings: the heap grew by %.1f MB", calls, float64(grown)/1e6)
	ev := r.Events()
	var kept runtimeapi.ListContainersResponse
	if err := protoUnmarshalJSON(ev[len(ev)-1].Response, &kept); err != nil || len(kept.Containers) == 0 || kept.Containers[0].Labels["io.kubernetes.pod.uid"] != "uid-0" {
		t.Fatalf("the kept prefix: %d containers (%v), first %v", len(kept.Containers), err, kept.Containers)
	}
}

// A relist answered the same second after second (a node where nothing changes) keeps one copy
// of its prefix for all its events, and the first answer that differs keeps its own.
func TestUnchangedListingSharesItsPrefix(t *testing.T) {
	const calls = 40
	r, err := New(Options{})
	if err != nil {
		t.Fatal(err)
	}
	grown := heapGrowth(func() {
		for range calls {
			serve(t, r, "/runtime.v1.RuntimeService/ListPodSandbox", &runtimeapi.ListPodSandboxRequest{}, sandboxes(10_000))
		}
	})
	if grown > 3*listBudget {
		t.Fatalf("%d equal cut listings: the heap grew by %.1f MB, over three budgets (%.1f MB)", calls, float64(grown)/1e6, 3*float64(listBudget)/1e6)
	}
	changed := sandboxes(10_000)
	changed.Items[1].State = runtimeapi.PodSandboxState_SANDBOX_NOTREADY
	serve(t, r, "/runtime.v1.RuntimeService/ListPodSandbox", &runtimeapi.ListPodSandboxRequest{}, changed)
	serve(t, r, "/runtime.v1.RuntimeService/ListPodSandbox", &runtimeapi.ListPodSandboxRequest{}, sandboxes(10_000))
	ev := r.Events()
	states := func(e Event) []runtimeapi.PodSandboxState {
		var kept runtimeapi.ListPodSandboxResponse
		if err := protoUnmarshalJSON(e.Response, &kept); err != nil || len(kept.Items) < 2 {
			t.Fatalf("the kept prefix: %d sandboxes (%v)", len(kept.Items), err)
		}
		return []runtimeapi.PodSandboxState{kept.Items[0].State, kept.Items[1].State}
	}
	ready, notReady := runtimeapi.PodSandboxState_SANDBOX_READY, runtimeapi.PodSandboxState_SANDBOX_NOTREADY
	for i, want := range [][]runtimeapi.PodSandboxState{{ready, ready}, {ready, notReady}, {ready, ready}} {
		if got := states(ev[len(ev)-3+i]); got[0] != want[0] || got[1] != want[1] {
			t.Fatalf("event %d of the last 3: sandboxes %v, want %v", i, got, want)
		}
	}
}
