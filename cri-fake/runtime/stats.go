package runtime

import (
	"context"
	"errors"
	"hash/fnv"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/plugsim/plugsim/cri-fake/store"
	"github.com/plugsim/plugsim/cri-fake/task"
)

// Synthetic stats: a running container uses a steady, per-container share of a core (2-9
// millicores) and a working set that starts at a per-container base (4-19 MiB) and grows by 256
// bytes per second it runs, capped at +64 MiB. The figures only grow while the container runs and
// freeze when it exits; a created container reports zeros with valid timestamps.

const (
	memGrowthPerSecond = 256
	memGrowthCap       = 64 << 20
	nodeMemory         = 8 << 30
)

func seed(id string) uint64 {
	h := fnv.New64a()
	h.Write([]byte(id))
	return h.Sum64()
}

func (s *Service) cpuMem(c *store.Container, now int64) (*runtimeapi.CpuUsage, *runtimeapi.MemoryUsage) {
	st := c.Status()
	cpu := &runtimeapi.CpuUsage{Timestamp: now, UsageCoreNanoSeconds: &runtimeapi.UInt64Value{}, UsageNanoCores: &runtimeapi.UInt64Value{}}
	mem := &runtimeapi.MemoryUsage{Timestamp: now, WorkingSetBytes: &runtimeapi.UInt64Value{}, UsageBytes: &runtimeapi.UInt64Value{},
		RssBytes: &runtimeapi.UInt64Value{}, AvailableBytes: &runtimeapi.UInt64Value{Value: nodeMemory},
		PageFaults: &runtimeapi.UInt64Value{}, MajorPageFaults: &runtimeapi.UInt64Value{}}
	if st.StartedAt == 0 {
		return cpu, mem
	}
	end := now
	if st.State == runtimeapi.ContainerState_CONTAINER_EXITED && st.FinishedAt > 0 {
		end = st.FinishedAt
	}
	// Asked once: a task's CPU rate is over the time since its previous Usage.
	u, uerr := taskUsage(c)
	if uerr == nil && u.Measured {
		measured(cpu, mem, u)
		return cpu, mem
	}
	ran := max(end-st.StartedAt, 0)
	h := seed(c.ID)
	milli := 2 + h%8
	// A simulated process adds the CPU time its processes held the node's CPUs for (busy loops).
	cpu.UsageCoreNanoSeconds.Value = uint64(ran)*milli/1000 + u.CPUNanos
	if st.State == runtimeapi.ContainerState_CONTAINER_RUNNING {
		cpu.UsageNanoCores.Value = milli*1_000_000 + u.CPUNanoCores
	}
	ws := (4<<20 + (h>>8)%16<<20) + min(uint64(ran/1e9)*memGrowthPerSecond, memGrowthCap)
	if uerr == nil {
		// The simulated process knows what it uses: its processes plus the image behaviour's
		// memoryBytes (the catalog's "use M bytes of memory").
		if m := u.MemoryBytes; m > 0 {
			ws = m + min(uint64(ran/1e9)*memGrowthPerSecond, memGrowthCap)
		}
	}
	mem.WorkingSetBytes.Value = ws
	mem.UsageBytes.Value = ws + ws/8 // page cache on top of the working set
	mem.RssBytes.Value = ws * 3 / 4
	mem.AvailableBytes.Value = nodeMemory - ws
	mem.PageFaults.Value = uint64(ran/1e6) + 1000
	mem.MajorPageFaults.Value = 3
	return cpu, mem
}

func (s *Service) containerStats(c *store.Container, now int64) *runtimeapi.ContainerStats {
	cpu, mem := s.cpuMem(c, now)
	return &runtimeapi.ContainerStats{
		Attributes: &runtimeapi.ContainerAttributes{
			Id: c.ID, Metadata: c.Config.GetMetadata(), Labels: c.Config.GetLabels(), Annotations: c.Config.GetAnnotations(),
		},
		Cpu:    cpu,
		Memory: mem,
		WritableLayer: &runtimeapi.FilesystemUsage{
			Timestamp:  now,
			FsId:       &runtimeapi.FilesystemIdentifier{Mountpoint: s.opts.RootDir},
			UsedBytes:  &runtimeapi.UInt64Value{Value: 4096 + seed(c.ID)%64*4096 + writtenBytes(c)},
			InodesUsed: &runtimeapi.UInt64Value{Value: 3 + seed(c.ID)%16},
		},
	}
}

