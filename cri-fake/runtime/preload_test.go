package runtime

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/plugsim/plugsim/cri-fake/images"
	"github.com/plugsim/plugsim/harness/fixtures"
)

var (
	t0 = time.Date(2025, 6, 1, 10, 0, 0, 0, time.UTC)
	t1 = t0.Add(time.Minute)
	t2 = t0.Add(2 * time.Minute)
)

const cartDigest = "registry.example.com/shop/cart@sha256:1111111111111111111111111111111111111111111111111111111111111111"

// nodeFixture has a pod of each state, a container of each state, a catalog image and one the
// catalog does not have.
func nodeFixture() *fixtures.CRI {
	return &fixtures.CRI{
		Source: "node.yaml",
		Images: []fixtures.Image{
			{Image: busybox, Pinned: true},
			{RepoTags: []string{"registry.example.com/shop/cart:2.1"}, RepoDigests: []string{cartDigest}, Size: 1234, User: "1000",
				Cmd: []string{"sleep", "infinity"}},
		},
		Pods: []fixtures.Pod{
			{ID: "web-pod", Name: "web", Namespace: "default", UID: "u-web", Labels: map[string]string{"app": "web", "io.kubernetes.pod.uid": "u-web"},
				Annotations: map[string]string{"note": "preloaded"}, IPs: []string{"10.88.7.7"}, CreatedAt: t0},
			{Name: "old", Namespace: "jobs", UID: "u-old", Attempt: 2, State: "NOTREADY", IPs: []string{"10.88.9.9"}},
		},
		Containers: []fixtures.Container{
			{ID: "web-main", Name: "main", Pod: "web", Image: busybox, Command: []string{"sleep", "3600"}, Env: []string{"A=b=c"},
				Labels: map[string]string{"io.kubernetes.pod.uid": "u-web"}, LogPath: "main/0.log", StartedAt: t1},
			{Name: "cart", Pod: "default/web", Image: "registry.example.com/shop/cart:2.1", State: "running"},
			{Name: "init", Pod: "web-pod", Image: busybox, State: "EXITED", ExitCode: 3, Message: "boom", CreatedAt: t0, StartedAt: t1, FinishedAt: t2},
			{Name: "later", Pod: "web", Image: busybox, State: "CONTAINER_CREATED", Command: []string{"sleep", "3600"}},
			{Name: "job", Pod: "jobs/old", Image: busybox, State: "EXITED"},
		},
	}
}

