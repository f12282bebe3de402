// Package ui serves the live boundary view: one page, embedded in the binary, that draws every call
// crossing CRI, CNI and CSI as it happens, in the lanes `harness trace --svg` draws (kubelet and
// sidecars, cri-fake, cni-fake → portmap, csi-fake's controller and node halves; one set per node in
// a cluster).
//
// The server follows the fakes (Feed: an admin socket's GET /trace?follow=1, or a JSON-lines trace
// file such as cni-fake's), folds cni-fake's own line of a CNI call into the runtime's record of the
// whole chain (diagram.FoldCNI, as the trace command does), notes which pod and volume each call
// concerns, keeps the newest calls in a bounded ring, and streams them to the page as server-sent
// events, a batch every FlushEvery. The page asks for a call's request and response when it is
// clicked, adds fault rules through the fakes' admin API (FaultTarget) and exports what it shows as
// the SVG of diagram.SVG and as the JSON-lines trace. Nothing else is offered: the page can do what
// the admin API does and no more.
//
//	GET    /                      the page (index.html, app.js, app.css)
//	GET    /api/meta              title, the fault targets, the ring's bounds
//	GET    /api/events            server-sent events: "calls" batches of call summaries (Last-Event-ID resumes)
//	GET    /api/events/{id}       one call as the trace holds it: request, response, attrs
//	GET    /api/stats             events received, delivered, lost; clients
//	GET    /api/faults            every target's rules with their hit counts
//	POST   /api/faults/{target}   add a rule (JSON, the harness/faults format)
//	DELETE /api/faults/{target}   remove the target's rules
//	POST   /api/export?format=svg|jsonl   {"ids": [...]}: those calls as diagram.SVG or JSON lines
//
// Only the user who started the view may use it. Every /api/ request carries the view's token, a
// random 128-bit value the harness prints in the page's URL (http://127.0.0.1:PORT/#token=…) to that
// user's terminal and nowhere else: in the header X-Plugsim-UI, or, for the event stream (an
// EventSource cannot send headers), as ?token=. The fragment never reaches the server; the page keeps
// the token in its tab's sessionStorage. A TCP port on loopback is open to every local user, and a
// unix socket (the admin socket's mode) would keep them out as well but no browser can open one: the
// token keeps the browser (and the browser tests, and the screenshots) while refusing the other
// users, who could POST fault rules and read every call before (issue 24). A page of another origin
// cannot learn the token, nor send the header without a CORS preflight, which is never granted; and
// every request's Host must be the listener's own when it listens on loopback (a DNS-rebinding page
// names another host). The page's own files (/, app.js, app.css) are the same for everyone and need
// no token.
//
// What the server holds is bounded whatever a client does: the ring (Capacity calls, MaxBytes), the
// event streams (MaxClients at once, each with at most maxClientQueueBytes queued and writes that
// must progress within WriteTimeout, or the stream is dropped), an export (each call once, at most
// the ring), a fault rule's body (1 MiB; the fakes bound their rules: harness/faults/rules).
package ui

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"embed"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/plugsim/plugsim/harness/collect"
	"github.com/plugsim/plugsim/harness/diagram"
	"github.com/plugsim/plugsim/harness/faults"
	"github.com/plugsim/plugsim/harness/trace"
)

//go:embed assets
var assets embed.FS