// ContainerStats reports one container's synthetic usage.
func (s *Service) ContainerStats(ctx context.Context, req *runtimeapi.ContainerStatsRequest) (*runtimeapi.ContainerStatsResponse, error) {
	c, err := s.containers.Get(req.GetContainerId())
	if err != nil {
		return nil, storeError(err, "container "+req.GetContainerId())
	}
	return &runtimeapi.ContainerStatsResponse{Stats: s.containerStats(c, s.now().UnixNano())}, nil
}

// ListContainerStats reports every container matching the filter (ID, sandbox, labels), created,
// running or exited, as containerd does.
func (s *Service) ListContainerStats(ctx context.Context, req *runtimeapi.ListContainerStatsRequest) (*runtimeapi.ListContainerStatsResponse, error) {
	return &runtimeapi.ListContainerStatsResponse{Stats: s.listContainerStats(req.GetFilter())}, nil
}

// StreamContainerStats sends the ListContainerStats result as one message (KEP-5825).
func (s *Service) StreamContainerStats(req *runtimeapi.StreamContainerStatsRequest, stream runtimeapi.RuntimeService_StreamContainerStatsServer) error {
	return stream.Send(&runtimeapi.StreamContainerStatsResponse{ContainerStats: s.listContainerStats(req.GetFilter())})
}

func (s *Service) listContainerStats(f *runtimeapi.ContainerStatsFilter) []*runtimeapi.ContainerStats {
	now := s.now().UnixNano()
	cs := s.filterContainers(f.GetId(), f.GetPodSandboxId(), f.GetLabelSelector())
	out := make([]*runtimeapi.ContainerStats, 0, len(cs))
	for _, c := range cs {
		out = append(out, s.containerStats(c, now))
	}
	return out
}

func (s *Service) sandboxStats(sb *store.Sandbox, now int64) *runtimeapi.PodSandboxStats {
	// The pause process: a few hundred KiB, no CPU to speak of.
	cpu := &runtimeapi.CpuUsage{Timestamp: now, UsageCoreNanoSeconds: &runtimeapi.UInt64Value{}, UsageNanoCores: &runtimeapi.UInt64Value{}}
	mem := &runtimeapi.MemoryUsage{Timestamp: now, WorkingSetBytes: &runtimeapi.UInt64Value{Value: 400 << 10},
		UsageBytes: &runtimeapi.UInt64Value{Value: 512 << 10}, RssBytes: &runtimeapi.UInt64Value{Value: 300 << 10},
		AvailableBytes: &runtimeapi.UInt64Value{}, PageFaults: &runtimeapi.UInt64Value{}, MajorPageFaults: &runtimeapi.UInt64Value{}}
	procs := uint64(1)
	var containers []*runtimeapi.ContainerStats
	for _, c := range s.containers.InSandbox(sb.ID) {
		cs := s.containerStats(c, now)
		containers = append(containers, cs)
		cpu.UsageCoreNanoSeconds.Value += cs.Cpu.UsageCoreNanoSeconds.Value
		cpu.UsageNanoCores.Value += cs.Cpu.UsageNanoCores.Value
		mem.WorkingSetBytes.Value += cs.Memory.WorkingSetBytes.Value
		mem.UsageBytes.Value += cs.Memory.UsageBytes.Value
		mem.RssBytes.Value += cs.Memory.RssBytes.Value
		if c.Status().State == runtimeapi.ContainerState_CONTAINER_RUNNING {
			procs++
		}
	}
	mem.AvailableBytes.Value = nodeMemory - mem.WorkingSetBytes.Value
	linux := &runtimeapi.LinuxPodSandboxStats{
		Cpu:        cpu,
		Memory:     mem,
		Process:    &runtimeapi.ProcessUsage{Timestamp: now, ProcessCount: &runtimeapi.UInt64Value{Value: procs}},
		Containers: containers,
	}
	if !sb.IsHostNetwork() {
		// Traffic grows with the sandbox's age: 2 KiB/s in, 1 KiB/s out.
		age := uint64(max(now-sb.CreatedAt, 0) / 1e9)
		linux.Network = &runtimeapi.NetworkUsage{Timestamp: now, DefaultInterface: &runtimeapi.NetworkInterfaceUsage{
			Name: "eth0", RxBytes: &runtimeapi.UInt64Value{Value: age * 2048}, RxErrors: &runtimeapi.UInt64Value{},
			TxBytes: &runtimeapi.UInt64Value{Value: age * 1024}, TxErrors: &runtimeapi.UInt64Value{},
		}}
		linux.Network.Interfaces = []*runtimeapi.NetworkInterfaceUsage{linux.Network.DefaultInterface}
	}
	return &runtimeapi.PodSandboxStats{
		Attributes: &runtimeapi.PodSandboxAttributes{Id: sb.ID, Metadata: sb.Config.GetMetadata(),
			Labels: sb.Config.GetLabels(), Annotations: sb.Config.GetAnnotations()},
		Linux: linux,
	}
}

