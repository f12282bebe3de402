package runtime

import (
	"context"
	"path/filepath"
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/plugsim/plugsim/cri-fake/images"
	"github.com/plugsim/plugsim/cri-fake/store"
	"github.com/plugsim/plugsim/cri-fake/task"
	"github.com/plugsim/plugsim/internal/pathlimit"
)

// CreateContainer creates a CREATED container in a READY sandbox. The image must already be
// pulled (containerd resolves it in its local store; the kubelet pulls first); the name
// <container>_<pod>_<namespace>_<uid>_<attempt> is reserved; the log path is the sandbox's log
// directory joined with the config's log_path, the absolute path ContainerStatus reports.
func (s *Service) CreateContainer(ctx context.Context, req *runtimeapi.CreateContainerRequest) (_ *runtimeapi.CreateContainerResponse, retErr error) {
	cfg := req.GetConfig()
	if cfg == nil || cfg.GetMetadata() == nil || cfg.GetMetadata().GetName() == "" {
		return nil, status.Error(codes.InvalidArgument, "container config must include metadata with a name")
	}
	if cfg.GetImage().GetImage() == "" {
		return nil, status.Errorf(codes.InvalidArgument, "container %q: config.image.image is empty", cfg.GetMetadata().GetName())
	}
	sb, err := s.sandboxes.Get(req.GetPodSandboxId())
	if err != nil {
		return nil, storeError(err, "failed to find sandbox "+req.GetPodSandboxId())
	}
	if sb.Status().State != runtimeapi.PodSandboxState_SANDBOX_READY {
		return nil, status.Errorf(codes.FailedPrecondition, "sandbox %s is not ready: containers can only be created in a READY sandbox", sb.ID)
	}
	spec, img, err := s.containerSpec(sb, newID(), cfg)
	if err != nil {
		return nil, err
	}
	if err := s.containers.Reserve(spec.Name, spec.ID); err != nil {
		return nil, status.Errorf(codes.AlreadyExists, "failed to reserve container name %q: %v", spec.Name, err)
	}
	defer func() {
		if retErr != nil {
			s.containers.Release(spec.Name)
		}
	}()
	if err := s.validateTask(sb, spec, img); err != nil {
		return nil, err
	}
	c := store.NewContainer(spec)
	s.containers.Add(c)
	s.persistContainer(c)
	s.emit(runtimeapi.ContainerEventType_CONTAINER_CREATED_EVENT, sb, c)
	return &runtimeapi.CreateContainerResponse{ContainerId: spec.ID}, nil
}

// containerSpec checks a container config against its sandbox and the pulled images as
// CreateContainer does, and works out what is fixed at creation: the reserved name
// <container>_<pod>_<namespace>_<uid>_<attempt>, the log path, the image and its reference, the
// stop signal and the user.
func (s *Service) containerSpec(sb *store.Sandbox, id string, cfg *runtimeapi.ContainerConfig) (store.ContainerSpec, images.Image, error) {
	if err := validateSecurity(cfg); err != nil {
		return store.ContainerSpec{}, images.Image{}, err
	}
	if err := s.checkImageVolumes(cfg); err != nil {
		return store.ContainerSpec{}, images.Image{}, err
	}
	img, ok := s.images.Store().Get(cfg.GetImage().GetImage())
	if !ok {
		return store.ContainerSpec{}, images.Image{}, status.Errorf(codes.NotFound, "failed to resolve image %q: image not found (pull it first)", cfg.GetImage().GetImage())
	}
	logPath, err := containerLogPath(sb.LogDirectory, cfg.GetLogPath())
	if err != nil {
		return store.ContainerSpec{}, images.Image{}, err
	}
	imageRef := img.ID
	if len(img.RepoDigests) > 0 {
		imageRef = img.RepoDigests[0]
	}
	stop := cfg.GetStopSignal()
	if stop == runtimeapi.Signal_SIGNAL_RUNTIME_DEFAULT {
		stop = signalName(img.Config.StopSignal)
	}
	if stop == runtimeapi.Signal_SIGNAL_RUNTIME_DEFAULT {
		stop = runtimeapi.Signal_SIGNAL_SIGTERM
	}
	imageName := cfg.GetImage().GetImage()
	if len(img.RepoTags) > 0 {
		imageName = img.RepoTags[0]
	}
	return store.ContainerSpec{
		StopSignal: stop,
		ImageName:  imageName,
		ID:         id,
		Name:       store.ContainerName(cfg.GetMetadata(), sb.Config.GetMetadata()),
		SandboxID:  sb.ID,
		Config:     store.Pack(cfg),
		ImageID:    img.ID,
		ImageRef:   imageRef,
		LogPath:    logPath,
		CreatedAt:  s.now().UnixNano(),
		User:       containerUser(cfg, img.Config),
	}, img, nil
}