// Defaults of Options.
const (
	DefaultCapacity   = 20000
	DefaultMaxBytes   = 64 << 20
	DefaultFlushEvery = 100 * time.Millisecond
	// DefaultBacklog is how many of the newest calls a page gets when it connects.
	DefaultBacklog = 5000
	// cniFoldWait is how long cni-fake's own line of a call waits for the runtime's record of the
	// chain it was part of (recorded when the whole chain has returned) before it is shown alone:
	// a CNI call the harness made itself (a scenario's cni step) has no such record.
	cniFoldWait = 2 * time.Second
	// cniChainWait is how long a line of a call cri-fake made waits instead: cri-fake records every
	// chain it runs, but only once the plugins after cni-fake (portmap and the iptables commands it
	// runs) have returned, which took more than cniFoldWait on a loaded machine, and the ADD was then
	// drawn twice. The record folds the line as soon as it arrives; the wait only bounds a record that
	// never comes.
	cniChainWait = time.Minute
	// chainRecorder is the caller cni-fake's line names when cri-fake ran it (cni-fake's default).
	chainRecorder = "cri-fake"
	// maxHeld bounds the plugin lines waiting for their chain's record; past it the oldest are shown.
	maxHeld = 10000
	// maxClientQueue bounds the batches queued for one page, and maxClientQueueBytes their size; a
	// page that falls further behind loses batches (and is told how many calls it lost) rather than
	// growing the server's memory.
	maxClientQueue      = 256
	maxClientQueueBytes = 8 << 20
	// MaxClients is how many event streams (pages) the view serves at once: 1,000 streams that never
	// read took it to 1.39 GB before (issue 24). One more is answered 503.
	MaxClients = 16
	// DefaultWriteTimeout is how long one write to a page may block (its reader stopped reading)
	// before the stream is dropped; the page reconnects by itself, resuming after the last call it got.
	DefaultWriteTimeout = 30 * time.Second
	// maxRuleBody bounds a fault rule's JSON, as the admin socket does (the rules' own bounds,
	// harness/faults/rules, are far below it and say which one a rule broke); maxExportBody an
	// export's list of ids (Capacity ids of 20 digits fit).
	maxRuleBody   = 1 << 20
	maxExportBody = 1 << 20
	// TokenHeader carries the view's token on every /api/ request but the event stream's.
	TokenHeader = "X-Plugsim-UI"
)

// Feed is where calls come from: it calls emit with each event, in the order its source recorded
// them, until ctx ends.
type Feed interface {
	Name() string
	Follow(ctx context.Context, emit func(trace.Event)) error
}

// FaultRules is a fake's fault rules: admin.Client (an admin socket) and wiring.CNIFaultFile
// (cni-fake's faults file) are both.
type FaultRules interface {
	AddFaults(...faults.Rule) ([]string, error)
	Faults() ([]faults.Rule, error)
	ClearFaults() error
}

// FaultTarget is a fake the page can add rules to, named as the lanes name it (cri-fake,
// csi-fake, cni-fake; cri-fake@node1 in a cluster).
type FaultTarget struct {
	Name  string
	Rules FaultRules
}

// Options configure a Server.
type Options struct {
	// Title heads the page and the exported SVG; From says where the calls come from, in the
	// exported SVG's subtitle ("N calls from FROM", as harness trace writes it).
	Title, From string
	Feeds       []Feed
	Faults      []FaultTarget
	// Capacity and MaxBytes bound the ring of calls kept for details and export (0: defaults).
	Capacity, MaxBytes int
	// Backlog is how many of the newest calls a page gets when it connects (0: DefaultBacklog).
	Backlog int
	// FlushEvery is how often a batch goes to the pages (0: DefaultFlushEvery).
	FlushEvery time.Duration
	// Logf reports a feed's errors (nil: dropped).
	Logf func(format string, args ...any)
	// Token is what every /api/ request must carry (see the package comment); empty means a new
	// random one (Server.Token, Server.URL).
	Token string
	// WriteTimeout is how long one write to a page may block before its stream is dropped (0:
	// DefaultWriteTimeout).
	WriteTimeout time.Duration
}

// Summary is what the page draws of a call; the request and response stay on the server until the
// call is clicked.
type Summary struct {
	ID        uint64   `json:"id"`
	Time      string   `json:"time"`
	StartNS   int64    `json:"start"`
	Interface string   `json:"iface"`
	From      string   `json:"from"`
	To        string   `json:"to"`
	Chain     []string `json:"chain,omitempty"`
	Method    string   `json:"method"`
	Label     string   `json:"label"`
	Code      string   `json:"code"`
	Error     string   `json:"error,omitempty"`
	Duration  string   `json:"dur"`
	Poll      bool     `json:"poll,omitempty"`
	Fault     string   `json:"fault,omitempty"`
	Line      string   `json:"line"`
	Concerns
}

// Server is the live view. The zero value is not usable; use New.
type Server struct {
	o Options

	mu      sync.Mutex
	pending []trace.Event
	held    []arrival // cni-fake's own lines waiting for their chain's record
	chains  []arrival // the runtime's records of whole chains, kept 2*cniFoldWait for those lines
	ring    []stored  // ids increasing
	bytes   int
	nextID  uint64
	clients map[*client]struct{}
	pods    *podIndex
	stats   Stats
	lastSeq map[string]uint64 // per feed, to count the events a fake dropped for a slow reader
}

