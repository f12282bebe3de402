// Package kubeletsim plays the kubelet's side of CRI and CSI: the calls a real kubelet v1.37 makes,
// in its order, for starting up, starting a pod (sandbox, then init containers one at a time, then
// the app containers), the PLEG relist, stopping and removing a pod, and mounting a PVC through a
// CSI driver. Each sequence cites the kubelet code it follows (kubernetes/kubernetes
// pkg/kubelet/kuberuntime/kuberuntime_manager.go and pkg/volume/csi/csi_attacher.go,
// csi_mounter.go). It drives any endpoint, and runs those sequences as load.
package kubeletsim

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sort"
	"strconv"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/plugsim/plugsim/harness/trace"
)

// Labels the kubelet puts on sandboxes and containers (pkg/kubelet/types/labels.go); PLEG groups
// containers into pods by the pod UID label.
const (
	LabelPodName       = "io.kubernetes.pod.name"
	LabelPodNamespace  = "io.kubernetes.pod.namespace"
	LabelPodUID        = "io.kubernetes.pod.uid"
	LabelContainerName = "io.kubernetes.container.name"
)

// Container is one container of a pod spec.
type Container struct {
	Name    string
	Image   string
	Command []string
	Args    []string
}

// Pod is the part of a pod spec the CRI sequence needs.
type Pod struct {
	Name, Namespace, UID string
	// RuntimeHandler selects the low-level runtime (RuntimeClass.handler); "" is the default.
	RuntimeHandler string
	HostNetwork    bool
	PortMappings   []*runtimeapi.PortMapping
	InitContainers []Container
	Containers     []Container
}

// Observer is told about every call: the method, how long it took and its error.
type Observer func(method string, d time.Duration, err error)

// Kubelet makes the CRI calls a kubelet makes.
type Kubelet struct {
	Runtime runtimeapi.RuntimeServiceClient
	Images  runtimeapi.ImageServiceClient
	// Observe, if set, sees every call.
	Observe Observer
	// LogRoot is the kubelet's pod log directory (/var/log/pods); it is only named in requests.
	LogRoot string
	// InitTimeout bounds the wait for an init container to exit (default 30s).
	InitTimeout time.Duration
	// PollInterval is how often ContainerStatus is asked while waiting (default 20ms).
	PollInterval time.Duration
}

// New returns a Kubelet on one CRI connection (runtime and image service on the same socket, as
// the kubelet's containerRuntimeEndpoint and imageServiceEndpoint usually are).
func New(cc grpc.ClientConnInterface) *Kubelet {
	return &Kubelet{
		Runtime: runtimeapi.NewRuntimeServiceClient(cc),
		Images:  runtimeapi.NewImageServiceClient(cc),
		LogRoot: "/var/log/pods",
	}
}

// As names the component making the calls on ctx, for the fakes' trace (trace.CallerMetadata):
// one socket serves several callers, and only the client knows which one it plays.
func As(ctx context.Context, role string) context.Context {
	return metadata.AppendToOutgoingContext(ctx, trace.CallerMetadata, role)
}

// do times one call and reports it.
func (k *Kubelet) do(method string, f func() error) error {
	start := time.Now()
	err := f()
	if k.Observe != nil {
		k.Observe(method, time.Since(start), err)
	}
	if err != nil {
		return fmt.Errorf("%s: %w", method, err)
	}
	return nil
}

// Startup makes the calls of a starting kubelet (kubelet.go PreInitRuntimeService, server.go
// getCgroupDriverFromCRI, NewKubeGenericRuntimeManager, then the first updateRuntimeUp): Version,
// ImageFsInfo, RuntimeConfig, Version again (which must say "0.1.0"), then Status.
func (k *Kubelet) Startup(ctx context.Context) (*runtimeapi.StatusResponse, error) {
	ctx = As(ctx, "kubelet")
	if err := k.do("Version", func() error { _, err := k.Runtime.Version(ctx, &runtimeapi.VersionRequest{}); return err }); err != nil {
		return nil, err
	}
	if err := k.do("ImageFsInfo", func() error { _, err := k.Images.ImageFsInfo(ctx, &runtimeapi.ImageFsInfoRequest{}); return err }); err != nil {
		return nil, err
	}
	// Unimplemented is tolerated: the kubelet falls back to its own cgroupDriver setting.
	if err := k.do("RuntimeConfig", func() error {
		_, err := k.Runtime.RuntimeConfig(ctx, &runtimeapi.RuntimeConfigRequest{})
		if status.Code(err) == codes.Unimplemented {
			return nil
		}
		return err
	}); err != nil {
		return nil, err
	}
	var v *runtimeapi.VersionResponse
	if err := k.do("Version", func() (err error) {
		v, err = k.Runtime.Version(ctx, &runtimeapi.VersionRequest{Version: "0.1.0"})
		return err
	}); err != nil {
		return nil, err
	}
	if v.Version != "0.1.0" {
		return nil, fmt.Errorf("runtime API version %q is not supported: the kubelet requires 0.1.0 and exits", v.Version)
	}
	var st *runtimeapi.StatusResponse
	err := k.do("Status", func() (err error) {
		st, err = k.Runtime.Status(ctx, &runtimeapi.StatusRequest{})
		return err
	})
	return st, err
}

