// Package sched is the CPU scheduler of cri-fake's simulated processes: the node's CPUs
// (Scheduler), a group per container (Group: its quota, its CPU time) and a thread per goroutine
// of a simulated process (Thread). The kernel package runs each program on a Thread.
//
// Why: every simulated process runs on goroutines of cri-fake, which the Go scheduler runs beside
// cri-fake's own, the gRPC server answering the kubelet. Left alone, 200 busy loops in a
// container are 200 runnable goroutines, and the Go scheduler gives each its 10 ms slice in turn
// (sysmon's forcePreemptNS) before a server goroutine runs again: every hand-off of a CRI call
// (netpoll, the stream's handler, the writer) then waits about a second, and `crictl ps` took
// 12–18 s. containerd keeps answering because the kernel schedules containers apart (CFS, one
// group per cgroup) and the runtime's own threads get their share.
//
// How: a simulated program runs only while it holds one of the few CPUs of the node's Scheduler
// (one per runtime), fewer than the Go scheduler's Ps, so one P always runs cri-fake's own
// goroutines. A program asks for a CPU at each step of its work (Thread.Step: each command the
// shell runs, each block an applet copies) and keeps it for a Quantum; past that it goes to the
// back of the queue, parked, not runnable. The queue is fair between containers (round robin over
// the containers with waiting threads, as CFS is between cgroups of equal weight) and first come,
// first served within one, where a thread that wakes up (it was idle) goes before those that used
// up their quantum, every other turn: CFS places a waking task ahead too, so an exec or a probe in
// a container of busy loops answers within a quantum or two rather than after all of them. A
// program that blocks (a sleep, a wait for a child, a pipe: Thread.Idle) gives its CPU back; one
// that blocks elsewhere holding it loses it once its quantum is over and another thread waits (it
// is preempted). A container's CPU quota (cpu_quota per cpu_period, cgroup v2 cpu.max) throttles
// it: once its threads held CPUs for the quota in the current period, they wait for the next one.
// The time a container's threads held CPUs is its CPU time.
package sched

import (
	"context"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
)

// Quantum is how long a thread keeps a CPU before it yields to a waiting one (and how long a
// thread that blocked while holding a CPU keeps it from the others). CFS's minimum
// granularity is a few milliseconds too.
const Quantum = 2 * time.Millisecond

// Scheduler is the simulated node's CPUs, which every container's processes share.
type Scheduler struct {
	base time.Time // origin of now()

	mu      sync.Mutex
	holders []*Thread // one per CPU; nil: idle
	queue   []*Group  // containers with waiting threads, in round-robin order
	// timer dispatches again when a quantum ends or a throttled container's period does, while
	// threads wait (the waiting threads themselves only wait to be woken: a thousand of them
	// waking at each quantum would be the scheduler's own thundering herd).
	timer   *time.Timer
	timerAt int64 // when it fires (s.now()); 0: not armed

	preempted atomic.Int64 // CPUs taken from running threads that had not stepped for a quantum
}

// New returns a scheduler of n CPUs; n ≤ 0 means DefaultCPUs.
func New(n int) *Scheduler {
	if n <= 0 {
		n = DefaultCPUs()
	}
	return &Scheduler{base: time.Now(), holders: make([]*Thread, n)}
}

// Preempted is how many times a CPU was taken from a thread that had not stepped for a quantum.
func (s *Scheduler) Preempted() int64 { return s.preempted.Load() }

// DefaultCPUs is how many simulated processes run at once: one less than the Go scheduler's
// Ps (GOMAXPROCS), at least one, so cri-fake's own goroutines always find a P free.
func DefaultCPUs() int { return max(1, runtime.GOMAXPROCS(0)-1) }

// CPUs is how many CPUs the scheduler has.
func (s *Scheduler) CPUs() int { return len(s.holders) }

// now is the scheduler's monotonic clock in nanoseconds, never 0 (0 marks "no CPU held").
func (s *Scheduler) now() int64 { return int64(time.Since(s.base)) + 1 }

// Group is one container's CPU controller: its waiting threads, its quota and its usage.
type Group struct {
	s *Scheduler

	// Under s.mu:
	woken       []*Thread // waiting threads that were idle, first come, first served
	busy        []*Thread // waiting threads that used up their quantum
	lastWoken   bool      // the last grant went to a woken thread: the next goes to a busy one
	queued      bool      // in s.queue
	quota       int64     // ns per period; 0: none
	period      int64     // ns
	periodStart int64
	used        int64 // ns held in the current period
	throttledAt int64 // periodStart of the last period it was throttled in (0: none)
	// vtime is the CPU time its threads held, the key the next container is picked by (least
	// first, as CFS picks by vruntime); a container that was idle comes back no further behind
	// than the least of those waiting, so sleeping earns it no burst. Picking by queue position
	// instead favoured a container whose thread was preempted while not stepping (its place
	// was lost until it stepped): one thread against twenty got a fifth of the CPU, not half.
	vtime int64

	usage     atomic.Int64 // ns its threads held CPUs (cpuacct usage)
	throttled atomic.Int64 // periods it was throttled in (cpu.stat nr_throttled)
}

