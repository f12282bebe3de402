package alarm

import (
	"math/rand/v2"
	"sync"
	"testing"
	"time"
)

type ringer struct {
	n    int
	slot int32
	at   time.Time // when it is due (the first test's)
	rang chan int
	late bool // it rang before its time
}

func (r *ringer) Ring() {
	r.late = time.Now().Before(r.at)
	r.rang <- r.n
}
func (r *ringer) AlarmSlot() *int32 { return &r.slot }

// The alarms ring, each not before its time, the removed ones never, and the heap keeps each
// alarm's place right through adds, moves and removals in any order. (Two firings of the timer
// may overlap, when an Add re-arms it as it fires: the order of rings across them is not fixed.)
func TestAlarmsRingOnTimeAndRemovedNever(t *testing.T) {
	var s Set[*ringer]
	rang := make(chan int, 1000)
	base := time.Now().Add(50 * time.Millisecond)
	rs := make([]*ringer, 200)
	for _, k := range rand.Perm(len(rs)) {
		rs[k] = &ringer{n: k, rang: rang, at: base.Add(time.Duration(k) * time.Millisecond)}
		s.Add(rs[k], rs[k].at)
	}
	// Move every tenth to later than the others, then remove every third (some of them moved).
	for k := 0; k < len(rs); k += 10 {
		rs[k].at = base.Add(time.Duration(len(rs)+k) * time.Millisecond)
		s.Add(rs[k], rs[k].at)
	}
	removed := map[int]bool{}
	for k := 0; k < len(rs); k += 3 {
		if !s.Remove(rs[k]) {
			t.Fatalf("alarm %d was not in the set", k)
		}
		removed[k] = true
	}
	if s.Remove(rs[0]) {
		t.Fatal("an alarm removed twice was in the set")
	}
	var want []int
	for k := range rs {
		if !removed[k] && k%10 != 0 {
			want = append(want, k)
		}
	}
	for k := 0; k < len(rs); k += 10 {
		if !removed[k] {
			want = append(want, k)
		}
	}
	got := map[int]bool{}
	for range want {
		select {
		case n := <-rang:
			if removed[n] || got[n] || rs[n].late {
				t.Fatalf("alarm %d rang: removed %v, already %v, before its time %v", n, removed[n], got[n], rs[n].late)
			}
			got[n] = true
		case <-time.After(30 * time.Second):
			t.Fatalf("%d of %d alarms rang", len(got), len(want))
		}
	}
	if n := s.Len(); n != 0 {
		t.Fatalf("%d alarms left after all rang", n)
	}
	select {
	case got := <-rang:
		t.Fatalf("alarm %d rang after all the others: removed ones must not", got)
	default:
	}
	for _, r := range rs {
		if r.slot != 0 {
			t.Fatalf("alarm %d keeps slot %d out of the set", r.n, r.slot)
		}
	}
}

// An alarm set earlier than the one the timer waits for rings first, from many goroutines.
func TestAlarmsEarlierRearms(t *testing.T) {
	var s Set[*ringer]
	rang := make(chan int, 100)
	late := &ringer{n: 1, rang: rang}
	s.Add(late, time.Now().Add(time.Hour))
	var wg sync.WaitGroup
	for i := range 20 {
		wg.Go(func() { s.Add(&ringer{n: 100 + i, rang: rang}, time.Now().Add(time.Millisecond)) })
	}
	wg.Wait()
	for range 20 {
		select {
		case n := <-rang:
			if n == 1 {
				t.Fatal("the hour's alarm rang")
			}
		case <-time.After(30 * time.Second):
			t.Fatal("an alarm set after a later one did not ring")
		}
	}
	if !s.Remove(late) || s.Len() != 0 {
		t.Fatal("the late alarm is not the one left")
	}
}