// Running is what the kubelet knows about a pod it started.
type Running struct {
	Pod        Pod
	SandboxID  string
	Containers map[string]string // name → container ID, init containers included
	Config     *runtimeapi.PodSandboxConfig
}

// SandboxConfig builds the sandbox config the way generatePodSandboxConfig does: metadata, the
// pod labels, the log directory, port mappings and the namespace options.
func (k *Kubelet) SandboxConfig(p Pod) *runtimeapi.PodSandboxConfig {
	nsMode := runtimeapi.NamespaceMode_POD
	if p.HostNetwork {
		nsMode = runtimeapi.NamespaceMode_NODE
	}
	return &runtimeapi.PodSandboxConfig{
		Metadata:     &runtimeapi.PodSandboxMetadata{Name: p.Name, Namespace: p.Namespace, Uid: p.UID},
		Hostname:     p.Name,
		LogDirectory: filepath.Join(k.LogRoot, p.Namespace+"_"+p.Name+"_"+p.UID),
		PortMappings: p.PortMappings,
		Labels: map[string]string{
			LabelPodName: p.Name, LabelPodNamespace: p.Namespace, LabelPodUID: p.UID,
		},
		Annotations: map[string]string{"kubernetes.io/config.source": "harness"},
		Linux: &runtimeapi.LinuxPodSandboxConfig{
			CgroupParent: "/kubepods/besteffort/pod" + p.UID,
			SecurityContext: &runtimeapi.LinuxSandboxSecurityContext{
				NamespaceOptions: &runtimeapi.NamespaceOption{Network: nsMode, Pid: runtimeapi.NamespaceMode_CONTAINER, Ipc: runtimeapi.NamespaceMode_POD},
			},
		},
	}
}

// StartPod runs kuberuntime.SyncPod for a new pod: RunPodSandbox → PodSandboxStatus (pod IPs),
// then each init container, one at a time, started and waited for until it has exited with 0,
// then the app containers (kuberuntime_manager.go SyncPod).
func (k *Kubelet) StartPod(ctx context.Context, p Pod) (*Running, error) {
	ctx = As(ctx, "kubelet")
	cfg := k.SandboxConfig(p)
	r := &Running{Pod: p, Config: cfg, Containers: map[string]string{}}
	if err := k.do("RunPodSandbox", func() error {
		resp, err := k.Runtime.RunPodSandbox(ctx, &runtimeapi.RunPodSandboxRequest{Config: cfg, RuntimeHandler: p.RuntimeHandler})
		if err == nil {
			r.SandboxID = resp.PodSandboxId
		}
		return err
	}); err != nil {
		return r, err
	}
	if err := k.do("PodSandboxStatus", func() error {
		_, err := k.Runtime.PodSandboxStatus(ctx, &runtimeapi.PodSandboxStatusRequest{PodSandboxId: r.SandboxID})
		return err
	}); err != nil {
		return r, err
	}
	for i, c := range p.InitContainers {
		id, err := k.startContainer(ctx, r, c, i)
		if err != nil {
			return r, err
		}
		if err := k.waitExited(ctx, id, c.Name); err != nil {
			return r, err
		}
	}
	for i, c := range p.Containers {
		if _, err := k.startContainer(ctx, r, c, len(p.InitContainers)+i); err != nil {
			return r, err
		}
	}
	return r, nil
}

