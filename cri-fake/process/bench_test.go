package process

import (
	"context"
	"runtime"
	"strings"
	"testing"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// BenchmarkContainerLifecycle is the process side of CreateContainer +
// StartContainer + exit: FromCRI (FS view, identity) and Start of `true`
// until it has exited.
func BenchmarkContainerLifecycle(b *testing.B) {
	cfg := &runtimeapi.ContainerConfig{Command: []string{"true"}}
	sandbox := &runtimeapi.PodSandboxConfig{Hostname: "bench"}
	img := ImageConfig{Cmd: []string{"sh"}}
	layer, err := ImageLayer(img)
	if err != nil {
		b.Fatal(err)
	}
	img.Layer = layer // built once per image, as the runtime should
	b.ReportAllocs()
	for b.Loop() {
		spec, err := FromCRI(cfg, sandbox, img, nil)
		if err != nil {
			b.Fatal(err)
		}
		p, err := Start(context.Background(), spec)
		if err != nil {
			b.Fatal(err)
		}
		p.Wait()
	}
}

// BenchmarkExecSync is one exec probe (`sh -c 'test -f /tmp/healthy'`) in a
// running container.
func BenchmarkExecSync(b *testing.B) {
	p := startProc(b, Spec{Args: []string{"sleep", "1000"}})
	args := []string{"sh", "-c", "test -f /tmp/healthy"}
	b.ReportAllocs()
	for b.Loop() {
		if _, _, _, err := p.ExecSync(context.Background(), args, 0); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkFSRetained reports the heap one container's file system view keeps
// (image layer shared), the figure that matters with thousands of containers.
func BenchmarkFSRetained(b *testing.B) {
	layer := BaseLayer("busybox")
	cfg := FSConfig{Image: layer, Hostname: "h", DNS: &DNSConfig{Servers: []string{"10.96.0.10"}}}
	keep := make([]*FS, 0, 1000)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	for range 1000 {
		f, err := NewFS(cfg)
		if err != nil {
			b.Fatal(err)
		}
		keep = append(keep, f)
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	runtime.KeepAlive(keep)
	for b.Loop() {
	}
	// After the loop: b.Loop's timer reset drops metrics reported earlier.
	b.ReportMetric(float64(int64(after.HeapAlloc)-int64(before.HeapAlloc))/float64(len(keep)), "B/fs")
}

// BenchmarkShScript runs `sh` of a 4 MiB script of many small commands (`:` lines, the shape
// whose tree costs most per byte) and reports the most the process held above what it held
// before, per byte of script (peakB/srcB): issue 24 measured 1 GB for 15 MB.
func BenchmarkShScript(b *testing.B) {
	const size = 4 << 20
	fsys := newFS(b, FSConfig{Hostname: "bench", MemoryLimit: 256 << 20})
	if err := fsys.WriteFile("/s.sh", []byte(strings.Repeat(":\n", size/2)), 0o755); err != nil {
		b.Fatal(err)
	}
	var ratio float64
	for b.Loop() {
		base := heapInUse()
		peak := watchHeap(b)
		_, stderr, code := runCmd(b, Spec{Args: []string{"sh", "/s.sh"}, FS: fsys, MemoryLimit: 256 << 20})
		if code != 0 {
			b.Fatalf("sh /s.sh: %d %q", code, stderr)
		}
		ratio = float64(heapGrowth(peak(), base)) / size
	}
	b.ReportMetric(ratio, "peakB/srcB")
}