func TestPreloadHoldsTheFixtures(t *testing.T) {
	ctx := context.Background()
	s := newService(t, func(o *Options) { o.Images = images.NewService(images.Options{FSPath: t.TempDir()}) })
	if err := s.Preload(ctx, nodeFixture()); err != nil {
		t.Fatal(err)
	}

	pods, err := s.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{})
	if err != nil || len(pods.Items) != 2 {
		t.Fatalf("ListPodSandbox: %v %v", pods, err)
	}
	web, old := pods.Items[0], pods.Items[1]
	if web.Id != "web-pod" || web.State != runtimeapi.PodSandboxState_SANDBOX_READY || web.CreatedAt != t0.UnixNano() ||
		web.Labels["app"] != "web" || web.Annotations["note"] != "preloaded" || web.Metadata.GetUid() != "u-web" {
		t.Errorf("web pod: %v", web)
	}
	if len(old.Id) != 64 || old.State != runtimeapi.PodSandboxState_SANDBOX_NOTREADY || old.Metadata.GetAttempt() != 2 {
		t.Errorf("old pod: %v", old)
	}
	if st := sandboxState(t, s, "web-pod"); st.Network.GetIp() != "10.88.7.7" {
		t.Errorf("web pod IP %q, want the one given", st.Network.GetIp())
	}
	// A pod through RunPodSandbox gets a free address, not the one a fixture holds.
	if st := sandboxState(t, s, runPod(t, s, "new")); st.Network.GetIp() == "10.88.7.7" || st.Network.GetIp() == "" {
		t.Errorf("new pod IP %q", st.Network.GetIp())
	}

	ctrs, err := s.ListContainers(ctx, &runtimeapi.ListContainersRequest{})
	if err != nil || len(ctrs.Containers) != 5 {
		t.Fatalf("ListContainers: %v %v", ctrs, err)
	}
	want := []struct {
		name  string
		state runtimeapi.ContainerState
		pod   string
	}{
		{"main", runtimeapi.ContainerState_CONTAINER_RUNNING, "web-pod"},
		{"cart", runtimeapi.ContainerState_CONTAINER_RUNNING, "web-pod"},
		{"init", runtimeapi.ContainerState_CONTAINER_EXITED, "web-pod"},
		{"later", runtimeapi.ContainerState_CONTAINER_CREATED, "web-pod"},
		{"job", runtimeapi.ContainerState_CONTAINER_EXITED, old.Id},
	}
	for i, w := range want {
		c := ctrs.Containers[i]
		if c.Metadata.GetName() != w.name || c.State != w.state || c.PodSandboxId != w.pod {
			t.Errorf("container %d: %s %v in %s, want %s %v in %s", i, c.Metadata.GetName(), c.State, c.PodSandboxId, w.name, w.state, w.pod)
		}
	}

	main := containerState(t, s, "web-main")
	if main.StartedAt != t1.UnixNano() || main.CreatedAt < t0.UnixNano() || main.LogPath == "" || !strings.HasSuffix(main.LogPath, "main/0.log") ||
		main.ImageRef == "" || main.Image.GetImage() != busybox {
		t.Errorf("main: %v", main)
	}
	init := containerState(t, s, ctrs.Containers[2].Id)
	if init.ExitCode != 3 || init.Reason != "Error" || init.Message != "boom" || init.CreatedAt != t0.UnixNano() ||
		init.StartedAt != t1.UnixNano() || init.FinishedAt != t2.UnixNano() {
		t.Errorf("init: %v", init)
	}
	job := containerState(t, s, ctrs.Containers[4].Id)
	if job.ExitCode != 0 || job.Reason != "Completed" || job.FinishedAt != job.StartedAt || job.StartedAt != job.CreatedAt {
		t.Errorf("job: exit %d %q, created %d started %d finished %d", job.ExitCode, job.Reason, job.CreatedAt, job.StartedAt, job.FinishedAt)
	}
	cart := containerState(t, s, ctrs.Containers[1].Id)
	if cart.ImageRef != cartDigest || cart.User.GetLinux().GetUid() != 1000 {
		t.Errorf("cart: image ref %q, user %v", cart.ImageRef, cart.User)
	}

	imgs, err := s.images.ListImages(ctx, &runtimeapi.ListImagesRequest{})
	if err != nil || len(imgs.Images) != 2 {
		t.Fatalf("ListImages: %v %v", imgs, err)
	}
	for _, img := range imgs.Images {
		switch img.RepoTags[0] {
		case busybox:
			if !img.Pinned || len(img.RepoDigests) != 1 {
				t.Errorf("busybox: %v", img)
			}
		case "registry.example.com/shop/cart:2.1":
			if img.Size != 1234 || img.RepoDigests[0] != cartDigest || img.GetUid().GetValue() != 1000 || img.Pinned {
				t.Errorf("cart image: %v", img)
			}
		default:
			t.Errorf("unexpected image %v", img)
		}
	}

	// The preloaded containers take part in the lifecycle like any other.
	if _, err := s.StopContainer(ctx, &runtimeapi.StopContainerRequest{ContainerId: "web-main", Timeout: 0}); err != nil {
		t.Fatal(err)
	}
	if st := containerState(t, s, "web-main"); st.State != runtimeapi.ContainerState_CONTAINER_EXITED || st.ExitCode != 137 {
		t.Errorf("stopped main: %v %d", st.State, st.ExitCode)
	}
	if _, err := s.RemoveContainer(ctx, &runtimeapi.RemoveContainerRequest{ContainerId: init.Id}); err != nil {
		t.Fatal(err)
	}
	startContainer(t, s, ctrs.Containers[3].Id)
	if st := containerState(t, s, ctrs.Containers[3].Id); st.State != runtimeapi.ContainerState_CONTAINER_RUNNING {
		t.Errorf("started later: %v", st.State)
	}
	if _, err := s.RemovePodSandbox(ctx, &runtimeapi.RemovePodSandboxRequest{PodSandboxId: old.Id}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.ContainerStatus(ctx, &runtimeapi.ContainerStatusRequest{ContainerId: ctrs.Containers[4].Id}); err == nil {
		t.Error("the NOTREADY pod's container outlived its pod")
	}
}