type arrival struct {
	ev trace.Event
	at time.Time
}

type stored struct {
	sum  Summary
	ev   trace.Event
	size int
}

// Stats count what went through the server.
type Stats struct {
	// Received is every event the feeds delivered; Shown those that became calls (cni-fake's own
	// lines folded into their chain's are not); Missed the events a fake skipped for this server
	// (gaps in a feed's sequence numbers: its subscriber buffer was full).
	Received uint64 `json:"received"`
	Shown    uint64 `json:"shown"`
	Missed   uint64 `json:"missed"`
	// Delivered counts calls sent to pages, Lost those a page fell too far behind for.
	Delivered uint64 `json:"delivered"`
	Lost      uint64 `json:"lost"`
	Clients   int    `json:"clients"`
	Ring      int    `json:"ring"`
	RingBytes int    `json:"ringBytes"`
}

type client struct {
	ch     chan []byte
	lost   uint64       // under Server.mu
	queued atomic.Int64 // bytes in ch
}

// New returns a server; Run starts following its feeds.
func New(o Options) *Server {
	if o.Capacity <= 0 {
		o.Capacity = DefaultCapacity
	}
	if o.MaxBytes <= 0 {
		o.MaxBytes = DefaultMaxBytes
	}
	if o.Backlog <= 0 {
		o.Backlog = DefaultBacklog
	}
	if o.FlushEvery <= 0 {
		o.FlushEvery = DefaultFlushEvery
	}
	if o.WriteTimeout <= 0 {
		o.WriteTimeout = DefaultWriteTimeout
	}
	if o.Title == "" {
		o.Title = "live boundary view"
	}
	if o.Token == "" {
		b := make([]byte, 16)
		rand.Read(b) // never fails (crypto/rand: it panics rather than return an error)
		o.Token = hex.EncodeToString(b)
	}
	return &Server{o: o, clients: map[*client]struct{}{}, pods: newPodIndex(), lastSeq: map[string]uint64{}}
}

// Run follows every feed and sends batches to the pages until ctx ends. A feed that fails is
// retried every second (a fake restarted, a file not written yet).
func (s *Server) Run(ctx context.Context) {
	var wg sync.WaitGroup
	for _, f := range s.o.Feeds {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				err := f.Follow(ctx, func(ev trace.Event) { s.receive(f.Name(), ev) })
				if ctx.Err() != nil {
					return
				}
				if err != nil && s.o.Logf != nil {
					s.o.Logf("ui: %s: %v (retrying)", f.Name(), err)
				}
				select {
				case <-ctx.Done():
				case <-time.After(time.Second):
				}
			}
		}()
	}
	tick := time.NewTicker(s.o.FlushEvery)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			wg.Wait()
			return
		case now := <-tick.C:
			s.flush(now)
		}
	}
}

func (s *Server) receive(feed string, ev trace.Event) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stats.Received++
	if ev.Seq != 0 { // cni-fake's lines carry no sequence number
		if last, ok := s.lastSeq[feed]; ok && ev.Seq > last+1 {
			s.stats.Missed += ev.Seq - last - 1
		}
		s.lastSeq[feed] = ev.Seq
	}
	s.pending = append(s.pending, ev)
}

// pluginLine reports whether ev is a CNI plugin's own line of its call, which diagram.FoldCNI drops
// when the runtime recorded the chain it was part of.
func pluginLine(ev trace.Event) bool { return ev.Interface == trace.CNI && ev.Callee == ev.Service }