// Usage is how long the group's threads held CPUs (cpuacct.usage).
func (g *Group) Usage() time.Duration { return time.Duration(g.usage.Load()) }

// Throttled is how many periods the group's quota throttled it in (cpu.stat nr_throttled).
func (g *Group) Throttled() int64 { return g.throttled.Load() }

// NewGroup is a container's CPU controller on s.
func (s *Scheduler) NewGroup() *Group { return &Group{s: s} }

// SetQuota sets the group's CPU bandwidth: quota per period (cpu.max); quota ≤ 0 means none.
func (g *Group) SetQuota(quota, period time.Duration) {
	g.s.mu.Lock()
	defer g.s.mu.Unlock()
	if quota <= 0 || period <= 0 {
		g.quota, g.period = 0, 0
	} else {
		g.quota, g.period = int64(quota), int64(period)
	}
	g.periodStart, g.used = g.s.now(), 0
	g.s.dispatchLocked(g.s.now())
}

// runnableLocked reports whether the group may run now (not past its quota in this period).
func (g *Group) runnableLocked(now int64) bool {
	if g.quota == 0 {
		return true
	}
	if now-g.periodStart >= g.period {
		g.periodStart = now - (now-g.periodStart)%g.period
		g.used = 0
	}
	if g.used < g.quota {
		return true
	}
	if g.throttledAt != g.periodStart {
		g.throttledAt = g.periodStart
		g.throttled.Add(1)
	}
	return false
}

// Thread is one goroutine of a simulated process as the scheduler sees it: a process's main
// goroutine, a pipeline element, a background job.
type Thread struct {
	g       *Group
	granted atomic.Int64  // when it got its CPU (s.now()); 0: it holds none
	wake    chan struct{} // a CPU was granted (capacity 1)
	slot    int           // its CPU while granted != 0 (under s.mu)
	waiting bool          // in g.woken or g.busy (under s.mu)
	// running: it has run since it was granted its CPU (under s.mu). A thread granted a CPU
	// but not yet scheduled by Go is never preempted, or it could lose every CPU it is given
	// on a loaded machine.
	running bool
	// preempted: it lost its CPU at the end of a quantum without stepping (under s.mu); it
	// waits as a busy thread, not a woken one.
	preempted bool
}

// NewThread is a thread of g (nil for a nil g: a container that never runs has no CPU).
func (g *Group) NewThread() *Thread {
	if g == nil {
		return nil
	}
	return &Thread{g: g, wake: make(chan struct{}, 1)}
}

// Step returns at once while the thread holds a CPU for less than a quantum, else it waits for
// a CPU; it fails with ctx's error when ctx ends first (the process was killed). A nil thread
// never waits.
func (th *Thread) Step(ctx context.Context) error {
	if err := ctx.Err(); err != nil || th == nil {
		return err
	}
	s := th.g.s
	if g := th.granted.Load(); g != 0 && s.now()-g < int64(Quantum) {
		return nil
	}
	return th.acquire(ctx)
}

func (th *Thread) acquire(ctx context.Context) error {
	s := th.g.s
	s.mu.Lock()
	defer s.mu.Unlock()
	// It used up its quantum (else it was idle, or new).
	wasRunning := th.granted.Load() != 0 || th.preempted
	th.preempted = false
	th.releaseLocked(s.now())
	for {
		now := s.now()
		if err := ctx.Err(); err != nil {
			th.g.removeLocked(th)
			th.releaseLocked(now)
			s.dispatchLocked(now)
			return err
		}
		if th.granted.Load() == 0 && !th.waiting {
			th.waiting = true
			if wasRunning {
				th.g.busy = append(th.g.busy, th)
			} else {
				th.g.woken = append(th.g.woken, th)
			}
			if !th.g.queued {
				if !wasRunning {
					th.g.vtime = max(th.g.vtime, s.leastVtimeLocked(th.g.vtime))
				}
				th.g.queued = true
				s.queue = append(s.queue, th.g)
			}
			wasRunning = false // preempted before it ran: it waits as a woken one
		}
		s.dispatchLocked(now)
		if th.granted.Load() != 0 {
			th.running = true
			th.granted.Store(now) // its quantum starts when it runs, not when it was woken
			s.armLocked(now)      // threads wait: it is preempted at the end of that quantum
			select {
			case <-th.wake: // a wake-up not waited for
			default:
			}
			return nil
		}
		s.mu.Unlock()
		select {
		case <-th.wake:
		case <-ctx.Done():
		}
		s.mu.Lock()
	}
}

// Idle gives the thread's CPU to a waiting one: the thread is about to block.
func (th *Thread) Idle() {
	if th == nil || th.granted.Load() == 0 {
		return
	}
	s := th.g.s
	s.mu.Lock()
	now := s.now()
	th.releaseLocked(now)
	s.dispatchLocked(now)
	s.mu.Unlock()
}

