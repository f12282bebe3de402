// Package admin serves a fake's control plane over HTTP on a unix socket (the fakes' --admin-socket
// flag): the recorded trace and the fault rules, so a harness or a person with curl can look at and
// steer a running fake without a restart.
//
//	GET    /trace            the events in the ring, as JSON lines (?since=SEQ for newer ones only)
//	GET    /trace?follow=1   the same, then every new event as it is recorded, until the client leaves (Client.Follow)
//	DELETE /trace            forget the events in the ring
//	GET    /faults           the rules, as JSON, with their hit counts
//	POST   /faults           add rules: a JSON or YAML rule, a list of rules, or {"rules": [...]}
//	DELETE /faults           remove every rule; DELETE /faults/ID removes one
//	GET    /debug/pprof/     the Go runtime's profiles of the fake's own process (net/http/pprof:
//	                         heap, goroutine, profile?seconds=N for CPU, trace), for go tool pprof
//
// The socket is the fake's owner's only (0600 unless its --admin-socket-mode says otherwise), so the
// profiles, like the trace, are shown to nobody else.
//
// Example: curl --unix-socket /run/plugsim/cri-admin.sock -d '{"method":"PullImage","code":"Unavailable","times":1}' http://x/faults
package admin

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/pprof"
	"strconv"
	"strings"
	"time"

	"github.com/plugsim/plugsim/harness/faults"
	"github.com/plugsim/plugsim/harness/trace"
	"github.com/plugsim/plugsim/internal/endpoint"
	"sigs.k8s.io/yaml"
)

// Handler returns the admin API over a recorder and a fault set (either may be nil).
func Handler(rec *trace.Recorder, fs *faults.Set) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /trace", func(w http.ResponseWriter, r *http.Request) {
		if rec == nil {
			http.Error(w, "this server records no trace", http.StatusNotFound)
			return
		}
		since, _ := strconv.ParseUint(r.URL.Query().Get("since"), 10, 64)
		w.Header().Set("Content-Type", "application/x-ndjson")
		enc := json.NewEncoder(w)
		var events <-chan trace.Event
		if r.URL.Query().Get("follow") != "" {
			ch, cancel := rec.Subscribe(1024)
			defer cancel()
			events = ch
		}
		for _, ev := range rec.Events() {
			if ev.Seq > since {
				enc.Encode(&ev)
				since = ev.Seq
			}
		}
		if events == nil {
			return
		}
		flusher, _ := w.(http.Flusher)
		for {
			if flusher != nil {
				flusher.Flush()
			}
			select {
			case ev, ok := <-events:
				if !ok {
					return
				}
				if ev.Seq > since {
					enc.Encode(&ev)
				}
			case <-r.Context().Done():
				return
			}
		}
	})
	mux.HandleFunc("DELETE /trace", func(w http.ResponseWriter, r *http.Request) {
		if rec != nil {
			rec.Reset()
		}
		w.WriteHeader(http.StatusNoContent)
	})
	mux.HandleFunc("GET /faults", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, map[string]any{"rules": rulesOf(fs)})
	})
	mux.HandleFunc("POST /faults", func(w http.ResponseWriter, r *http.Request) {
		if fs == nil {
			http.Error(w, "this server takes no fault rules", http.StatusNotFound)
			return
		}
		body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		rules, err := parseRules(body)
		if err == nil {
			var ids []string
			if ids, err = fs.Add(rules...); err == nil {
				writeJSON(w, map[string]any{"added": ids})
				return
			}
		}
		http.Error(w, err.Error(), http.StatusBadRequest)
	})
	mux.HandleFunc("DELETE /faults", func(w http.ResponseWriter, r *http.Request) {
		if fs != nil {
			fs.Reset()
		}
		w.WriteHeader(http.StatusNoContent)
	})
	mux.HandleFunc("DELETE /faults/{id}", func(w http.ResponseWriter, r *http.Request) {
		if fs == nil || !fs.Remove(r.PathValue("id")) {
			http.Error(w, fmt.Sprintf("no fault rule %q", r.PathValue("id")), http.StatusNotFound)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	})
	// What the fake itself spends (CPU, heap, goroutines), for finding what limits a node's throughput
	// or memory: go tool pprof reads these over the socket (harness/README.md, "Pod throughput").
	mux.HandleFunc("GET /debug/pprof/", pprof.Index)
	mux.HandleFunc("GET /debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("GET /debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("GET /debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("GET /debug/pprof/trace", pprof.Trace)
	return mux
}

func rulesOf(fs *faults.Set) []faults.Rule {
	if fs == nil {
		return []faults.Rule{}
	}
	return fs.Rules()
}

// parseRules accepts one rule, a list of rules, or a faults file ({"rules": [...]}), in JSON or YAML.
func parseRules(body []byte) ([]faults.Rule, error) {
	js, err := yaml.YAMLToJSON(body)
	if err != nil {
		return nil, fmt.Errorf("fault rules: %w", err)
	}
	s := strings.TrimSpace(string(js))
	switch {
	case strings.HasPrefix(s, "["):
		var rules []faults.Rule
		err = json.Unmarshal(js, &rules)
		return rules, err
	case strings.Contains(s, `"rules"`):
		f, err := faults.ParseFile(body, "request")
		return f.Rules, err
	default:
		var r faults.Rule
		err = json.Unmarshal(js, &r)
		return []faults.Rule{r}, err
	}
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.Encode(v)
}

// Server is a running admin endpoint.
type Server struct {
	srv *http.Server
	l   net.Listener
}

// Serve starts the admin API on a unix endpoint (mode 0600: it can change the fake's behaviour).
func Serve(ep string, rec *trace.Recorder, fs *faults.Set) (*Server, error) {
	l, err := endpoint.ListenMode(ep, 0o600)
	if err != nil {
		return nil, err
	}
	s := &Server{srv: &http.Server{Handler: Handler(rec, fs), ReadHeaderTimeout: 10 * time.Second}, l: l}
	go s.srv.Serve(l)
	return s, nil
}

// Close stops the admin endpoint.
func (s *Server) Close() error {
	if s == nil {
		return nil
	}
	return s.srv.Close()
}

// Client talks to a fake's admin socket.
type Client struct {
	http *http.Client
}

// NewClient returns a client for the admin socket at ep.
func NewClient(ep string) (*Client, error) {
	path, err := endpoint.Parse(ep)
	if err != nil {
		return nil, err
	}
	tr := &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "unix", path)
	}}
	return &Client{http: &http.Client{Transport: tr, Timeout: 30 * time.Second}}, nil
}