// PodSandboxStats reports a sandbox's usage: the sum of its containers plus the pause process.
func (s *Service) PodSandboxStats(ctx context.Context, req *runtimeapi.PodSandboxStatsRequest) (*runtimeapi.PodSandboxStatsResponse, error) {
	sb, err := s.sandboxes.Get(req.GetPodSandboxId())
	if err != nil {
		return nil, storeError(err, "sandbox "+req.GetPodSandboxId())
	}
	return &runtimeapi.PodSandboxStatsResponse{Stats: s.sandboxStats(sb, s.now().UnixNano())}, nil
}

// ListPodSandboxStats reports the sandboxes matching the filter (ID, labels).
func (s *Service) ListPodSandboxStats(ctx context.Context, req *runtimeapi.ListPodSandboxStatsRequest) (*runtimeapi.ListPodSandboxStatsResponse, error) {
	return &runtimeapi.ListPodSandboxStatsResponse{Stats: s.listSandboxStats(req.GetFilter())}, nil
}

// StreamPodSandboxStats sends the ListPodSandboxStats result as one message (KEP-5825).
func (s *Service) StreamPodSandboxStats(req *runtimeapi.StreamPodSandboxStatsRequest, stream runtimeapi.RuntimeService_StreamPodSandboxStatsServer) error {
	return stream.Send(&runtimeapi.StreamPodSandboxStatsResponse{PodSandboxStats: s.listSandboxStats(req.GetFilter())})
}

func (s *Service) listSandboxStats(f *runtimeapi.PodSandboxStatsFilter) []*runtimeapi.PodSandboxStats {
	now := s.now().UnixNano()
	var out []*runtimeapi.PodSandboxStats
	for _, sb := range s.sandboxes.List() {
		if !idMatches(sb.ID, f.GetId()) || !labelsMatch(sb.Config.GetLabels(), f.GetLabelSelector()) {
			continue
		}
		out = append(out, s.sandboxStats(sb, now))
	}
	return out
}

// measured reports a program container's cgroup figures as they are (cri-fake/oci).
func measured(cpu *runtimeapi.CpuUsage, mem *runtimeapi.MemoryUsage, u task.Usage) {
	cpu.UsageCoreNanoSeconds.Value, cpu.UsageNanoCores.Value = u.CPUNanos, u.CPUNanoCores
	mem.WorkingSetBytes.Value, mem.UsageBytes.Value, mem.RssBytes.Value = u.MemoryBytes, u.UsageBytes, u.RSSBytes
	mem.PageFaults.Value, mem.MajorPageFaults.Value = u.PageFaults, u.MajorPageFaults
	mem.AvailableBytes.Value = nodeMemory - min(u.MemoryBytes, nodeMemory)
}

// writtenBytes is what a running task wrote to its writable layer.
func writtenBytes(c *store.Container) uint64 {
	u, _ := taskUsage(c)
	return u.WritableLayerBytes
}

// taskUsage is the running task's own figures (errors.ErrUnsupported when it has none).
func taskUsage(c *store.Container) (task.Usage, error) {
	if t := c.Task(); t != nil {
		return t.Usage()
	}
	return task.Usage{}, errors.ErrUnsupported
}