// releaseLocked gives back the thread's CPU, charging the time it held it (at most a quantum:
// past that it was blocked, not running, or another thread would have taken the CPU).
func (th *Thread) releaseLocked(now int64) {
	g := th.granted.Load()
	if g == 0 {
		return
	}
	held := min(now-g, int64(Quantum))
	th.g.usage.Add(held)
	th.g.used += held
	th.g.vtime += held
	th.g.s.holders[th.slot] = nil
	th.granted.Store(0)
	th.running = false
}

func (g *Group) removeLocked(th *Thread) {
	if !th.waiting {
		return
	}
	th.waiting = false
	g.woken, g.busy = without(g.woken, th), without(g.busy, th)
	if g.emptyLocked() {
		g.s.dequeueLocked(g)
	}
}

func without(q []*Thread, th *Thread) []*Thread {
	for i, w := range q {
		if w == th {
			return append(q[:i], q[i+1:]...)
		}
	}
	return q
}

func (g *Group) emptyLocked() bool { return len(g.woken)+len(g.busy) == 0 }

// popLocked takes the group's next waiting thread: a woken one, unless the last turn was one's
// and busy ones wait.
func (g *Group) popLocked() *Thread {
	var th *Thread
	if len(g.woken) > 0 && (len(g.busy) == 0 || !g.lastWoken) {
		th, g.woken, g.lastWoken = g.woken[0], g.woken[1:], true
	} else {
		th, g.busy, g.lastWoken = g.busy[0], g.busy[1:], false
	}
	th.waiting = false
	return th
}

func (s *Scheduler) dequeueLocked(g *Group) {
	if !g.queued {
		return
	}
	g.queued = false
	for i, q := range s.queue {
		if q == g {
			s.queue = append(s.queue[:i], s.queue[i+1:]...)
			return
		}
	}
}

// dispatchLocked hands free CPUs to waiting threads, one container after another. Threads that
// held their CPU for a quantum or more lose it first when others wait (preemption: a thread
// blocked somewhere without Idle, or one that did not step since).
func (s *Scheduler) dispatchLocked(now int64) {
	if len(s.queue) == 0 {
		return
	}
	defer s.armLocked(now)
	for _, h := range s.holders {
		if h != nil && h.running && now-h.granted.Load() >= int64(Quantum) {
			h.releaseLocked(now)
			h.preempted = true
			s.preempted.Add(1)
		}
	}
	for i := range s.holders {
		if s.holders[i] != nil {
			continue
		}
		g := s.nextGroupLocked(now)
		if g == nil {
			return
		}
		th := g.popLocked()
		s.dequeueLocked(g)
		if !g.emptyLocked() {
			g.queued = true
			s.queue = append(s.queue, g) // round robin: to the back
		}
		s.holders[i] = th
		th.slot = i
		th.running = false
		th.granted.Store(now)
		select {
		case th.wake <- struct{}{}:
		default:
		}
	}
}

// nextGroupLocked is the queued container not throttled by its quota that held CPUs least
// (vtime), the first queued of equals.
func (s *Scheduler) nextGroupLocked(now int64) *Group {
	var next *Group
	for _, g := range s.queue {
		if g.runnableLocked(now) && (next == nil || g.vtime < next.vtime) {
			next = g
		}
	}
	return next
}

// leastVtimeLocked is the least vtime of the queued containers, or def when none is queued.
func (s *Scheduler) leastVtimeLocked(def int64) int64 {
	least, any := int64(0), false
	for _, g := range s.queue {
		if !any || g.vtime < least {
			least, any = g.vtime, true
		}
	}
	if !any {
		return def
	}
	return least
}

// armLocked sets the timer for the next time dispatching may grant a CPU without anyone
// stepping: the end of the first quantum of a CPU held, or of a throttled container's period.
func (s *Scheduler) armLocked(now int64) {
	if len(s.queue) == 0 {
		return
	}
	next := int64(0)
	earlier := func(t int64) {
		if next == 0 || t < next {
			next = t
		}
	}
	for _, h := range s.holders {
		if h != nil && h.running { // one not yet running arms it when it runs (acquire)
			earlier(h.granted.Load() + int64(Quantum))
		}
	}
	for _, g := range s.queue {
		if g.quota != 0 && g.used >= g.quota {
			earlier(g.periodStart + g.period)
		}
	}
	if next == 0 || (s.timerAt != 0 && s.timerAt <= next) {
		return
	}
	s.timerAt = next
	d := time.Duration(max(next-now, int64(50*time.Microsecond)))
	if s.timer == nil {
		s.timer = time.AfterFunc(d, s.tick)
	} else {
		s.timer.Reset(d)
	}
}

// tick is the timer's dispatch.
func (s *Scheduler) tick() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.timerAt = 0
	s.dispatchLocked(s.now())
}