// validateTask lets the launcher refuse, at creation, a container whose task cannot be built,
// the way containerd reports "executable file not found" at CreateContainer.
func (s *Service) validateTask(sb *store.Sandbox, spec store.ContainerSpec, img images.Image) error {
	if err := s.launcher.Validate(s.taskSpec(sb, spec, img)); err != nil {
		return status.Errorf(codes.Unknown, "failed to generate container %q spec: %v", spec.Config.GetMetadata().GetName(), err)
	}
	return nil
}

// taskSpec is what the launcher is told about a container of sandbox sb.
func (s *Service) taskSpec(sb *store.Sandbox, spec store.ContainerSpec, img images.Image) task.Spec {
	cfg := spec.Config.Unpack()
	return task.Spec{ContainerID: spec.ID, SandboxID: sb.ID, RuntimeHandler: sb.RuntimeHandler, Config: cfg, Packed: spec.Config,
		SandboxConfig: sb.Config.Unpack(), SandboxPacked: sb.Config, Image: img, LogPath: spec.LogPath, NetNS: sb.NetNS, RealNetNS: s.realNetNS(), PodIPs: sb.IPs,
		ImageVolumes: s.imageVolumes(cfg)}
}

// containerLogPath is the container's log file: the sandbox's log directory joined with the
// config's log_path, which the CRI defines as relative to it ("containerName/Instance#.log").
// containerd joins the two with filepath.Join and checks neither
// (internal/cri/server/container_create.go), so a log_path with enough ".." lands anywhere on
// the host, and it creates and appends to that file as root. cri-fake refuses the
// log_paths that leave the directory that way, one naming the directory itself, and one the
// kernel could not open (a name over NAME_MAX, a path over PATH_MAX). Otherwise it
// gives containerd's answer, so an absolute log_path lands inside the directory as Join makes it.
func containerLogPath(dir, logPath string) (string, error) {
	if logPath == "" {
		return "", nil
	}
	if strings.IndexByte(logPath, 0) >= 0 {
		return "", status.Errorf(codes.InvalidArgument, "log_path %q contains a NUL byte", logPath)
	}
	p := filepath.Join(dir, logPath)
	rel, err := filepath.Rel(dir, p)
	if err != nil || !filepath.IsLocal(rel) || rel == "." {
		return "", status.Errorf(codes.InvalidArgument, "log_path %q leads outside the sandbox's log_directory %q (to %q); it must name a file inside it", logPath, dir, p)
	}
	// The kernel would refuse these with ENAMETOOLONG only when the log is opened, after the
	// container was created; say so at CreateContainer, where the client can act on it.
	if err := pathlimit.Check(p); err != nil {
		return "", status.Errorf(codes.InvalidArgument, "log_path %.40q...: the log file's path: %v", logPath, err)
	}
	return p, nil
}

// validateSecurity rejects what containerd rejects before creating anything.
func validateSecurity(cfg *runtimeapi.ContainerConfig) error {
	sc := cfg.GetLinux().GetSecurityContext()
	if sc.GetRunAsGroup() != nil && sc.GetRunAsUser() == nil && sc.GetRunAsUsername() == "" {
		return status.Errorf(codes.InvalidArgument, "container %q: user group %d is specified without user (run_as_group needs run_as_user or run_as_username)", cfg.GetMetadata().GetName(), sc.GetRunAsGroup().GetValue())
	}
	return nil
}
