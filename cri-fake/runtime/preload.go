package runtime

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/plugsim/plugsim/cri-fake/images"
	"github.com/plugsim/plugsim/cri-fake/network"
	"github.com/plugsim/plugsim/cri-fake/store"
	"github.com/plugsim/plugsim/harness/fixtures"
)

// Preload puts fixtures in the runtime before it serves: the images (through the image service),
// then the pods, then the containers, each through the checks its RPC makes (RunPodSandbox's
// config and runtime handler, CreateContainer's image and name, the launcher's Validate) and
// through the same code where that code has effects: a READY pod's network is set up as
// RunPodSandbox sets it up (the CNI ADD runs), a RUNNING container's process is started as
// StartContainer starts it. A NOTREADY pod has no network (as after StopPodSandbox), CREATED and
// EXITED containers have no process.
//
// Whatever can be checked without effects is checked for every entry before anything changes; if
// a later step fails (a CNI ADD, the launcher's Validate, which needs the pod's network, a process
// start), what was done is undone the way RemovePodSandbox undoes it and the images are put back,
// so a failed Preload leaves the runtime as it was. The error names the fixture's source and
// entry.
func (s *Service) Preload(ctx context.Context, f *fixtures.CRI) (retErr error) {
	if f.Empty() {
		return nil
	}
	undoImages, err := s.images.Preload(f)
	if err != nil {
		return err
	}
	defer func() {
		if retErr != nil {
			undoImages()
		}
	}()
	now := s.now()
	pods, err := s.planPods(f, now)
	if err != nil {
		return err
	}
	podTimes(f, pods, now)
	ctrs, err := s.planContainers(f, pods, now)
	if err != nil {
		return err
	}
	return s.applyPlan(ctx, f, pods, ctrs)
}

type plannedPod struct {
	i     int
	fx    *fixtures.Pod
	sb    *store.Sandbox
	ready bool
}

type plannedContainer struct {
	i   int
	fx  *fixtures.Container
	pod *plannedPod
	img images.Image
	c   *store.Container
	st  store.ContainerStatus
}

// fixtureID derives an ID from an object's reserved name, so a fixture without IDs gives the same
// IDs in every run.
func fixtureID(kind, name string) string {
	sum := sha256.Sum256([]byte("plugsim/fixture/" + kind + "/" + name))
	return hex.EncodeToString(sum[:])
}

// fixtureState reads a state as a fixture may spell it: RUNNING, running, CONTAINER_RUNNING.
func fixtureState(s, prefix, def string, valid ...string) (string, error) {
	if s == "" {
		return def, nil
	}
	n := strings.TrimPrefix(strings.ToUpper(s), prefix)
	if !slices.Contains(valid, n) {
		return "", fmt.Errorf("state %q: want %s", s, strings.Join(valid, ", "))
	}
	return n, nil
}

// rpcMessage is the message of an RPC check's status error.
func rpcMessage(err error) string { return status.Convert(err).Message() }

