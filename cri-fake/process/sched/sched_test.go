package sched

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// spin runs n busy threads of g until ctx ends: each steps, then does a little work. It returns
// how many steps each made and waits for them to end.
func spin(ctx context.Context, g *Group, n int, inCPU *atomic.Int64, most *atomic.Int64) (steps []int64, wait func()) {
	steps = make([]int64, n)
	var wg sync.WaitGroup
	for i := range n {
		th := g.NewThread()
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer th.Idle()
			for th.Step(ctx) == nil {
				if inCPU != nil {
					k := inCPU.Add(1)
					for {
						m := most.Load()
						if k <= m || most.CompareAndSwap(m, k) {
							break
						}
					}
				}
				x := 0
				for j := range 1000 {
					x += j
				}
				_ = x
				atomic.AddInt64(&steps[i], 1)
				if inCPU != nil {
					inCPU.Add(-1)
				}
			}
		}()
	}
	return steps, wg.Wait
}

// waitUntil polls cond until it holds; a hang fails after a generous bound (a loaded machine
// may take long for what takes milliseconds alone, but never this long).
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestSchedulerRunsAtMostItsCPUs: 64 busy threads on a scheduler of one CPU take turns: the
// others wait in the scheduler (parked, not runnable goroutines), so at most one runs its work
// at a time, besides one that was preempted while not stepping (counted by the scheduler).
func TestSchedulerRunsAtMostItsCPUs(t *testing.T) {
	s := New(1)
	g := s.NewGroup()
	ctx, cancel := context.WithCancel(context.Background())
	var inCPU, most atomic.Int64
	steps, wait := spin(ctx, g, 64, &inCPU, &most)
	waitUntil(t, "every thread to run", func() bool {
		for i := range steps {
			if atomic.LoadInt64(&steps[i]) == 0 {
				return false
			}
		}
		return true
	})
	waitUntil(t, "some CPU time", func() bool { return g.usage.Load() > int64(100*time.Millisecond) })
	cancel()
	wait()
	if m, p := most.Load(), s.preempted.Load(); m > 1+p {
		t.Fatalf("%d threads ran at once on one CPU (%d preemptions)", m, p)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.queue) != 0 || s.holders[0] != nil {
		t.Fatalf("threads left behind: queue %d, holder %v", len(s.queue), s.holders[0])
	}
}

// TestSchedulerFairBetweenContainers: a container with 20 busy threads and one with a single busy
// thread share one CPU about evenly (round robin over containers, as CFS between cgroups), not
// 20 to 1.
func TestSchedulerFairBetweenContainers(t *testing.T) {
	s := New(1)
	many, one := s.NewGroup(), s.NewGroup()
	ctx, cancel := context.WithCancel(context.Background())
	_, waitMany := spin(ctx, many, 20, nil, nil)
	_, waitOne := spin(ctx, one, 1, nil, nil)
	// Counted from when both have run: on a busy machine the second container's goroutine may start
	// well after the first's, which then had the CPU alone, rightly.
	waitUntil(t, "both containers to use CPU", func() bool { return many.usage.Load() > 0 && one.usage.Load() > 0 })
	m0, o0 := many.usage.Load(), one.usage.Load()
	waitUntil(t, "400 ms of CPU between them", func() bool {
		return many.usage.Load()-m0+one.usage.Load()-o0 > int64(400*time.Millisecond)
	})
	cancel()
	waitMany()
	waitOne()
	m, o := many.usage.Load()-m0, one.usage.Load()-o0
	if o*3 < m {
		t.Fatalf("the container of one thread got %v of the CPU, the one of 20 %v: want about even", time.Duration(o), time.Duration(m))
	}
}