// flush turns what arrived into calls and sends them to the pages as one batch.
func (s *Server) flush(now time.Time) {
	s.mu.Lock()
	var batch []trace.Event
	for _, ev := range s.pending {
		if pluginLine(ev) {
			s.held = append(s.held, arrival{ev, now})
		} else {
			batch = append(batch, ev)
		}
	}
	s.pending = s.pending[:0]
	// The chains seen recently, this batch's among them, fold the plugin lines they cover (FoldCNI's
	// key: the verb and the container ID); a line a chain's record will not come for joins the batch
	// once it has waited long enough (holdFor).
	old := len(s.chains)
	for _, ev := range batch {
		if ev.Interface == trace.CNI && !pluginLine(ev) {
			s.chains = append(s.chains, arrival{ev, now})
		}
	}
	covered := map[foldKey]bool{}
	for _, c := range s.chains {
		covered[foldKeyOf(c.ev)] = true
	}
	keep := s.held[:0]
	for i, h := range s.held {
		switch {
		case covered[foldKeyOf(h.ev)]: // drawn as its chain's record
		case now.Sub(h.at) >= holdFor(h.ev) || len(s.held)-i > maxHeld: // the oldest first
			batch = append(batch, h.ev)
		default:
			keep = append(keep, h)
		}
	}
	clear(s.held[len(keep):])
	s.held = keep
	if len(batch) == 0 {
		s.expireChains(now)
		s.mu.Unlock()
		return
	}
	in := make([]trace.Event, 0, old+len(batch))
	for _, c := range s.chains[:old] {
		in = append(in, c.ev)
	}
	in = append(in, batch...)
	folded := diagram.FoldCNI(in)[old:] // chains are never dropped, so they lead the result
	s.expireChains(now)
	folded = collect.Merge(folded)
	sums := make([]Summary, 0, len(folded))
	for _, ev := range folded {
		s.nextID++
		sum := summarize(s.nextID, ev, s.pods.concerns(ev))
		s.store(stored{sum: sum, ev: ev, size: eventSize(ev)})
		sums = append(sums, sum)
	}
	s.stats.Shown += uint64(len(sums))
	s.broadcastLocked(sums)
	s.mu.Unlock()
}

// foldKey is what ties cni-fake's own line of a call to the runtime's record of its chain.
type foldKey struct{ method, container string }

func foldKeyOf(ev trace.Event) foldKey { return foldKey{ev.Method, ev.Attrs["containerID"]} }

// holdFor is how long a plugin line waits for its chain's record: a minute for a call cri-fake made
// (it records every chain), cniFoldWait for any other (a scenario's own CNI step has no record).
func holdFor(ev trace.Event) time.Duration {
	if ev.Caller == chainRecorder {
		return cniChainWait
	}
	return cniFoldWait
}

// expireChains forgets the chains' records old enough that no line of theirs can still arrive (a
// line is written before its chain's record, and the feeds poll every 100 ms).
func (s *Server) expireChains(now time.Time) {
	recent := s.chains[:0]
	for _, c := range s.chains {
		if now.Sub(c.at) < 2*cniFoldWait {
			recent = append(recent, c)
		}
	}
	clear(s.chains[len(recent):])
	s.chains = recent
}

func eventSize(ev trace.Event) int {
	n := 256 + len(ev.Request) + len(ev.Response) + len(ev.Error)
	for k, v := range ev.Attrs {
		n += len(k) + len(v)
	}
	return n
}

// store appends to the ring, dropping the oldest calls past either bound.
func (s *Server) store(st stored) {
	s.ring = append(s.ring, st)
	s.bytes += st.size
	drop := 0
	for len(s.ring)-drop > s.o.Capacity || (s.bytes > s.o.MaxBytes && len(s.ring)-drop > 1) {
		s.bytes -= s.ring[drop].size
		drop++
	}
	if drop > 0 {
		// Copy down once the dropped prefix is large, so the backing array does not grow forever.
		if drop > len(s.ring)/4 || cap(s.ring) > 2*s.o.Capacity {
			s.ring = append(make([]stored, 0, s.o.Capacity+s.o.Capacity/4), s.ring[drop:]...)
		} else {
			clear(s.ring[:drop])
			s.ring = s.ring[drop:]
		}
	}
}

type envelope struct {
	Calls []Summary `json:"calls"`
	// Lost counts calls this page did not get because it fell behind; Missed the events the fakes
	// skipped for this server. Both are totals so far.
	Lost   uint64 `json:"lost"`
	Missed uint64 `json:"missed"`
}

func sseMessage(sums []Summary, lost, missed uint64) []byte {
	if sums == nil {
		sums = []Summary{}
	}
	b, _ := json.Marshal(envelope{Calls: sums, Lost: lost, Missed: missed})
	msg := make([]byte, 0, len(b)+64)
	if len(sums) > 0 {
		msg = fmt.Appendf(msg, "id: %d\n", sums[len(sums)-1].ID)
	}
	msg = append(msg, "event: calls\ndata: "...)
	msg = append(msg, b...)
	return append(msg, "\n\n"...)
}