func (s *Service) planPods(f *fixtures.CRI, now time.Time) ([]*plannedPod, error) {
	var (
		out   []*plannedPod
		names = map[string]int{}
		ids   = map[string]int{}
		nsKey = map[string]int{}
		ips   = map[string]int{}
	)
	_, builtin := s.network.(*network.Internal)
	for i := range f.Pods {
		fx := &f.Pods[i]
		bad := func(format string, args ...any) error { return f.Errorf("pods", i, fx.Name, format, args...) }
		state, err := fixtureState(fx.State, "SANDBOX_", fixtures.Ready, fixtures.Ready, fixtures.NotReady)
		if err != nil {
			return nil, bad("%v", err)
		}
		cfg := &runtimeapi.PodSandboxConfig{
			Metadata:     &runtimeapi.PodSandboxMetadata{Name: fx.Name, Namespace: fx.Namespace, Uid: fx.UID, Attempt: fx.Attempt},
			Hostname:     fx.Hostname,
			LogDirectory: fx.LogDirectory,
			Labels:       fx.Labels,
			Annotations:  fx.Annotations,
		}
		if fx.HostNetwork {
			cfg.Linux = &runtimeapi.LinuxPodSandboxConfig{SecurityContext: &runtimeapi.LinuxSandboxSecurityContext{
				NamespaceOptions: &runtimeapi.NamespaceOption{Network: runtimeapi.NamespaceMode_NODE}}}
		}
		if err := validateSandboxConfig(cfg); err != nil {
			return nil, bad("%s", rpcMessage(err))
		}
		if !s.handlers[fx.RuntimeHandler] {
			return nil, bad("no runtime for %q is configured (runtime handlers: %v)", fx.RuntimeHandler, s.opts.RuntimeHandlers)
		}
		if fx.LogDirectory != "" && !filepath.IsAbs(fx.LogDirectory) {
			return nil, bad("logDirectory %q: want an absolute path", fx.LogDirectory)
		}
		name := store.SandboxName(cfg.GetMetadata())
		if j, ok := names[name]; ok {
			return nil, bad("its sandbox name %q (name_namespace_uid_attempt) is also pods[%d]'s", name, j)
		}
		names[name] = i
		id := fx.ID
		if id == "" {
			id = fixtureID("sandbox", name)
		} else if err := store.ValidateID(id); err != nil {
			return nil, bad("%v", err)
		}
		if j, ok := ids[id]; ok {
			return nil, bad("id %q is also pods[%d]'s", id, j)
		}
		if sb, err := s.sandboxes.Get(id); err == nil && sb.ID == id {
			return nil, bad("id %q is a sandbox cri-fake already holds", id)
		}
		ids[id] = i
		// Network namespace paths keep 32 characters of the ID.
		if j, ok := nsKey[id[:min(len(id), 32)]]; ok {
			return nil, bad("id %q starts with the same 32 characters as pods[%d]'s, which would give both one network namespace path", id, j)
		}
		nsKey[id[:min(len(id), 32)]] = i
		for k, ip := range fx.IPs {
			if net.ParseIP(ip) == nil {
				return nil, bad("ips[%d] %q is not an IP address", k, ip)
			}
		}
		ready := state == fixtures.Ready
		if len(fx.IPs) > 0 {
			switch {
			case fx.HostNetwork:
				return nil, bad("ips: a host-network pod has the node's addresses, not its own")
			case ready && !builtin:
				return nil, bad("ips: with CNI on, the CNI plugin gives a READY pod its addresses (ips can be given with CNI off, or for a NOTREADY pod)")
			case ready:
				for _, ip := range fx.IPs {
					if j, ok := ips[ip]; ok {
						return nil, bad("ip %s is also pods[%d]'s", ip, j)
					}
					ips[ip] = i
				}
			}
		}
		sb := &store.Sandbox{ID: id, Name: name, Config: store.PackSandbox(cfg), RuntimeHandler: fx.RuntimeHandler, LogDirectory: fx.LogDirectory}
		if !fx.CreatedAt.IsZero() {
			sb.CreatedAt = fx.CreatedAt.UnixNano() // else podTimes gives it one
		}
		if sb.LogDirectory == "" {
			sb.LogDirectory = filepath.Join(s.opts.RootDir, "pods", id, "logs")
		}
		out = append(out, &plannedPod{i: i, fx: fx, sb: sb, ready: ready})
	}
	return out, nil
}

// podTimes gives the pods without a createdAt one: the earliest of now and the times their
// containers give, so that leaving a pod's time out never puts it after its containers.
func podTimes(f *fixtures.CRI, pods []*plannedPod, now time.Time) {
	earliest := map[*plannedPod]time.Time{}
	for _, p := range pods {
		if p.fx.CreatedAt.IsZero() {
			earliest[p] = now
		}
	}
	for i := range f.Containers {
		c := &f.Containers[i]
		p, err := findPod(pods, c.Pod)
		if err != nil {
			continue // reported with the container
		}
		t, ok := earliest[p]
		if !ok {
			continue
		}
		for _, ct := range []time.Time{c.CreatedAt, c.StartedAt, c.FinishedAt} {
			if !ct.IsZero() && ct.Before(t) {
				t = ct
			}
		}
		earliest[p] = t
	}
	for p, t := range earliest {
		p.sb.CreatedAt = t.UnixNano()
	}
}