// Derived IDs are the same in every run; given ones are kept.
func TestPreloadIDsAreStable(t *testing.T) {
	ids := func() []string {
		s := newService(t, func(o *Options) { o.Launcher = UntilStopped{} })
		if err := s.Preload(context.Background(), nodeFixture()); err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, sb := range s.Sandboxes().List() {
			out = append(out, sb.ID)
		}
		for _, c := range s.Containers().List() {
			out = append(out, c.ID)
		}
		return out
	}
	a, b := ids(), ids()
	if strings.Join(a, ",") != strings.Join(b, ",") || a[0] != "web-pod" || a[2] != "web-main" {
		t.Fatalf("IDs %v then %v", a, b)
	}
}

// A RUNNING container's process is the one StartContainer would start: here its command exits at
// once, so the container is EXITED soon after, with the command's code.
func TestPreloadRunningContainerRunsItsCommand(t *testing.T) {
	s := newService(t)
	f := &fixtures.CRI{
		Pods:       []fixtures.Pod{{Name: "p", Namespace: "ns", UID: "u"}},
		Containers: []fixtures.Container{{ID: "quick", Name: "c", Pod: "p", Image: busybox, Command: []string{"sh", "-c", "exit 7"}}},
	}
	if err := s.Preload(context.Background(), f); err != nil {
		t.Fatal(err)
	}
	c, err := s.Containers().Get("quick")
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-c.Exited():
	case <-time.After(30 * time.Second):
		t.Fatal("the container's process did not end")
	}
	if st := containerState(t, s, "quick"); st.ExitCode != 7 || st.Reason != "Error" {
		t.Fatalf("exit %d %q", st.ExitCode, st.Reason)
	}
}