func (s *Server) broadcastLocked(sums []Summary) {
	for c := range s.clients {
		msg := sseMessage(sums, c.lost, s.stats.Missed)
		if c.queued.Load()+int64(len(msg)) > maxClientQueueBytes {
			c.lost += uint64(len(sums))
			s.stats.Lost += uint64(len(sums))
			continue
		}
		select {
		case c.ch <- msg:
			c.queued.Add(int64(len(msg)))
			s.stats.Delivered += uint64(len(sums))
		default:
			c.lost += uint64(len(sums))
			s.stats.Lost += uint64(len(sums))
		}
	}
}

// find returns the stored call with this id.
func (s *Server) find(id uint64) (stored, bool) {
	i := sort.Search(len(s.ring), func(i int) bool { return s.ring[i].sum.ID >= id })
	if i < len(s.ring) && s.ring[i].sum.ID == id {
		return s.ring[i], true
	}
	return stored{}, false
}

// Stats returns the counters so far.
func (s *Server) Stats() Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.stats
	st.Clients, st.Ring, st.RingBytes = len(s.clients), len(s.ring), s.bytes
	return st
}

// Token is what every /api/ request must carry.
func (s *Server) Token() string { return s.o.Token }

// URL is the page's address on the listener at addr, with the token: what the harness prints.
func (s *Server) URL(addr string) string { return "http://" + addr + "/#token=" + s.o.Token }

// Handler serves the page and its API. addr is the listener's address ("127.0.0.1:8088"): on
// loopback, requests naming another Host are refused.
func (s *Server) Handler(addr string) http.Handler {
	mux := http.NewServeMux()
	static, _ := fs.Sub(assets, "assets")
	mux.Handle("GET /", http.FileServerFS(static))
	mux.HandleFunc("GET /api/meta", s.meta)
	mux.HandleFunc("GET /api/events", s.events)
	mux.HandleFunc("GET /api/events/{id}", s.event)
	mux.HandleFunc("GET /api/stats", func(w http.ResponseWriter, r *http.Request) { writeJSON(w, s.Stats()) })
	mux.HandleFunc("GET /api/faults", s.listFaults)
	mux.HandleFunc("POST /api/faults/{target}", s.addFault)
	mux.HandleFunc("DELETE /api/faults/{target}", s.clearFaults)
	mux.HandleFunc("POST /api/export", s.export)
	return guard(addr, s.o.Token, mux)
}

// guard refuses an /api/ request without the view's token (see the package comment), and what a page
// of another site could make a browser send: a Host that is not this listener's (DNS rebinding) on
// loopback.
func guard(addr, token string, next http.Handler) http.Handler {
	host, _, _ := net.SplitHostPort(addr)
	loop := isLoopback(host)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if loop {
			h := r.Host
			if hh, _, err := net.SplitHostPort(h); err == nil {
				h = hh
			}
			if !isLoopback(strings.Trim(h, "[]")) {
				http.Error(w, "this view serves loopback names only (Host "+r.Host+")", http.StatusForbidden)
				return
			}
		}
		if strings.HasPrefix(r.URL.Path, "/api/") {
			got := r.Header.Get(TokenHeader)
			if got == "" && r.Method == http.MethodGet && r.URL.Path == "/api/events" {
				got = r.URL.Query().Get("token")
			}
			if subtle.ConstantTimeCompare([]byte(got), []byte(token)) != 1 {
				http.Error(w, "this view answers only the user who started it: open the URL the harness printed (it ends in #token=…)", http.StatusForbidden)
				return
			}
		}
		w.Header().Set("X-Content-Type-Options", "nosniff")
		w.Header().Set("Content-Security-Policy", "default-src 'self'; img-src 'self' blob: data:; style-src 'self'; script-src 'self'; connect-src 'self'")
		next.ServeHTTP(w, r)
	})
}

func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// Listen opens addr for the view. A non-loopback address is refused unless allowRemote; then the
// returned warning says what that exposes.
func Listen(addr string, allowRemote bool) (l net.Listener, warning string, err error) {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, "", fmt.Errorf("--addr %q: %w (want HOST:PORT, such as 127.0.0.1:8088)", addr, err)
	}
	if !isLoopback(host) {
		if !allowRemote {
			return nil, "", fmt.Errorf("--addr %s is not a loopback address: the view lets whoever reaches it add fault rules to the fakes; pass --allow-remote to serve it there anyway", addr)
		}
		warning = fmt.Sprintf("warning: the view listens on %s, beyond this machine's loopback: anyone who reaches it sees every call's request and response and can add fault rules to the fakes", addr)
	}
	l, err = net.Listen("tcp", addr)
	return l, warning, err
}