// findPod resolves a container's pod: a pods entry's ID, name or namespace/name.
func findPod(pods []*plannedPod, ref string) (*plannedPod, error) {
	for _, p := range pods {
		if p.sb.ID == ref {
			return p, nil
		}
	}
	var found []*plannedPod
	for _, p := range pods {
		if p.fx.Name == ref || p.fx.Namespace+"/"+p.fx.Name == ref {
			found = append(found, p)
		}
	}
	switch len(found) {
	case 0:
		return nil, fmt.Errorf("pod %q not found (name a pods entry by its id, name or namespace/name)", ref)
	case 1:
		return found[0], nil
	}
	return nil, fmt.Errorf("pod %q is ambiguous: pods[%d] and pods[%d] both match; give its id or namespace/name", ref, found[0].i, found[1].i)
}

func (s *Service) planContainers(f *fixtures.CRI, pods []*plannedPod, now time.Time) ([]*plannedContainer, error) {
	var (
		out   []*plannedContainer
		names = map[string]int{}
		ids   = map[string]int{}
	)
	podIDs := map[string]int{}
	for _, p := range pods {
		podIDs[p.sb.ID] = p.i
	}
	for i := range f.Containers {
		fx := &f.Containers[i]
		bad := func(format string, args ...any) error { return f.Errorf("containers", i, fx.Name, format, args...) }
		state, err := fixtureState(fx.State, "CONTAINER_", fixtures.Running, fixtures.Created, fixtures.Running, fixtures.Exited)
		if err != nil {
			return nil, bad("%v", err)
		}
		if fx.Name == "" {
			return nil, bad("name is required (CreateContainer requires metadata.name)")
		}
		if fx.Pod == "" {
			return nil, bad("pod is required: the id, name or namespace/name of its pods entry")
		}
		pod, err := findPod(pods, fx.Pod)
		if err != nil {
			return nil, bad("%v", err)
		}
		if state == fixtures.Running && !pod.ready {
			return nil, bad("state RUNNING: pod %q is NOTREADY, and a stopped pod has no running containers (StopPodSandbox stops them all)", fx.Pod)
		}
		if fx.Image == "" {
			return nil, bad("image is required (CreateContainer requires config.image.image)")
		}
		if _, ok := s.images.Store().Get(fx.Image); !ok {
			if _, err := images.ParseReference(fx.Image); err != nil && !images.IsID(fx.Image) {
				return nil, bad("image: %v", err)
			}
			return nil, bad("image %q is not among the images cri-fake holds (list it under cri.images), as CreateContainer needs it pulled", fx.Image)
		}
		cfg := &runtimeapi.ContainerConfig{
			Metadata:    &runtimeapi.ContainerMetadata{Name: fx.Name, Attempt: fx.Attempt},
			Image:       &runtimeapi.ImageSpec{Image: fx.Image},
			Command:     fx.Command,
			Args:        fx.Args,
			WorkingDir:  fx.WorkingDir,
			Labels:      fx.Labels,
			Annotations: fx.Annotations,
			LogPath:     fx.LogPath,
		}
		for k, kv := range fx.Env {
			name, value, ok := strings.Cut(kv, "=")
			if !ok || name == "" {
				return nil, bad("env[%d] %q: want NAME=value", k, kv)
			}
			cfg.Envs = append(cfg.Envs, &runtimeapi.KeyValue{Key: name, Value: []byte(value)})
		}
		if lp := fx.LogPath; lp != "" && (filepath.IsAbs(lp) || slices.Contains(strings.Split(filepath.ToSlash(lp), "/"), "..")) {
			return nil, bad("logPath %q: want a path inside the pod's log directory (relative, without ..)", lp)
		}
		name := store.ContainerName(cfg.GetMetadata(), pod.sb.Config.GetMetadata())
		if j, ok := names[name]; ok {
			return nil, bad("its container name %q (container_pod_namespace_uid_attempt) is also containers[%d]'s", name, j)
		}
		names[name] = i
		id := fx.ID
		if id == "" {
			id = fixtureID("container", name)
		} else if err := store.ValidateID(id); err != nil {
			return nil, bad("%v", err)
		}
		if j, ok := ids[id]; ok {
			return nil, bad("id %q is also containers[%d]'s", id, j)
		}
		if j, ok := podIDs[id]; ok {
			return nil, bad("id %q is also pods[%d]'s (sandboxes and containers share one ID space, as in containerd)", id, j)
		}
		if c, err := s.containers.Get(id); err == nil && c.ID == id {
			return nil, bad("id %q is a container cri-fake already holds", id)
		}
		ids[id] = i
		st, created, err := containerTimes(fx, state, pod, now)
		if err != nil {
			return nil, bad("%v", err)
		}
		spec, img, err := s.containerSpec(pod.sb, id, cfg)
		if err != nil {
			return nil, bad("%s", rpcMessage(err))
		}
		spec.CreatedAt = created
		out = append(out, &plannedContainer{i: i, fx: fx, pod: pod, img: img, c: store.NewContainer(spec), st: st})
	}
	return out, nil
}