// startContainer is kuberuntime_container.go startContainer: EnsureImageExists (ImageStatus, then
// PullImage and ImageStatus again if the image is absent: image_manager_test.go's asserted order
// GetImageRef, PullImage, GetImageSize), generateContainerConfig (ImageStatus for the image's
// user), CreateContainer, StartContainer.
func (k *Kubelet) startContainer(ctx context.Context, r *Running, c Container, index int) (string, error) {
	var ref string
	if err := k.do("ImageStatus", func() error {
		resp, err := k.Images.ImageStatus(ctx, &runtimeapi.ImageStatusRequest{Image: &runtimeapi.ImageSpec{Image: c.Image}})
		if err == nil && resp.Image != nil {
			ref = resp.Image.Id
		}
		return err
	}); err != nil {
		return "", err
	}
	if ref == "" {
		if err := k.do("PullImage", func() error {
			resp, err := k.Images.PullImage(ctx, &runtimeapi.PullImageRequest{Image: &runtimeapi.ImageSpec{Image: c.Image}, SandboxConfig: r.Config})
			if err == nil {
				ref = resp.ImageRef
			}
			return err
		}); err != nil {
			return "", err
		}
		if err := k.do("ImageStatus", func() error {
			_, err := k.Images.ImageStatus(ctx, &runtimeapi.ImageStatusRequest{Image: &runtimeapi.ImageSpec{Image: ref}})
			return err
		}); err != nil {
			return "", err
		}
	}
	if err := k.do("ImageStatus", func() error {
		_, err := k.Images.ImageStatus(ctx, &runtimeapi.ImageStatusRequest{Image: &runtimeapi.ImageSpec{Image: ref}})
		return err
	}); err != nil {
		return "", err
	}
	cfg := &runtimeapi.ContainerConfig{
		Metadata: &runtimeapi.ContainerMetadata{Name: c.Name},
		Image:    &runtimeapi.ImageSpec{Image: ref, UserSpecifiedImage: c.Image},
		Command:  c.Command,
		Args:     c.Args,
		LogPath:  c.Name + "/0.log",
		Labels: map[string]string{
			LabelContainerName: c.Name,
			LabelPodName:       r.Pod.Name, LabelPodNamespace: r.Pod.Namespace, LabelPodUID: r.Pod.UID,
		},
		Annotations: map[string]string{
			"io.kubernetes.container.hash":         strconv.Itoa(index + 1),
			"io.kubernetes.container.restartCount": "0",
		},
	}
	var id string
	if err := k.do("CreateContainer", func() error {
		resp, err := k.Runtime.CreateContainer(ctx, &runtimeapi.CreateContainerRequest{PodSandboxId: r.SandboxID, Config: cfg, SandboxConfig: r.Config})
		if err == nil {
			id = resp.ContainerId
		}
		return err
	}); err != nil {
		return "", err
	}
	r.Containers[c.Name] = id
	return id, k.do("StartContainer", func() error {
		_, err := k.Runtime.StartContainer(ctx, &runtimeapi.StartContainerRequest{ContainerId: id})
		return err
	})
}

// waitExited polls ContainerStatus until an init container has exited; the kubelet starts the
// next init container only after the previous one succeeded (computeInitContainerActions).
func (k *Kubelet) waitExited(ctx context.Context, id, name string) error {
	timeout, every := k.InitTimeout, k.PollInterval
	if timeout <= 0 {
		timeout = 30 * time.Second
	}
	if every <= 0 {
		every = 20 * time.Millisecond
	}
	deadline := time.Now().Add(timeout)
	for {
		var st *runtimeapi.ContainerStatus
		if err := k.do("ContainerStatus", func() error {
			resp, err := k.Runtime.ContainerStatus(ctx, &runtimeapi.ContainerStatusRequest{ContainerId: id})
			if err == nil {
				st = resp.Status
			}
			return err
		}); err != nil {
			return err
		}
		if st != nil && st.State == runtimeapi.ContainerState_CONTAINER_EXITED {
			if st.ExitCode != 0 {
				return fmt.Errorf("init container %s exited with %d (%s)", name, st.ExitCode, st.Reason)
			}
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("init container %s still %v after %s: the runtime never reported it exited", name, st.GetState(), timeout)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(every):
		}
	}
}

// Relist is one PLEG relist (pleg/generic.go): all sandboxes and all containers, unfiltered.
func (k *Kubelet) Relist(ctx context.Context) (sandboxes, containers int, err error) {
	ctx = As(ctx, "kubelet")
	err = k.do("ListPodSandbox", func() error {
		resp, err := k.Runtime.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{})
		if err == nil {
			sandboxes = len(resp.Items)
		}
		return err
	})
	if err != nil {
		return
	}
	err = k.do("ListContainers", func() error {
		resp, err := k.Runtime.ListContainers(ctx, &runtimeapi.ListContainersRequest{})
		if err == nil {
			containers = len(resp.Containers)
		}
		return err
	})
	return
}

