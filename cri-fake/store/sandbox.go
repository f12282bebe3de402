package store

import (
	"strconv"
	"sync"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// Sandbox is a pod sandbox. The fields outside the status are fixed once the sandbox is in the
// store; the status changes only through the guarded methods.
type Sandbox struct {
	ID   string
	Name string // the reserved name: <name>_<namespace>_<uid>_<attempt>
	// Config is the sandbox's config, packed: it is kept for the sandbox's life.
	Config         *PackedSandboxConfig
	RuntimeHandler string
	CreatedAt      int64 // unix nanoseconds
	// NetNS is the network namespace path ("" for host-network sandboxes).
	NetNS string
	// IPs are the pod IPs, the primary first (from the CNI result).
	IPs []string
	// CNIResult is the CNI ADD result as JSON (verbose PodSandboxStatus shows it).
	CNIResult []byte
	// LogDirectory is where the sandbox's container logs go (config's, or one under the root dir).
	LogDirectory string

	mu     sync.RWMutex
	status SandboxStatus
}

// SandboxStatus is the mutable part of a sandbox.
type SandboxStatus struct {
	State runtimeapi.PodSandboxState
	// NetworkDown is true once the CNI DEL has succeeded (a second StopPodSandbox skips it).
	NetworkDown bool
	// Resources are the pod-level resources from UpdatePodSandboxResources.
	Resources *runtimeapi.LinuxContainerResources
}

// IsHostNetwork reports whether the sandbox uses the node's network namespace.
func (s *Sandbox) IsHostNetwork() bool {
	return s.Config.NamespaceOptions().GetNetwork() == runtimeapi.NamespaceMode_NODE
}

// Status returns a copy of the mutable state.
func (s *Sandbox) Status() SandboxStatus {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.status
}

// SetNotReady moves the sandbox to NOTREADY (StopPodSandbox); it is idempotent.
func (s *Sandbox) SetNotReady() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.status.State = runtimeapi.PodSandboxState_SANDBOX_NOTREADY
}

// SetNetworkDown records a successful CNI DEL.
func (s *Sandbox) SetNetworkDown() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.status.NetworkDown = true
}

// SetResources records pod-level resources.
func (s *Sandbox) SetResources(r *runtimeapi.LinuxContainerResources) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.status.Resources = r
}

// RestoreStatus sets the status of a sandbox loaded from the state directory.
func (s *Sandbox) RestoreStatus(st SandboxStatus) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.status = st
}

// SandboxName is the name containerd reserves for a sandbox: two RunPodSandbox calls with the
// same name, namespace, uid and attempt are the same pod and the second is refused.
func SandboxName(m *runtimeapi.PodSandboxMetadata) string {
	return m.GetName() + "_" + m.GetNamespace() + "_" + m.GetUid() + "_" + strconv.FormatUint(uint64(m.GetAttempt()), 10)
}

// SandboxStore holds the sandboxes.
type SandboxStore struct {
	idx  index[*Sandbox]
	maps stringMaps // the sandboxes' labels, annotations and namespace options, equal ones shared
}

// NewSandboxStore returns an empty store.
func NewSandboxStore() *SandboxStore {
	return &SandboxStore{idx: newIndex[*Sandbox](), maps: newStringMaps()}
}

// Reserve claims the sandbox name for id before the (slow) network setup, so a concurrent
// duplicate RunPodSandbox fails fast instead of creating a second sandbox.
func (s *SandboxStore) Reserve(name, id string) error { return s.idx.reserve(name, id) }

// Release frees a name (after a failed RunPodSandbox or RemovePodSandbox).
func (s *SandboxStore) Release(name string) { s.idx.release(name) }

// Add inserts a sandbox; a new Sandbox is READY (the zero PodSandboxState). Its labels,
// annotations and namespace options become the store's shared ones.
func (s *SandboxStore) Add(sb *Sandbox) {
	s.maps.shareSandbox(sb)
	s.idx.add(sb.ID, sb.Config.GetLabels()[PodUIDLabel], sb)
}

// Get finds a sandbox by ID or unique ID prefix.
func (s *SandboxStore) Get(idOrPrefix string) (*Sandbox, error) { return s.idx.get(idOrPrefix) }

// Delete removes a sandbox and frees its name.
func (s *SandboxStore) Delete(sb *Sandbox) {
	s.idx.remove(sb.ID, sb.Config.GetLabels()[PodUIDLabel])
	s.idx.release(sb.Name)
	s.maps.releaseSandbox(sb)
}

// List returns every sandbox in creation order.
func (s *SandboxStore) List() []*Sandbox { return s.idx.list() }

// InPod returns the sandboxes labelled io.kubernetes.pod.uid=uid, in creation order.
func (s *SandboxStore) InPod(uid string) []*Sandbox { return s.idx.inPod(uid) }

// Len is the number of sandboxes.
func (s *SandboxStore) Len() int { return s.idx.len() }