func TestPreloadRejectsBadFixtures(t *testing.T) {
	for _, tc := range []struct {
		name   string
		change func(f *fixtures.CRI)
		want   string
	}{
		{"container's pod missing", func(f *fixtures.CRI) { f.Containers[2].Pod = "pod-x" },
			`node.yaml: cri.containers[2] "init": pod "pod-x" not found (name a pods entry by its id, name or namespace/name)`},
		{"pod name ambiguous", func(f *fixtures.CRI) {
			f.Pods = append(f.Pods, fixtures.Pod{Name: "web", Namespace: "other", UID: "u2"})
		}, `node.yaml: cri.containers[0] "main": pod "web" is ambiguous: pods[0] and pods[2] both match; give its id or namespace/name`},
		{"duplicate pod ID", func(f *fixtures.CRI) { f.Pods[1].ID = "web-pod" },
			`node.yaml: cri.pods[1] "old": id "web-pod" is also pods[0]'s`},
		{"duplicate pod name", func(f *fixtures.CRI) {
			f.Pods[1].Name, f.Pods[1].Namespace, f.Pods[1].UID, f.Pods[1].Attempt = "web", "default", "u-web", 0
		},
			`node.yaml: cri.pods[1] "web": its sandbox name "web_default_u-web_0" (name_namespace_uid_attempt) is also pods[0]'s`},
		{"duplicate container ID", func(f *fixtures.CRI) { f.Containers[1].ID = "web-main" },
			`node.yaml: cri.containers[1] "cart": id "web-main" is also containers[0]'s`},
		{"container ID is a pod's", func(f *fixtures.CRI) { f.Containers[1].ID = "web-pod" },
			`node.yaml: cri.containers[1] "cart": id "web-pod" is also pods[0]'s (sandboxes and containers share one ID space, as in containerd)`},
		{"duplicate container name", func(f *fixtures.CRI) { f.Containers[3].Name = "main" },
			`node.yaml: cri.containers[3] "main": its container name "main_web_default_u-web_0" (container_pod_namespace_uid_attempt) is also containers[0]'s`},
		{"unknown container state", func(f *fixtures.CRI) { f.Containers[0].State = "STOPPED" },
			`node.yaml: cri.containers[0] "main": state "STOPPED": want CREATED, RUNNING, EXITED`},
		{"unknown pod state", func(f *fixtures.CRI) { f.Pods[0].State = "RUNNING" },
			`node.yaml: cri.pods[0] "web": state "RUNNING": want READY, NOTREADY`},
		{"running in a stopped pod", func(f *fixtures.CRI) { f.Containers[4].State = "RUNNING" },
			`node.yaml: cri.containers[4] "job": state RUNNING: pod "jobs/old" is NOTREADY, and a stopped pod has no running containers (StopPodSandbox stops them all)`},
		{"image reference does not parse", func(f *fixtures.CRI) { f.Containers[0].Image = "Busy:Box:1" },
			`node.yaml: cri.containers[0] "main": image: image reference "Busy:Box:1": invalid repository name component "Busy:Box" (lower case letters, digits and separators only)`},
		{"image not held", func(f *fixtures.CRI) { f.Containers[0].Image = "nginx:1.27" },
			`node.yaml: cri.containers[0] "main": image "nginx:1.27" is not among the images cri-fake holds (list it under cri.images), as CreateContainer needs it pulled`},
		{"fixture image reference does not parse", func(f *fixtures.CRI) { f.Images[0].Image = "nginx@sha256:xyz" },
			`node.yaml: cri.images[0] "nginx@sha256:xyz": image reference "nginx@sha256:xyz": invalid digest "sha256:xyz" (want sha256:<64 hex digits>)`},
		{"image not in the catalog", func(f *fixtures.CRI) { f.Images[0].Image = "nginx:9.9" },
			`node.yaml: cri.images[0] "nginx:9.9": docker.io/library/nginx:9.9 is not in the image catalog (add it with --image-catalog, or define the image here with repoTags)`},
		{"image named twice", func(f *fixtures.CRI) { f.Images = append(f.Images, fixtures.Image{Image: busybox}) },
			`node.yaml: cri.images[2] "` + busybox + `": ` + busybox + ` is also images[0]'s`},
		{"defined image reuses a tag", func(f *fixtures.CRI) { f.Images[1].RepoTags = append(f.Images[1].RepoTags, busybox) },
			`node.yaml: cri.images[1] "registry.example.com/shop/cart:2.1": repoTags[1]: ` + busybox + ` is also images[0]'s`},
		{"defined image with a digest tag", func(f *fixtures.CRI) { f.Images[1].RepoTags[0] = cartDigest },
			`node.yaml: cri.images[1] "` + cartDigest + `": repoTags[0] "` + cartDigest + `" has a digest; repo@digest references go under repoDigests`},
		{"defined image with a bad ID", func(f *fixtures.CRI) { f.Images[1].ID = "abc" },
			`node.yaml: cri.images[1] "registry.example.com/shop/cart:2.1": id "abc": want sha256:<64 hex digits>`},
		{"catalog image with config", func(f *fixtures.CRI) { f.Images[0].Size = 5 },
			`node.yaml: cri.images[0] "` + busybox + `": image names a catalog image, while id, repoTags, repoDigests, size and the config keys define one the catalog does not have: give one or the other`},
		{"missing uid", func(f *fixtures.CRI) { f.Pods[0].UID = "" },
			`node.yaml: cri.pods[0] "web": sandbox config metadata.uid is empty`},
		{"unknown runtime handler", func(f *fixtures.CRI) { f.Pods[0].RuntimeHandler = "kata" },
			`node.yaml: cri.pods[0] "web": no runtime for "kata" is configured (runtime handlers: [runc])`},
		{"ID with a path in it", func(f *fixtures.CRI) { f.Pods[0].ID = "../../etc" },
			`node.yaml: cri.pods[0] "web": ID "../../etc": only letters, digits, and single '.', '_' or '-' between them are allowed (containerd's identifier rule)`},
		{"log path out of the pod's directory", func(f *fixtures.CRI) { f.Containers[0].LogPath = "../../x.log" },
			`node.yaml: cri.containers[0] "main": logPath "../../x.log": want a path inside the pod's log directory (relative, without ..)`},
		{"exit code of a running container", func(f *fixtures.CRI) { f.Containers[0].ExitCode = 1 },
			`node.yaml: cri.containers[0] "main": exitCode: a RUNNING container has none (only EXITED)`},
		{"start time of a created container", func(f *fixtures.CRI) { f.Containers[3].StartedAt = t1 },
			`node.yaml: cri.containers[3] "later": startedAt: a CREATED container has none (only RUNNING or EXITED)`},
		{"finished before started", func(f *fixtures.CRI) { f.Containers[2].FinishedAt = t0 },
			`node.yaml: cri.containers[2] "init": finishedAt 2025-06-01T10:00:00Z is before startedAt 2025-06-01T10:01:00Z`},
		{"created before its pod", func(f *fixtures.CRI) { f.Containers[2].CreatedAt = t0.Add(-time.Second) },
			`node.yaml: cri.containers[2] "init": createdAt 2025-06-01T09:59:59Z is before its pod's createdAt 2025-06-01T10:00:00Z`},
		{"running container started in the future", func(f *fixtures.CRI) { f.Containers[1].StartedAt = time.Date(2999, 1, 1, 0, 0, 0, 0, time.UTC) },
			`node.yaml: cri.containers[1] "cart": startedAt 2999-01-01T00:00:00Z is in the future: a RUNNING container's process starts when cri-fake does`},
		{"bad env", func(f *fixtures.CRI) { f.Containers[0].Env = []string{"NOVALUE"} },
			`node.yaml: cri.containers[0] "main": env[0] "NOVALUE": want NAME=value`},
		{"bad IP", func(f *fixtures.CRI) { f.Pods[0].IPs = []string{"10.88.1"} },
			`node.yaml: cri.pods[0] "web": ips[0] "10.88.1" is not an IP address`},
		{"IP twice", func(f *fixtures.CRI) {
			f.Pods = append(f.Pods, fixtures.Pod{Name: "b", Namespace: "x", UID: "y", IPs: []string{"10.88.7.7"}})
		}, `node.yaml: cri.pods[2] "b": ip 10.88.7.7 is also pods[0]'s`},
		{"IPs of a host-network pod", func(f *fixtures.CRI) { f.Pods[0].HostNetwork = true },
			`node.yaml: cri.pods[0] "web": ips: a host-network pod has the node's addresses, not its own`},
		{"relative log directory", func(f *fixtures.CRI) { f.Pods[0].LogDirectory = "logs" },
			`node.yaml: cri.pods[0] "web": logDirectory "logs": want an absolute path`},
		// Found when the process is validated, after the pods are set up: everything is undone.
		{"command not in the image", func(f *fixtures.CRI) { f.Containers[1].Command = []string{"/no/such/program"} },
			`node.yaml: cri.containers[1] "cart": its process does not start: failed to create containerd task: `},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newService(t, func(o *Options) { o.Images = images.NewService(images.Options{FSPath: t.TempDir()}) })
			f := nodeFixture()
			tc.change(f)
			err := s.Preload(context.Background(), f)
			var fe *fixtures.Error
			if err == nil || !errors.As(err, &fe) || !strings.HasPrefix(err.Error(), tc.want) {
				t.Fatalf("got  %v\nwant %s", err, tc.want)
			}
			if n, m, k := s.Sandboxes().Len(), s.Containers().Len(), len(s.images.Store().List()); n+m+k != 0 {
				t.Fatalf("a failed preload left %d sandboxes, %d containers, %d images", n, m, k)
			}
		})
	}
}