// PodStatus is GetPodStatus (kuberuntime_manager.go): the pod's sandboxes by UID label, newest
// first, PodSandboxStatus for each, its containers by label, ContainerStatus for each (NotFound
// skipped: the container went away between list and status).
func (k *Kubelet) PodStatus(ctx context.Context, uid string) (map[string]runtimeapi.ContainerState, error) {
	ctx = As(ctx, "kubelet")
	sel := map[string]string{LabelPodUID: uid}
	var sbs []*runtimeapi.PodSandbox
	if err := k.do("ListPodSandbox", func() error {
		resp, err := k.Runtime.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{Filter: &runtimeapi.PodSandboxFilter{LabelSelector: sel}})
		if err == nil {
			sbs = resp.Items
		}
		return err
	}); err != nil {
		return nil, err
	}
	sort.Slice(sbs, func(i, j int) bool { return sbs[i].CreatedAt > sbs[j].CreatedAt })
	for _, sb := range sbs {
		if err := k.do("PodSandboxStatus", func() error {
			_, err := k.Runtime.PodSandboxStatus(ctx, &runtimeapi.PodSandboxStatusRequest{PodSandboxId: sb.Id})
			return err
		}); err != nil {
			return nil, err
		}
	}
	var cs []*runtimeapi.Container
	if err := k.do("ListContainers", func() error {
		resp, err := k.Runtime.ListContainers(ctx, &runtimeapi.ListContainersRequest{Filter: &runtimeapi.ContainerFilter{LabelSelector: sel}})
		if err == nil {
			cs = resp.Containers
		}
		return err
	}); err != nil {
		return nil, err
	}
	states := map[string]runtimeapi.ContainerState{}
	for _, c := range cs {
		if err := k.do("ContainerStatus", func() error {
			resp, err := k.Runtime.ContainerStatus(ctx, &runtimeapi.ContainerStatusRequest{ContainerId: c.Id})
			if status.Code(err) == codes.NotFound {
				return nil
			}
			if err == nil {
				states[c.Id] = resp.Status.GetState()
			}
			return err
		}); err != nil {
			return nil, err
		}
	}
	return states, nil
}

// StopPod is killPodWithSyncResult: every running container stopped in parallel (NotFound
// tolerated), then StopPodSandbox, then GetPodStatus, where a container still running is the
// "CRI violation" the kubelet reports (kuberuntime_manager.go killPodWithSyncResult).
func (k *Kubelet) StopPod(ctx context.Context, r *Running, grace int64) error {
	ctx = As(ctx, "kubelet")
	var wg sync.WaitGroup
	errs := make(chan error, len(r.Containers))
	for _, id := range r.Containers {
		wg.Add(1)
		go func(id string) {
			defer wg.Done()
			errs <- k.do("StopContainer", func() error {
				_, err := k.Runtime.StopContainer(ctx, &runtimeapi.StopContainerRequest{ContainerId: id, Timeout: grace})
				if status.Code(err) == codes.NotFound {
					return nil
				}
				return err
			})
		}(id)
	}
	wg.Wait()
	close(errs)
	var all []error
	for err := range errs {
		all = append(all, err)
	}
	if err := errors.Join(all...); err != nil {
		return err
	}
	if err := k.do("StopPodSandbox", func() error {
		_, err := k.Runtime.StopPodSandbox(ctx, &runtimeapi.StopPodSandboxRequest{PodSandboxId: r.SandboxID})
		if status.Code(err) == codes.NotFound {
			return nil
		}
		return err
	}); err != nil {
		return err
	}
	states, err := k.PodStatus(ctx, r.Pod.UID)
	if err != nil {
		return err
	}
	for id, s := range states {
		if s == runtimeapi.ContainerState_CONTAINER_RUNNING {
			return fmt.Errorf("detected running container %s after a successful KillPod, CRI violation", id)
		}
	}
	return nil
}

// RemovePod is the asynchronous clean-up: per container the log manager's and the legacy
// symlink's ContainerStatus, then RemoveContainer; then the sandbox GC's StopPodSandbox and
// RemovePodSandbox (kuberuntime_gc.go evictSandboxes).
func (k *Kubelet) RemovePod(ctx context.Context, r *Running) error {
	ctx = As(ctx, "kubelet")
	ids := make([]string, 0, len(r.Containers))
	for _, id := range r.Containers {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		for i := 0; i < 2; i++ {
			if err := k.do("ContainerStatus", func() error {
				_, err := k.Runtime.ContainerStatus(ctx, &runtimeapi.ContainerStatusRequest{ContainerId: id})
				if status.Code(err) == codes.NotFound {
					return nil
				}
				return err
			}); err != nil {
				return err
			}
		}
		if err := k.do("RemoveContainer", func() error {
			_, err := k.Runtime.RemoveContainer(ctx, &runtimeapi.RemoveContainerRequest{ContainerId: id})
			return err
		}); err != nil {
			return err
		}
	}
	if err := k.do("StopPodSandbox", func() error {
		_, err := k.Runtime.StopPodSandbox(ctx, &runtimeapi.StopPodSandboxRequest{PodSandboxId: r.SandboxID})
		return err
	}); err != nil {
		return err
	}
	return k.do("RemovePodSandbox", func() error {
		_, err := k.Runtime.RemovePodSandbox(ctx, &runtimeapi.RemovePodSandboxRequest{PodSandboxId: r.SandboxID})
		return err
	})
}
