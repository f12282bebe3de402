// Package collect gathers the boundary trace from wherever the fakes write it, an in-process
// recorder, a fake's admin socket (GET /trace) or a JSON-lines trace file such as the one cni-fake
// appends to, and merges the events of all of them into one timeline.
package collect

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"

	"github.com/plugsim/plugsim/harness/admin"
	"github.com/plugsim/plugsim/harness/trace"
)

// Source yields the events recorded since its previous call.
type Source interface {
	// Name says where the events come from, for error messages.
	Name() string
	Next() ([]trace.Event, error)
}

// Recorder reads an in-process recorder (a fake started with its Go API).
func Recorder(name string, r *trace.Recorder) Source {
	return &recorderSource{name: name, r: r, last: lastSeq(r.Events())}
}

type recorderSource struct {
	name string
	r    *trace.Recorder
	mu   sync.Mutex
	last uint64
}

func (s *recorderSource) Name() string { return s.name }

func (s *recorderSource) Next() ([]trace.Event, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []trace.Event
	for _, ev := range s.r.Events() {
		if ev.Seq > s.last {
			out = append(out, ev)
			s.last = ev.Seq
		}
	}
	return out, nil
}

func lastSeq(evs []trace.Event) uint64 {
	if len(evs) == 0 {
		return 0
	}
	return evs[len(evs)-1].Seq
}

// Admin reads a running fake's admin socket; only events recorded after this call are returned.
func Admin(name, ep string) (Source, error) {
	c, err := admin.NewClient(ep)
	if err != nil {
		return nil, err
	}
	evs, err := c.Trace(0)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return &adminSource{name: name, c: c, last: lastSeq(evs)}, nil
}

type adminSource struct {
	name string
	c    *admin.Client
	mu   sync.Mutex
	last uint64
}

func (s *adminSource) Name() string { return s.name }

func (s *adminSource) Next() ([]trace.Event, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	evs, err := s.c.Trace(s.last)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", s.name, err)
	}
	if len(evs) > 0 {
		s.last = lastSeq(evs)
	}
	return evs, nil
}

// File follows a JSON-lines trace file from its current end (fromStart false) or from its first
// line. A file that does not exist yet is empty.
func File(name, path string, fromStart bool) Source {
	s := &fileSource{name: name, path: path}
	if !fromStart {
		if fi, err := os.Stat(path); err == nil {
			s.off = fi.Size()
		}
	}
	return s
}

type fileSource struct {
	name string
	path string
	mu   sync.Mutex
	off  int64
}

func (s *fileSource) Name() string { return s.name }

func (s *fileSource) Next() ([]trace.Event, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	f, err := os.Open(s.path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if _, err := f.Seek(s.off, io.SeekStart); err != nil {
		return nil, err
	}
	data, err := io.ReadAll(bufio.NewReader(f))
	if err != nil {
		return nil, err
	}
	// Only whole lines: a writer may be half-way through one.
	end := bytes.LastIndexByte(data, '\n')
	if end < 0 {
		return nil, nil
	}
	evs, err := trace.Read(bytes.NewReader(data[:end+1]), s.path)
	s.off += int64(end + 1)
	return evs, err
}

// Collector merges several sources.
type Collector struct {
	Sources []Source
}

// Next returns the new events of every source, ordered by start time. A source that fails does
// not hide the others' events; its error is returned alongside them.
func (c *Collector) Next() ([]trace.Event, error) {
	var lists [][]trace.Event
	var errs []error
	for _, s := range c.Sources {
		evs, err := s.Next()
		if err != nil {
			errs = append(errs, err)
		}
		lists = append(lists, evs)
	}
	return Merge(lists...), errors.Join(errs...)
}

// Merge orders events from several recorders by the time each call started. A call that started
// inside another one (CNI ADD inside RunPodSandbox) therefore follows it, so the chain reads top
// down.
func Merge(lists ...[]trace.Event) []trace.Event {
	var out []trace.Event
	for _, l := range lists {
		out = append(out, l...)
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Time.Before(out[j].Time) })
	return out
}

// ClusterTraceFiles lists the trace files `harness cluster up` has its fakes write in dir, written
// yet or not (cni-fake's appears with the first CNI call), each with the node it belongs to (""
// for the control plane's csi-fake).
func ClusterTraceFiles(dir string) (map[string]string, error) {
	files := map[string]string{filepath.Join(dir, "csi", "controller.jsonl"): ""}
	nodes, err := filepath.Glob(filepath.Join(dir, "nodes", "*"))
	if err != nil {
		return nil, err
	}
	for _, nd := range nodes {
		for _, name := range []string{"cri.jsonl", "csi.jsonl", "csi-ephemeral.jsonl", "cni.jsonl"} {
			files[filepath.Join(nd, name)] = filepath.Base(nd)
		}
	}
	if len(nodes) == 0 && !exists(filepath.Join(dir, "csi", "controller.jsonl")) {
		return nil, fmt.Errorf("%s holds no cluster's trace files (csi/controller.jsonl, nodes/*/cri.jsonl, ...): is it the --dir of `harness cluster up`?", dir)
	}
	return files, nil
}

// ClusterTraces lists the trace files of ClusterTraceFiles that exist.
func ClusterTraces(dir string) (map[string]string, error) {
	files, err := ClusterTraceFiles(dir)
	if err != nil {
		return nil, err
	}
	for f := range files {
		if !exists(f) {
			delete(files, f)
		}
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("%s holds no cluster's trace files (csi/controller.jsonl, nodes/*/cri.jsonl, ...): is it the --dir of `harness cluster up`?", dir)
	}
	return files, nil
}

func exists(p string) bool { _, err := os.Stat(p); return err == nil }

// OnNode names a node's participants after it: kubelet@node1, cri-fake@node1, cni-fake@node1 →
// portmap@node1. The CSI controller sidecars (callers named csi-* or external-*) run once for the
// cluster and keep their names. A CNI event names its plugins in Service (the runtime's event of a
// whole chain has the network's name as Callee; a plugin's own event has Callee == Service, which
// is how diagram.FoldCNI knows it), so there the plugin types are what is named.
func OnNode(ev trace.Event, node string) trace.Event {
	if node == "" {
		return ev
	}
	if !strings.HasPrefix(ev.Caller, "csi-") && !strings.HasPrefix(ev.Caller, "external-") {
		ev.Caller += "@" + node
	}
	if ev.Interface != trace.CNI || ev.Service == "" {
		ev.Callee += "@" + node
		return ev
	}
	self := ev.Callee == ev.Service
	types := strings.Split(ev.Service, ",")
	for i, t := range types {
		types[i] = strings.TrimSpace(t) + "@" + node
	}
	ev.Service = strings.Join(types, ",")
	if self {
		ev.Callee = ev.Service
	}
	return ev
}