// With CNI on, the plugin gives READY pods their addresses; a preload that fails after the CNI
// ADDs ran undoes them with DELs and removes the namespaces.
func TestPreloadWithCNI(t *testing.T) {
	net := &recordingNetwork{}
	s := newService(t, func(o *Options) { o.Network = net })
	f := &fixtures.CRI{Pods: []fixtures.Pod{{Name: "p", Namespace: "n", UID: "u", IPs: []string{"10.0.0.1"}}}}
	err := s.Preload(context.Background(), f)
	want := `fixtures: cri.pods[0] "p": ips: with CNI on, the CNI plugin gives a READY pod its addresses (ips can be given with CNI off, or for a NOTREADY pod)`
	if err == nil || err.Error() != want {
		t.Fatalf("got  %v\nwant %s", err, want)
	}

	f.Pods[0].IPs = nil
	f.Pods = append(f.Pods, fixtures.Pod{Name: "q", Namespace: "n", UID: "v"}, fixtures.Pod{Name: "stopped", Namespace: "n", UID: "w", State: "NOTREADY"})
	f.Containers = []fixtures.Container{{Name: "c", Pod: "q", Image: busybox, Command: []string{"/no/such/program"}}}
	if err := s.Preload(context.Background(), f); err == nil || !strings.Contains(err.Error(), `cri.containers[0] "c": its process does not start`) {
		t.Fatalf("preload with a command the image lacks: %v", err)
	}
	if len(net.adds) != 2 || len(net.dels) != 2 || net.dels[0].ID != net.adds[1].ID || net.dels[1].ID != net.adds[0].ID {
		t.Fatalf("ADDs %v, DELs %v: want one DEL per ADD, in reverse", net.adds, net.dels)
	}
	if ents, _ := os.ReadDir(filepath.Join(s.opts.RootDir, "netns")); len(ents) != 0 {
		t.Fatalf("network namespaces left after the undo: %v", ents)
	}

	f.Containers = nil
	net.adds, net.dels = nil, nil
	if err := s.Preload(context.Background(), f); err != nil {
		t.Fatal(err)
	}
	if len(net.adds) != 2 {
		t.Fatalf("ADDs %v: want one per READY pod (none for a NOTREADY one)", net.adds)
	}
	st := sandboxState(t, s, net.adds[0].ID)
	if st.Network.GetIp() != "10.1.0.9" || len(st.Network.GetAdditionalIps()) != 1 {
		t.Fatalf("network %v, want the plugin's addresses", st.Network)
	}
	stopped, _ := s.Sandboxes().Get(fixtureID("sandbox", "stopped_n_w_0"))
	if stopped == nil || stopped.NetNS != "" || !stopped.Status().NetworkDown {
		t.Fatalf("NOTREADY pod %+v: want no network", stopped)
	}
	if _, err := s.StopPodSandbox(context.Background(), &runtimeapi.StopPodSandboxRequest{PodSandboxId: stopped.ID}); err != nil || len(net.dels) != 0 {
		t.Fatalf("stopping a NOTREADY pod: %v, DELs %v", err, net.dels)
	}
}