// Trace returns the events newer than since.
func (c *Client) Trace(since uint64) ([]trace.Event, error) {
	resp, err := c.http.Get("http://admin/trace?since=" + strconv.FormatUint(since, 10))
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		return nil, fmt.Errorf("admin: GET /trace: %s: %s", resp.Status, strings.TrimSpace(string(b)))
	}
	return trace.Read(resp.Body, "admin trace")
}

// Follow calls fn with each event newer than since in the ring, then with every event recorded
// after that as it is recorded (GET /trace?follow=1), until ctx ends (then it returns ctx's error)
// or the stream breaks (the fake stopped). The stream has no deadline of its own; a fake that lost
// events to a slow reader leaves a gap in their Seq.
func (c *Client) Follow(ctx context.Context, since uint64, fn func(trace.Event)) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://admin/trace?follow=1&since="+strconv.FormatUint(since, 10), nil)
	if err != nil {
		return err
	}
	stream := *c.http
	stream.Timeout = 0 // the Client's bound is for one request; a follow lasts as long as ctx
	resp, err := stream.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		return fmt.Errorf("admin: GET /trace?follow=1: %s: %s", resp.Status, strings.TrimSpace(string(b)))
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64*1024), 64*1024*1024)
	for sc.Scan() {
		if len(sc.Bytes()) == 0 {
			continue
		}
		var ev trace.Event
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			return fmt.Errorf("admin: GET /trace?follow=1: not a trace event: %w", err)
		}
		fn(ev)
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if err := sc.Err(); err != nil {
		return err
	}
	return io.ErrUnexpectedEOF
}

// AddFaults adds rules and returns their IDs.
func (c *Client) AddFaults(rules ...faults.Rule) ([]string, error) {
	body, err := json.Marshal(rules)
	if err != nil {
		return nil, err
	}
	resp, err := c.http.Post("http://admin/faults", "application/json", strings.NewReader(string(body)))
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("admin: POST /faults: %s: %s", resp.Status, strings.TrimSpace(string(b)))
	}
	var out struct {
		Added []string `json:"added"`
	}
	return out.Added, json.Unmarshal(b, &out)
}

// Faults returns the rules with their counts (Matched, Hits), used-up ones included.
func (c *Client) Faults() ([]faults.Rule, error) {
	resp, err := c.http.Get("http://admin/faults")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("admin: GET /faults: %s: %s", resp.Status, strings.TrimSpace(string(b)))
	}
	var out struct {
		Rules []faults.Rule `json:"rules"`
	}
	return out.Rules, json.Unmarshal(b, &out)
}

// ClearFaults removes every rule.
func (c *Client) ClearFaults() error {
	req, _ := http.NewRequest(http.MethodDelete, "http://admin/faults", nil)
	resp, err := c.http.Do(req)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNoContent {
		return fmt.Errorf("admin: DELETE /faults: %s", resp.Status)
	}
	return nil
}
