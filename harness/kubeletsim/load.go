package kubeletsim

import (
	"context"
	"fmt"
	"io"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// LoadOptions shape a load run.
type LoadOptions struct {
	Pods        int
	Concurrency int
	// InitContainers per pod (each run to completion before the next, as the kubelet does).
	InitContainers int
	// Containers per pod (default 1).
	Containers int
	Image      string // default busybox
	// InitCommand is what an init container runs; it must exit 0.
	InitCommand []string
	// Relist runs the PLEG relist loop every RelistEvery while the load runs (default 1s, the
	// kubelet's period); 0 turns it off.
	RelistEvery time.Duration
	// Volumes runs a PVC volume lifecycle per pod through Storage (nil: no CSI).
	Storage *Storage
	// Progress receives a progress line (nil: none); TTY rewrites it in place.
	Progress io.Writer
	TTY      bool
	// RunID makes pod names and UIDs unique to this run.
	RunID string
}

// Stats are latency figures of one kind of call.
type Stats struct {
	Count  int
	Errors int
	P50    time.Duration
	P90    time.Duration
	P99    time.Duration
	Max    time.Duration
}

// Report is the outcome of a load run.
type Report struct {
	Pods   int
	Failed int
	// FirstErrors holds up to five error messages, for the report.
	FirstErrors []string
	Wall        time.Duration
	Calls       int
	// PodStart is from RunPodSandbox to the last container started.
	PodStart Stats
	// PodLifecycle is the whole pod: start, status, stop, removal (and its volume, with Storage).
	PodLifecycle Stats
	Methods      map[string]Stats
	Relists      int
}

// PodsPerSecond is the pod lifecycle throughput.
func (r *Report) PodsPerSecond() float64 {
	if r.Wall <= 0 {
		return 0
	}
	return float64(r.Pods) / r.Wall.Seconds()
}

// CallsPerSecond is the RPC throughput.
func (r *Report) CallsPerSecond() float64 {
	if r.Wall <= 0 {
		return 0
	}
	return float64(r.Calls) / r.Wall.Seconds()
}

// latencies collects durations per method, concurrently.
type latencies struct {
	mu     sync.Mutex
	d      map[string][]time.Duration
	errs   map[string]int
	calls  atomic.Int64
	recent atomic.Int64 // ns of the latest RunPodSandbox, for the progress line
}

func (l *latencies) observe(method string, d time.Duration, err error) {
	l.calls.Add(1)
	l.mu.Lock()
	l.d[method] = append(l.d[method], d)
	if err != nil {
		l.errs[method]++
	}
	l.mu.Unlock()
}

func stats(ds []time.Duration, errs int) Stats {
	if len(ds) == 0 {
		return Stats{Errors: errs}
	}
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	pct := func(p float64) time.Duration {
		i := int(p*float64(len(s))+0.5) - 1
		if i < 0 {
			i = 0
		}
		if i >= len(s) {
			i = len(s) - 1
		}
		return s[i]
	}
	return Stats{Count: len(s), Errors: errs, P50: pct(0.50), P90: pct(0.90), P99: pct(0.99), Max: s[len(s)-1]}
}

// LoadPod is the pod a load run starts as number i.
func LoadPod(o LoadOptions, i int) Pod {
	p := Pod{Name: fmt.Sprintf("load-%d", i), Namespace: "harness-load", UID: fmt.Sprintf("%s-%06d", o.RunID, i)}
	for j := 0; j < o.InitContainers; j++ {
		p.InitContainers = append(p.InitContainers, Container{Name: fmt.Sprintf("init-%d", j), Image: o.Image, Command: o.InitCommand})
	}
	for j := 0; j < o.Containers; j++ {
		p.Containers = append(p.Containers, Container{Name: fmt.Sprintf("app-%d", j), Image: o.Image, Command: []string{"sleep", "3600"}})
	}
	return p
}

// RunLoad starts, checks, stops and removes opts.Pods pods with opts.Concurrency workers, each
// pod the kubelet's full sequence, while a PLEG relist loop runs beside them.
func RunLoad(ctx context.Context, k *Kubelet, opts LoadOptions) *Report {
	if opts.Concurrency < 1 {
		opts.Concurrency = 1
	}
	if opts.Containers == 0 {
		opts.Containers = 1
	}
	if opts.Image == "" {
		opts.Image = "busybox"
	}
	if len(opts.InitCommand) == 0 {
		opts.InitCommand = []string{"sh", "-c", "exit 0"}
	}
	if opts.RunID == "" {
		opts.RunID = fmt.Sprintf("%x", time.Now().UnixNano()&0xffffff)
	}
	lat := &latencies{d: map[string][]time.Duration{}, errs: map[string]int{}}
	kk := *k
	kk.Observe = func(m string, d time.Duration, err error) {
		lat.observe(m, d, err)
		if k.Observe != nil {
			k.Observe(m, d, err)
		}
	}
	if opts.Storage != nil {
		opts.Storage.Observe = kk.Observe
	}
	rep := &Report{Pods: opts.Pods, Methods: map[string]Stats{}}
	var (
		mu        sync.Mutex
		starts    []time.Duration
		lifecycle []time.Duration
		done      atomic.Int64
		failed    atomic.Int64
	)
	fail := func(err error) {
		failed.Add(1)
		mu.Lock()
		if len(rep.FirstErrors) < 5 {
			rep.FirstErrors = append(rep.FirstErrors, err.Error())
		}
		mu.Unlock()
	}

	begin := time.Now()
	stopAux := make(chan struct{})
	var aux sync.WaitGroup
	var relists atomic.Int64
	if opts.RelistEvery > 0 {
		aux.Add(1)
		go func() {
			defer aux.Done()
			t := time.NewTicker(opts.RelistEvery)
			defer t.Stop()
			for {
				select {
				case <-stopAux:
					return
				case <-t.C:
					if _, _, err := kk.Relist(ctx); err == nil {
						relists.Add(1)
					}
				}
			}
		}()
	}
	if opts.Progress != nil {
		aux.Add(1)
		go func() {
			defer aux.Done()
			t := time.NewTicker(250 * time.Millisecond)
			defer t.Stop()
			lastPrinted := -1
			for {
				select {
				case <-stopAux:
					progress(opts, &done, &failed, begin, lat, true)
					return
				case <-t.C:
					n := int(done.Load())
					// Without a terminal, a line per 10% keeps logs readable.
					if opts.TTY || n*10/max(opts.Pods, 1) != lastPrinted {
						lastPrinted = n * 10 / max(opts.Pods, 1)
						progress(opts, &done, &failed, begin, lat, false)
					}
				}
			}
		}()
	}

	jobs := make(chan int)
	var wg sync.WaitGroup
	for w := 0; w < opts.Concurrency; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range jobs {
				t0 := time.Now()
				err := onePod(ctx, &kk, opts, i, func(d time.Duration) {
					mu.Lock()
					starts = append(starts, d)
					mu.Unlock()
				})
				if err != nil {
					fail(fmt.Errorf("pod %d: %w", i, err))
				} else {
					mu.Lock()
					lifecycle = append(lifecycle, time.Since(t0))
					mu.Unlock()
				}
				done.Add(1)
			}
		}()
	}
	for i := 0; i < opts.Pods && ctx.Err() == nil; i++ {
		jobs <- i
	}
	close(jobs)
	wg.Wait()
	rep.Wall = time.Since(begin)
	close(stopAux)
	aux.Wait()

	rep.Failed = int(failed.Load())
	rep.Calls = int(lat.calls.Load())
	rep.Relists = int(relists.Load())
	rep.PodStart = stats(starts, 0)
	rep.PodLifecycle = stats(lifecycle, rep.Failed)
	lat.mu.Lock()
	for m, ds := range lat.d {
		rep.Methods[m] = stats(ds, lat.errs[m])
	}
	lat.mu.Unlock()
	return rep
}