// TestSchedulerQuotaThrottles: a container of four busy threads under a quota of 10 ms per 50 ms
// holds the CPUs for at most its quota in each period (plus one quantum per CPU of overrun), and
// is throttled; usage is bounded by the periods that passed, whatever the machine's speed.
func TestSchedulerQuotaThrottles(t *testing.T) {
	s := New(2)
	g := s.NewGroup()
	quota, period := 10*time.Millisecond, 50*time.Millisecond
	g.SetQuota(quota, period)
	start := time.Now()
	ctx, cancel := context.WithCancel(context.Background())
	_, wait := spin(ctx, g, 4, nil, nil)
	waitUntil(t, "100 ms of CPU time", func() bool { return g.usage.Load() >= int64(100*time.Millisecond) })
	cancel()
	wait()
	elapsed := time.Since(start)
	periods := int64(elapsed/period) + 1
	if most := periods*int64(quota) + periods*2*int64(Quantum); g.usage.Load() > most {
		t.Fatalf("%v of CPU time in %v (%d periods of %v): past the quota of %v", time.Duration(g.usage.Load()), elapsed, periods, period, quota)
	}
	if g.throttled.Load() == 0 {
		t.Fatal("never throttled")
	}
}

// TestSchedulerPreemptsBlockedHolder: a thread that blocks while holding the only CPU (without
// Idle) loses it once its quantum is over, so another thread runs.
func TestSchedulerPreemptsBlockedHolder(t *testing.T) {
	s := New(1)
	g := s.NewGroup()
	ctx := context.Background()
	blocked := g.NewThread()
	if err := blocked.Step(ctx); err != nil {
		t.Fatal(err)
	}
	other := g.NewThread()
	done := make(chan error, 1)
	go func() { done <- other.Step(ctx) }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(2 * time.Minute):
		t.Fatal("a thread blocked on the only CPU kept it")
	}
	if s.preempted.Load() == 0 {
		t.Fatal("no preemption counted")
	}
	other.Idle()
	if err := blocked.Step(ctx); err != nil { // it asks again when it runs again
		t.Fatal(err)
	}
	blocked.Idle()
}

// TestSchedulerWaitEndsWithTheProcess: a thread waiting for a CPU returns its context's error
// when the process is killed, and leaves no trace in the queue.
func TestSchedulerWaitEndsWithTheProcess(t *testing.T) {
	s := New(1)
	g := s.NewGroup()
	holder := g.NewThread()
	if err := holder.Step(context.Background()); err != nil {
		t.Fatal(err)
	}
	holder.granted.Store(s.now() + int64(time.Hour)) // it will not be preempted soon
	ctx, cancel := context.WithCancel(context.Background())
	waiter := g.NewThread()
	done := make(chan error, 1)
	go func() { done <- waiter.Step(ctx) }()
	waitUntil(t, "the thread to wait", func() bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		return waiter.waiting
	})
	cancel()
	if err := <-done; err != context.Canceled {
		t.Fatalf("step: %v, want context.Canceled", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.queue) != 0 || !g.emptyLocked() || waiter.granted.Load() != 0 {
		t.Fatalf("the killed thread stayed: queue %d, waiting %d %d", len(s.queue), len(g.woken), len(g.busy))
	}
}

// TestSchedulerWokenThreadGoesFirst: in a container of 20 busy threads on one CPU, a thread that
// wakes up (an exec, a probe) gets the CPU after at most a couple of quanta of the others, not
// after every one of them (CFS places a waking task ahead likewise).
func TestSchedulerWokenThreadGoesFirst(t *testing.T) {
	s := New(1)
	g := s.NewGroup()
	ctx, cancel := context.WithCancel(context.Background())
	steps, wait := spin(ctx, g, 20, nil, nil)
	defer wait()
	defer cancel()
	waitUntil(t, "every busy thread to run", func() bool {
		for i := range steps {
			if atomic.LoadInt64(&steps[i]) == 0 {
				return false
			}
		}
		return true
	})
	th := g.NewThread()
	for range 10 {
		before := g.usage.Load()
		if err := th.Step(ctx); err != nil {
			t.Fatal(err)
		}
		if waited := time.Duration(g.usage.Load() - before); waited > 3*Quantum {
			t.Fatalf("a woken thread waited for %v of the busy threads' CPU time (the quantum is %v)", waited, Quantum)
		}
		th.Idle()
	}
	cancel()
}