// Serve serves the view on l until ctx ends.
func (s *Server) Serve(ctx context.Context, l net.Listener) error {
	srv := &http.Server{Handler: s.Handler(l.Addr().String()), ReadHeaderTimeout: 10 * time.Second}
	go func() {
		<-ctx.Done()
		srv.Close()
	}()
	go s.Run(ctx)
	err := srv.Serve(l)
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return err
}

func (s *Server) meta(w http.ResponseWriter, r *http.Request) {
	names := []string{}
	for _, t := range s.o.Faults {
		names = append(names, t.Name)
	}
	polls := make([]string, 0, len(diagram.Polls))
	for m := range diagram.Polls {
		polls = append(polls, m)
	}
	sort.Strings(polls)
	writeJSON(w, map[string]any{"title": s.o.Title, "from": s.o.From, "faultTargets": names,
		"capacity": s.o.Capacity, "backlog": s.o.Backlog, "housekeeping": polls})
}

func (s *Server) events(w http.ResponseWriter, r *http.Request) {
	if _, ok := w.(http.Flusher); !ok {
		http.Error(w, "streaming unsupported", http.StatusInternalServerError)
		return
	}
	after, _ := strconv.ParseUint(r.Header.Get("Last-Event-ID"), 10, 64)
	c := &client{ch: make(chan []byte, maxClientQueue)}
	s.mu.Lock()
	if len(s.clients) >= MaxClients {
		s.mu.Unlock()
		http.Error(w, fmt.Sprintf("the view serves at most %d pages at once: close one", MaxClients), http.StatusServiceUnavailable)
		return
	}
	start := len(s.ring) - s.o.Backlog
	if after > 0 {
		start = sort.Search(len(s.ring), func(i int) bool { return s.ring[i].sum.ID > after })
	}
	start = max(start, 0)
	backlog := make([]Summary, 0, len(s.ring)-start)
	for _, st := range s.ring[start:] {
		backlog = append(backlog, st.sum)
	}
	missed := s.stats.Missed
	s.clients[c] = struct{}{}
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.clients, c)
		s.mu.Unlock()
	}()
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	// Every write must go through within WriteTimeout: a page that stopped reading is dropped
	// instead of holding a goroutine and its queue for ever.
	rc := http.NewResponseController(w)
	send := func(b []byte) bool {
		rc.SetWriteDeadline(time.Now().Add(s.o.WriteTimeout))
		if _, err := w.Write(b); err != nil {
			return false
		}
		return rc.Flush() == nil
	}
	io.WriteString(w, "retry: 2000\n\n")
	for len(backlog) > 0 {
		n := min(len(backlog), 1000)
		if !send(sseMessage(backlog[:n], 0, missed)) {
			return
		}
		backlog = backlog[n:]
	}
	if !send(sseMessage(nil, 0, missed)) { // says "connected" to a page with nothing to draw yet
		return
	}
	backlog = nil
	ping := time.NewTicker(15 * time.Second)
	defer ping.Stop()
	for {
		select {
		case msg := <-c.ch:
			c.queued.Add(-int64(len(msg)))
			if !send(msg) {
				return
			}
		case <-ping.C:
			if !send([]byte(": ping\n\n")) {
				return
			}
		case <-r.Context().Done():
			return
		}
	}
}

func (s *Server) event(w http.ResponseWriter, r *http.Request) {
	id, err := strconv.ParseUint(r.PathValue("id"), 10, 64)
	if err != nil {
		http.Error(w, "not a call id", http.StatusBadRequest)
		return
	}
	s.mu.Lock()
	st, ok := s.find(id)
	s.mu.Unlock()
	if !ok {
		http.Error(w, fmt.Sprintf("call %d is no longer held (the view keeps the newest %d)", id, s.o.Capacity), http.StatusNotFound)
		return
	}
	writeJSON(w, map[string]any{"summary": st.sum, "event": st.ev})
}

// target is the fault target the request's path names; it answers 404 itself when there is none.
func (s *Server) target(w http.ResponseWriter, r *http.Request) (FaultRules, bool) {
	for _, t := range s.o.Faults {
		if t.Name == r.PathValue("target") {
			return t.Rules, true
		}
	}
	http.Error(w, fmt.Sprintf("no fault target %q", r.PathValue("target")), http.StatusNotFound)
	return nil, false
}

