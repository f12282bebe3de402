package store

import (
	"fmt"
	"strconv"
	"strings"
	"sync"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/plugsim/plugsim/cri-fake/task"
)

// ContainerSpec is the part of a container fixed at creation.
type ContainerSpec struct {
	ID        string
	Name      string // the reserved name
	SandboxID string
	// Config is the container's config, packed: it is kept for the container's life.
	Config *PackedConfig
	// ImageID is the resolved image ID (Image.id = PullImageResponse.image_ref = image_id).
	ImageID string
	// ImageRef is what ContainerStatus.image_ref reports: the repo digest when the image has one,
	// as containerd does, else the ID.
	ImageRef string
	// LogPath is the absolute log file path (sandbox log directory + config log_path), or "".
	LogPath   string
	CreatedAt int64
	// StopSignal is the effective stop signal: the config's, else the image's, else SIGTERM.
	StopSignal runtimeapi.Signal
	// ImageName is what ContainerStatus.image.image shows: the first tag of the image, or the
	// reference the container was created with.
	ImageName string
	// User is what ContainerStatus.user shows, fixed at creation; nil for a container restored
	// from a state directory (the runtime works it out again).
	User *runtimeapi.ContainerUser
}

// Container is a container: its spec and its guarded status.
type Container struct {
	ContainerSpec

	mu     sync.RWMutex
	status ContainerStatus
	// exited is closed once the container has become EXITED; made by Exited (most containers are
	// never waited on: 96 bytes each saved at 30,000 in cri-fake/server's BenchmarkLargeNode).
	exited chan struct{}
	// task is the started container's main process, set while the container is RUNNING.
	task task.Task

	// saving orders the container's record on disk: a save (its exit, recorded by the task's
	// exit notice) and the removal's delete never interleave, and once forgotten is set no save
	// writes the record again — otherwise an exit recorded just as RemoveContainer deletes the
	// file could bring it back, a container that reappears after a restart.
	saving    sync.Mutex
	forgotten bool
}

// ContainerStatus is the mutable part of a container.
type ContainerStatus struct {
	State      runtimeapi.ContainerState
	StartedAt  int64
	FinishedAt int64
	ExitCode   int32
	Reason     string
	Message    string
	// Resources as created or last updated by UpdateContainerResources.
	Resources *runtimeapi.LinuxContainerResources
	// Starting and Removing block concurrent transitions while a slow step runs.
	Starting bool
	Removing bool
}

// NewContainer returns a CREATED container.
func NewContainer(spec ContainerSpec) *Container {
	n := &Container{ContainerSpec: spec}
	n.status.Resources = spec.Config.Resources()
	return n
}

// Status returns a copy of the mutable state.
func (c *Container) Status() ContainerStatus {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.status
}

// Task returns the task attached by SetRunning, or nil once the container has exited (or before
// it started).
func (c *Container) Task() task.Task {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.task
}

// Exited is closed once the container is EXITED.
func (c *Container) Exited() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.exited == nil {
		c.exited = make(chan struct{})
		if c.status.State == runtimeapi.ContainerState_CONTAINER_EXITED {
			close(c.exited)
		}
	}
	return c.exited
}

func stateName(s runtimeapi.ContainerState) string {
	return strings.TrimPrefix(s.String(), "CONTAINER_")
}

// SetStarting guards StartContainer: only a CREATED container that nobody is starting or
// removing can start (containerd's setContainerStarting).
func (c *Container) SetStarting() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case c.status.State != runtimeapi.ContainerState_CONTAINER_CREATED:
		return fmt.Errorf("container %s is in %s state, only a CREATED container can be started: %w", c.ID, stateName(c.status.State), ErrInvalidState)
	case c.status.Starting:
		return fmt.Errorf("container %s is already being started: %w", c.ID, ErrInvalidState)
	case c.status.Removing:
		return fmt.Errorf("container %s is being removed: %w", c.ID, ErrInvalidState)
	}
	c.status.Starting = true
	return nil
}

// SetRunning completes a start: the container is RUNNING with t as its task.
func (c *Container) SetRunning(startedAt int64, t task.Task) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.status.Starting = false
	c.status.State = runtimeapi.ContainerState_CONTAINER_RUNNING
	c.status.StartedAt = startedAt
	c.task = t
}

// SetStartFailed records a failed start the way containerd does: EXITED, exit code 128,
// reason StartError, and the error as the message.
func (c *Container) SetStartFailed(at int64, msg string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.status.Starting = false
	c.status.State = runtimeapi.ContainerState_CONTAINER_EXITED
	c.status.FinishedAt = at
	c.status.ExitCode = 128
	c.status.Reason = "StartError"
	c.status.Message = msg
	c.closeExited()
}

// closeExited closes exited, if made, once the state is EXITED; c.mu is held.
func (c *Container) closeExited() {
	if c.exited == nil {
		return
	}
	select {
	case <-c.exited:
	default:
		close(c.exited)
	}
}