// containerTimes works out a container's status from its state. Times left out are filled in so
// that pod created ≤ created ≤ started ≤ finished holds: createdAt is the earliest of now and the
// container's other times (but not before its pod's), startedAt defaults to createdAt, finishedAt
// to startedAt. Only the states that have a start, an end or an exit may give one.
func containerTimes(fx *fixtures.Container, state string, pod *plannedPod, now time.Time) (store.ContainerStatus, int64, error) {
	st := store.ContainerStatus{}
	podCreated := time.Unix(0, pod.sb.CreatedAt).UTC()
	created := fx.CreatedAt
	if created.IsZero() {
		created = now
		for _, t := range []time.Time{fx.StartedAt, fx.FinishedAt} {
			if !t.IsZero() && t.Before(created) {
				created = t
			}
		}
		if created.Before(podCreated) {
			created = podCreated
		}
	}
	if created.Before(podCreated) {
		return st, 0, fmt.Errorf("createdAt %s is before its pod's createdAt %s", created.Format(time.RFC3339Nano), podCreated.Format(time.RFC3339Nano))
	}
	onlyIf := func(field string, given bool, states ...string) error {
		if given && !slices.Contains(states, state) {
			return fmt.Errorf("%s: a %s container has none (only %s)", field, state, strings.Join(states, " or "))
		}
		return nil
	}
	for _, c := range []struct {
		field  string
		given  bool
		states []string
	}{
		{"startedAt", !fx.StartedAt.IsZero(), []string{fixtures.Running, fixtures.Exited}},
		{"finishedAt", !fx.FinishedAt.IsZero(), []string{fixtures.Exited}},
		{"exitCode", fx.ExitCode != 0, []string{fixtures.Exited}},
		{"reason", fx.Reason != "", []string{fixtures.Exited}},
		{"message", fx.Message != "", []string{fixtures.Exited}},
	} {
		if err := onlyIf(c.field, c.given, c.states...); err != nil {
			return st, 0, err
		}
	}
	switch state {
	case fixtures.Created:
		st.State = runtimeapi.ContainerState_CONTAINER_CREATED
		return st, created.UnixNano(), nil
	case fixtures.Running:
		st.State = runtimeapi.ContainerState_CONTAINER_RUNNING
	case fixtures.Exited:
		st.State = runtimeapi.ContainerState_CONTAINER_EXITED
	}
	started := fx.StartedAt
	if started.IsZero() {
		started = created
	}
	if started.Before(created) {
		return st, 0, fmt.Errorf("startedAt %s is before createdAt %s", started.Format(time.RFC3339Nano), created.Format(time.RFC3339Nano))
	}
	st.StartedAt = started.UnixNano()
	if state == fixtures.Running {
		if started.After(now) {
			// Its process starts now; an exit recorded later must not come before the start.
			return st, 0, fmt.Errorf("startedAt %s is in the future: a RUNNING container's process starts when cri-fake does", started.Format(time.RFC3339Nano))
		}
		return st, created.UnixNano(), nil
	}
	finished := fx.FinishedAt
	if finished.IsZero() {
		finished = started
	}
	if finished.Before(started) {
		return st, 0, fmt.Errorf("finishedAt %s is before startedAt %s", finished.Format(time.RFC3339Nano), started.Format(time.RFC3339Nano))
	}
	st.FinishedAt = finished.UnixNano()
	st.ExitCode, st.Reason, st.Message = fx.ExitCode, fx.Reason, fx.Message
	if st.Reason == "" {
		// containerd's rule, as for a process that ends by itself.
		st.Reason = "Completed"
		if st.ExitCode != 0 {
			st.Reason = "Error"
		}
	}
	return st, created.UnixNano(), nil
}