func (s *Server) listFaults(w http.ResponseWriter, r *http.Request) {
	type targetRules struct {
		Name  string        `json:"name"`
		Rules []faults.Rule `json:"rules"`
		Error string        `json:"error,omitempty"`
	}
	out := []targetRules{}
	for _, t := range s.o.Faults {
		rules, err := t.Rules.Faults()
		tr := targetRules{Name: t.Name, Rules: rules}
		if tr.Rules == nil {
			tr.Rules = []faults.Rule{}
		}
		if err != nil {
			tr.Error = err.Error()
		}
		out = append(out, tr)
	}
	writeJSON(w, map[string]any{"targets": out})
}

func (s *Server) addFault(w http.ResponseWriter, r *http.Request) {
	rules, ok := s.target(w, r)
	if !ok {
		return
	}
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxRuleBody))
	dec.DisallowUnknownFields()
	var rule faults.Rule
	if err := dec.Decode(&rule); err != nil {
		http.Error(w, "fault rule: "+err.Error(), http.StatusBadRequest)
		return
	}
	ids, err := rules.AddFaults(rule)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	writeJSON(w, map[string]any{"added": ids})
}

func (s *Server) clearFaults(w http.ResponseWriter, r *http.Request) {
	rules, ok := s.target(w, r)
	if !ok {
		return
	}
	if err := rules.ClearFaults(); err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// export writes the calls the page shows as `harness trace` would: diagram.SVG with its subtitle,
// or the JSON-lines trace (harness trace, harness replay read it back).
func (s *Server) export(w http.ResponseWriter, r *http.Request) {
	var req struct {
		IDs   []uint64 `json:"ids"`
		Title string   `json:"title"`
	}
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxExportBody)).Decode(&req); err != nil {
		http.Error(w, "export: "+err.Error(), http.StatusBadRequest)
		return
	}
	if len(req.IDs) > s.o.Capacity {
		http.Error(w, fmt.Sprintf("export: %d ids, more than the %d calls the view holds", len(req.IDs), s.o.Capacity), http.StatusBadRequest)
		return
	}
	// Each call once: an export is at most the ring (Capacity calls, MaxBytes), however often a
	// request names a call (one 1 MB call named 2,000 times made a 2.1 GB answer before).
	slices.Sort(req.IDs)
	req.IDs = slices.Compact(req.IDs)
	s.mu.Lock()
	evs := make([]trace.Event, 0, len(req.IDs))
	for _, id := range req.IDs {
		if st, ok := s.find(id); ok {
			evs = append(evs, st.ev)
		}
	}
	s.mu.Unlock()
	evs = collect.Merge(evs)
	title := req.Title
	if title == "" {
		title = s.o.Title
	}
	switch r.URL.Query().Get("format") {
	case "svg":
		w.Header().Set("Content-Type", "image/svg+xml")
		w.Header().Set("Content-Disposition", `attachment; filename="boundary-trace.svg"`)
		w.Write(diagram.SVG(title, fmt.Sprintf("%d calls from %s", len(evs), s.o.From), []diagram.Section{{Events: evs}}))
	case "jsonl":
		w.Header().Set("Content-Type", "application/x-ndjson")
		w.Header().Set("Content-Disposition", `attachment; filename="boundary-trace.jsonl"`)
		enc := json.NewEncoder(w)
		for i := range evs {
			enc.Encode(&evs[i])
		}
	default:
		http.Error(w, "format: svg or jsonl", http.StatusBadRequest)
	}
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(v)
}

func summarize(id uint64, ev trace.Event, c Concerns) Summary {
	return Summary{
		ID: id, Time: ev.Time.Format("15:04:05.000"), StartNS: ev.Time.UnixNano(), Interface: ev.Interface,
		From: diagram.Caller(ev), To: diagram.Callee(ev), Chain: diagram.Chain(ev),
		Method: ev.Method, Label: diagram.Label(ev), Code: ev.Code, Error: ev.Error,
		Duration: diagram.Ms(ev.Duration()), Poll: diagram.Polls[ev.Method], Fault: ev.Attrs["fault"],
		Line: diagram.Line(ev), Concerns: c,
	}
}