// SetExited records the end of the task; it reports false when the container was not RUNNING
// (the exit was already recorded).
func (c *Container) SetExited(at int64, code int32, reason, msg string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.status.State != runtimeapi.ContainerState_CONTAINER_RUNNING {
		return false
	}
	c.status.State = runtimeapi.ContainerState_CONTAINER_EXITED
	c.status.FinishedAt = at
	c.status.ExitCode = code
	c.status.Reason = reason
	c.status.Message = msg
	c.task = nil
	c.closeExited()
	return true
}

// SetRemoving guards RemoveContainer: a running or starting container must be stopped first.
func (c *Container) SetRemoving() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case c.status.Starting:
		return fmt.Errorf("container %s is being started: %w", c.ID, ErrInvalidState)
	case c.status.State == runtimeapi.ContainerState_CONTAINER_RUNNING:
		return fmt.Errorf("container %s is still running, stop it before removing it: %w", c.ID, ErrInvalidState)
	case c.status.Removing:
		return fmt.Errorf("container %s is already being removed: %w", c.ID, ErrInvalidState)
	}
	c.status.Removing = true
	return nil
}

// Save runs save, which writes the container's record, unless the record was forgotten.
func (c *Container) Save(save func(*Container) error) error {
	c.saving.Lock()
	defer c.saving.Unlock()
	if c.forgotten {
		return nil
	}
	return save(c)
}

// Forget runs del, which deletes the container's record, and keeps any later Save from writing it.
func (c *Container) Forget(del func(id string) error) error {
	c.saving.Lock()
	defer c.saving.Unlock()
	c.forgotten = true
	return del(c.ID)
}

// ResetRemoving undoes SetRemoving after a failed removal.
func (c *Container) ResetRemoving() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.status.Removing = false
}

// UpdateResources replaces the container's resources; an EXITED container cannot be updated
// (containerd: "container is in EXITED state").
func (c *Container) UpdateResources(r *runtimeapi.LinuxContainerResources) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.status.State == runtimeapi.ContainerState_CONTAINER_EXITED || c.status.State == runtimeapi.ContainerState_CONTAINER_UNKNOWN {
		return fmt.Errorf("container %s is in %s state, its resources cannot be updated: %w", c.ID, stateName(c.status.State), ErrInvalidState)
	}
	c.status.Resources = r
	return nil
}

// RestoreStatus sets the status of a container loaded from the state directory.
func (c *Container) RestoreStatus(st ContainerStatus) {
	c.mu.Lock()
	defer c.mu.Unlock()
	st.Starting, st.Removing = false, false
	c.status = st
	if st.State == runtimeapi.ContainerState_CONTAINER_EXITED {
		c.closeExited()
	}
}

// ContainerName is the name containerd reserves for a container:
// <container>_<pod>_<namespace>_<uid>_<attempt>.
func ContainerName(c *runtimeapi.ContainerMetadata, s *runtimeapi.PodSandboxMetadata) string {
	return c.GetName() + "_" + s.GetName() + "_" + s.GetNamespace() + "_" + s.GetUid() + "_" + strconv.FormatUint(uint64(c.GetAttempt()), 10)
}

// ContainerStore holds the containers.
type ContainerStore struct {
	idx  index[*Container]
	maps stringMaps // the containers' labels and annotations, equal ones shared
}

// NewContainerStore returns an empty store.
func NewContainerStore() *ContainerStore {
	return &ContainerStore{idx: newIndex[*Container](), maps: newStringMaps()}
}

// Reserve claims a container name for an ID.
func (s *ContainerStore) Reserve(name, id string) error { return s.idx.reserve(name, id) }

// Release frees a container name.
func (s *ContainerStore) Release(name string) { s.idx.release(name) }

// Containers are indexed by sandbox through the pod-UID index keyed with a prefix no label
// value can have, so one index serves both lookups.
func sandboxKey(id string) string { return "\x00sandbox/" + id }

// Add inserts a container; its labels, annotations, image, metadata and user become the store's
// shared ones.
func (s *ContainerStore) Add(c *Container) {
	s.maps.share(c)
	s.idx.add(c.ID, c.Config.GetLabels()[PodUIDLabel], c)
	s.idx.add(c.ID, sandboxKey(c.SandboxID), c)
}

// Get finds a container by ID or unique ID prefix.
func (s *ContainerStore) Get(idOrPrefix string) (*Container, error) { return s.idx.get(idOrPrefix) }

// Delete removes a container and frees its name.
func (s *ContainerStore) Delete(c *Container) {
	s.idx.mu.Lock()
	s.idx.unindexLocked(sandboxKey(c.SandboxID), c.ID)
	s.idx.mu.Unlock()
	s.idx.remove(c.ID, c.Config.GetLabels()[PodUIDLabel])
	s.idx.release(c.Name)
	s.maps.release(c)
}

// List returns every container in creation order.
func (s *ContainerStore) List() []*Container { return s.idx.list() }

// InSandbox returns the containers of one sandbox, in creation order.
func (s *ContainerStore) InSandbox(sandboxID string) []*Container {
	return s.idx.inPod(sandboxKey(sandboxID))
}

// InPod returns the containers labelled io.kubernetes.pod.uid=uid, in creation order.
func (s *ContainerStore) InPod(uid string) []*Container { return s.idx.inPod(uid) }

// Len is the number of containers.
func (s *ContainerStore) Len() int { return s.idx.len() }