// applyPlan makes the planned pods and containers, undoing everything if a step fails.
func (s *Service) applyPlan(ctx context.Context, f *fixtures.CRI, pods []*plannedPod, ctrs []*plannedContainer) (retErr error) {
	var applied []*store.Sandbox
	var reservedIPs []string // sandbox IDs holding an address of the built-in allocator
	defer func() {
		if retErr == nil {
			return
		}
		ctx := context.WithoutCancel(ctx)
		for i := len(applied) - 1; i >= 0; i-- {
			if _, err := s.RemovePodSandbox(ctx, &runtimeapi.RemovePodSandboxRequest{PodSandboxId: applied[i].ID}); err != nil {
				s.opts.Logf("undo preloaded sandbox %s: %v", applied[i].ID, err)
			}
		}
		for _, id := range reservedIPs {
			s.network.Teardown(ctx, network.Pod{ID: id})
		}
	}()
	// Addresses given for the built-in allocator are taken before any pod gets one from it.
	if in, ok := s.network.(*network.Internal); ok {
		for _, p := range pods {
			if p.ready && len(p.fx.IPs) > 0 {
				in.Reserve(p.sb.ID, p.fx.IPs[0])
				reservedIPs = append(reservedIPs, p.sb.ID)
			}
		}
	}
	for _, p := range pods {
		sb := p.sb
		if err := s.sandboxes.Reserve(sb.Name, sb.ID); err != nil {
			return f.Errorf("pods", p.i, p.fx.Name, "%v", err)
		}
		switch {
		case !p.ready:
			sb.IPs = p.fx.IPs
			sb.RestoreStatus(store.SandboxStatus{State: runtimeapi.PodSandboxState_SANDBOX_NOTREADY, NetworkDown: true})
		case !sb.IsHostNetwork():
			if err := s.setupNetwork(ctx, sb, sb.Config.Unpack()); err != nil {
				s.sandboxes.Release(sb.Name)
				return f.Errorf("pods", p.i, p.fx.Name, "%s", rpcMessage(err))
			}
			if len(p.fx.IPs) > 0 {
				sb.IPs = p.fx.IPs
			}
		}
		s.sandboxes.Add(sb)
		applied = append(applied, sb)
		s.persistSandbox(sb)
	}
	for _, pc := range ctrs {
		c, sb := pc.c, pc.pod.sb
		bad := func(format string, args ...any) error {
			return f.Errorf("containers", pc.i, pc.fx.Name, format, args...)
		}
		if err := s.containers.Reserve(c.Name, c.ID); err != nil {
			return bad("%v", err)
		}
		if err := s.validateTask(sb, c.ContainerSpec, pc.img); err != nil {
			s.containers.Release(c.Name)
			return bad("%s", rpcMessage(err))
		}
		s.containers.Add(c)
		switch pc.st.State {
		case runtimeapi.ContainerState_CONTAINER_CREATED:
		case runtimeapi.ContainerState_CONTAINER_EXITED:
			c.RestoreStatus(pc.st)
			s.releaseContainer(c.ID) // the spec Validate kept is for a start that never comes
		case runtimeapi.ContainerState_CONTAINER_RUNNING:
			if err := c.SetStarting(); err != nil {
				return bad("%v", err)
			}
			t, err := s.launcher.Start(ctx, s.taskSpec(sb, c.ContainerSpec, pc.img))
			if err != nil {
				c.SetStartFailed(s.now().UnixNano(), err.Error())
				return bad("its process does not start: %v", err)
			}
			c.SetRunning(pc.st.StartedAt, t)
			// Saved before the exit can be recorded (and saved), as StartContainer does.
			s.persistContainer(c)
			s.watch(sb, c, t)
			continue
		}
		s.persistContainer(c)
	}
	return nil
}