func onePod(ctx context.Context, k *Kubelet, opts LoadOptions, i int, started func(time.Duration)) error {
	p := LoadPod(opts, i)
	t0 := time.Now()
	r, err := k.StartPod(ctx, p)
	if err != nil {
		return err
	}
	started(time.Since(t0))
	if _, err := k.PodStatus(ctx, p.UID); err != nil {
		return err
	}
	if opts.Storage != nil {
		if err := opts.Storage.VolumeLifecycle(ctx, p.UID, p.UID, 1<<30); err != nil {
			return err
		}
	}
	if err := k.StopPod(ctx, r, 30); err != nil {
		return err
	}
	return k.RemovePod(ctx, r)
}

func progress(o LoadOptions, done, failed *atomic.Int64, begin time.Time, lat *latencies, final bool) {
	n, el := done.Load(), time.Since(begin)
	rate := float64(n) / el.Seconds()
	width := 30
	filled := int(n) * width / max(o.Pods, 1)
	bar := strings.Repeat("█", filled) + strings.Repeat("░", width-filled)
	line := fmt.Sprintf("  %s %d/%d pods  %d errors  %.0f pods/s  %.0f calls/s  %s",
		bar, n, o.Pods, failed.Load(), rate, float64(lat.calls.Load())/el.Seconds(), el.Round(100*time.Millisecond))
	if o.TTY {
		fmt.Fprint(o.Progress, "\r"+line+"\033[K")
		if final {
			fmt.Fprintln(o.Progress)
		}
		return
	}
	fmt.Fprintln(o.Progress, line)
}

// Write prints the report as a table.
func (r *Report) Write(w io.Writer) {
	fmt.Fprintf(w, "pods: %d, errors: %d, wall %s\n", r.Pods, r.Failed, r.Wall.Round(time.Millisecond))
	fmt.Fprintf(w, "throughput: %.1f pods/s, %.0f CRI/CSI calls/s (%d calls, %d PLEG relists)\n", r.PodsPerSecond(), r.CallsPerSecond(), r.Calls, r.Relists)
	fmt.Fprintf(w, "%-28s %7s %6s %9s %9s %9s %9s\n", "latency", "count", "errors", "p50", "p90", "p99", "max")
	row := func(name string, s Stats) {
		fmt.Fprintf(w, "%-28s %7d %6d %9s %9s %9s %9s\n", name, s.Count, s.Errors, dur(s.P50), dur(s.P90), dur(s.P99), dur(s.Max))
	}
	row("pod start (sandbox→running)", r.PodStart)
	row("pod lifecycle (start→removed)", r.PodLifecycle)
	var names []string
	for m := range r.Methods {
		names = append(names, m)
	}
	sort.Strings(names)
	for _, m := range names {
		row("  "+m, r.Methods[m])
	}
	for _, e := range r.FirstErrors {
		fmt.Fprintf(w, "error: %s\n", e)
	}
}

func dur(d time.Duration) string {
	switch {
	case d == 0:
		return "-"
	case d < time.Millisecond:
		return fmt.Sprintf("%dµs", d.Microseconds())
	case d < time.Second:
		return fmt.Sprintf("%.2fms", float64(d.Microseconds())/1000)
	}
	return fmt.Sprintf("%.2fs", d.Seconds())
}
