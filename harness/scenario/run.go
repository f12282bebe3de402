package scenario

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/plugsim/plugsim/harness/call"
	"github.com/plugsim/plugsim/harness/collect"
	"github.com/plugsim/plugsim/harness/diagram"
	"github.com/plugsim/plugsim/harness/faults"
	"github.com/plugsim/plugsim/harness/trace"
)

// FaultTarget adds and clears fault rules in one fake (in-process or through its admin socket).
type FaultTarget interface {
	AddFaults(rules ...faults.Rule) ([]string, error)
	ClearFaults() error
}

// Env is what a scenario runs against.
type Env struct {
	CRI grpc.ClientConnInterface
	// CSIController serves Identity, Controller and GroupController; CSINode serves Node (and
	// Identity for the kubelet's calls). They may be the same connection.
	CSIController grpc.ClientConnInterface
	CSINode       grpc.ClientConnInterface
	CNI           *CNIEnv
	Faults        map[string]FaultTarget
	// Trace collects what the fakes recorded; nil means the endpoints are not fakes, and the
	// harness draws the calls it made itself.
	Trace *collect.Collector
	// Vars are predefined variables (${cniConfDir}, ${nodeId} ...); ${run} is added per run.
	Vars map[string]string
	// CallTimeout bounds each call (default 30s).
	CallTimeout time.Duration
	// Out receives the live report (nil: silent); Quiet leaves out the trace lines.
	Out   io.Writer
	Quiet bool
	// KeepGoing runs every step even after one failed (a replay counts all its mismatches).
	KeepGoing bool
}

// StepResult is the outcome of one step.
type StepResult struct {
	Step     *Step
	Passed   bool
	Skipped  bool
	Failure  string
	Duration time.Duration
	Code     string
	Events   []trace.Event
}

// Result is the outcome of one scenario.
type Result struct {
	Scenario *Scenario
	Steps    []StepResult
	Passed   bool
	Duration time.Duration
	// Failure names the first failing step with its file line.
	Failure string
	// Failed counts the steps that failed.
	Failed int
}

// Sections returns the steps as diagram sections.
func (r *Result) Sections() []diagram.Section {
	var out []diagram.Section
	for _, s := range r.Steps {
		if s.Skipped {
			continue
		}
		out = append(out, diagram.Section{
			Title:  fmt.Sprintf("%d. %s", s.Step.Index, s.Step.Title()),
			Failed: !s.Passed,
			Events: s.Events,
		})
	}
	return out
}

// runner holds one run's state.
type runner struct {
	env  *Env
	sc   *Scenario
	vars map[string]string
}

// Run runs the steps in order and stops at the first failure: later steps usually need what
// the failed one should have captured.
func Run(ctx context.Context, sc *Scenario, env *Env) *Result {
	r := &runner{env: env, sc: sc, vars: map[string]string{}}
	for k, v := range env.Vars {
		r.vars[k] = v
	}
	if _, ok := r.vars["run"]; !ok {
		r.vars["run"] = randomToken()
	}
	r.vars["scenarioDir"] = filepath.Dir(sc.File)
	if env.Trace != nil {
		env.Trace.Next() // start from a clean slate: only this scenario's calls
	}
	res := &Result{Scenario: sc, Passed: true}
	start := time.Now()
	out := env.Out
	if out == nil {
		out = io.Discard
	}
	fmt.Fprintf(out, "▶ %s  (%s)\n", sc.Name, sc.File)
	for _, st := range sc.Steps {
		if !res.Passed && !env.KeepGoing {
			res.Steps = append(res.Steps, StepResult{Step: st, Skipped: true})
			continue
		}
		sr := r.step(ctx, st)
		res.Steps = append(res.Steps, sr)
		mark := "✓"
		if !sr.Passed {
			mark = "✗"
			if res.Passed {
				res.Failure = sr.Failure
			}
			res.Passed = false
			res.Failed++
		}
		what := st.Interface + " " + st.Call
		if st.Interface == Fault {
			what = "fault " + st.Call + " → " + st.Target
		}
		fmt.Fprintf(out, "  %s %d. %s  [%s, line %d]\n", mark, st.Index, st.Title(), what, st.Line)
		if !env.Quiet {
			diagram.Text(out, "       ", sr.Events)
		}
		if !sr.Passed {
			fmt.Fprintf(out, "       FAIL %s\n", sr.Failure)
		}
	}
	res.Duration = time.Since(start)
	verdict := "PASS"
	if !res.Passed {
		verdict = "FAIL"
	}
	fmt.Fprintf(out, "%s %s (%d steps, %s)\n\n", verdict, sc.Name, len(sc.Steps), res.Duration.Round(time.Millisecond))
	return res
}

func randomToken() string {
	b := make([]byte, 4)
	rand.Read(b)
	return hex.EncodeToString(b)
}

func (r *runner) fail(st *Step, format string, args ...any) string {
	return fmt.Sprintf("%s:%d: step %d %q (%s %s): %s", r.sc.File, st.Line, st.Index, st.Title(), st.Interface, st.Call, fmt.Sprintf(format, args...))
}

// outcome is what one attempt of a step returned.
type outcome struct {
	code string
	msg  string
	doc  any // the answer as decoded JSON, for expectations and captures
	err  error
	// client describes the call as the harness saw it, for endpoints that record nothing.
	client []trace.Event
}

func (r *runner) step(ctx context.Context, st *Step) StepResult {
	sr := StepResult{Step: st}
	start := time.Now()
	deadline := time.Time{}
	if st.Wait != nil {
		deadline = start.Add(st.Wait.Timeout)
	}
	var o outcome
	var problems []string
	var client []trace.Event
	for attempt := 1; ; attempt++ {
		o = r.attempt(ctx, st)
		client = append(client, o.client...)
		if o.err != nil {
			sr.Failure = r.fail(st, "%v", o.err)
			break
		}
		problems = r.check(st, o)
		if len(problems) == 0 || st.Wait == nil || time.Now().After(deadline) || ctx.Err() != nil {
			if len(problems) > 0 && st.Wait != nil {
				problems = append(problems, fmt.Sprintf("(still so after waiting %s, %d attempts)", st.Wait.Timeout, attempt))
			}
			break
		}
		select {
		case <-time.After(st.Wait.Interval):
		case <-ctx.Done():
		}
	}
	sr.Code = o.code
	if sr.Failure == "" && len(problems) > 0 {
		sr.Failure = r.fail(st, "%s", strings.Join(problems, "; "))
	}
	if sr.Failure == "" {
		for _, c := range st.Capture {
			v, ok, err := lookup(o.doc, r.subst(c.Path))
			if err != nil || !ok || v == nil {
				sr.Failure = r.fail(st, "capture %s: the answer has no %s", c.Var, c.Path)
				break
			}
			r.vars[c.Var] = scalarString(v)
		}
	}
	sr.Duration = time.Since(start)
	sr.Events = r.events(st, client)
	if sr.Failure == "" {
		if problems := r.checkTrace(st, sr.Events); len(problems) > 0 {
			sr.Failure = r.fail(st, "%s", strings.Join(problems, "; "))
		}
	}
	sr.Passed = sr.Failure == ""
	return sr
}

// events returns what crossed the boundaries during the step. The harness plays the kubelet and
// the CSI sidecars, so the callers of its own gRPC calls are named after the component that
// makes that call in a cluster.
func (r *runner) events(st *Step, client []trace.Event) []trace.Event {
	if r.env.Trace == nil {
		return client
	}
	evs, err := r.env.Trace.Next()
	if st.Interface == CNI {
		// The harness itself ran the chain through libcni: its own record names the whole
		// chain, as the runtime's does for RunPodSandbox.
		evs = collect.Merge(client, evs)
	}
	evs = diagram.FoldCNI(evs)
	if err != nil && r.env.Out != nil {
		fmt.Fprintf(r.env.Out, "       (trace: %v)\n", err)
	}
	for i := range evs {
		ev := &evs[i]
		if (ev.Interface == trace.CRI || ev.Interface == trace.CSI) && genericCaller(ev.Caller) {
			ev.Caller = r.role(st, ev.Interface, ev.Method)
		}
	}
	return evs
}

func genericCaller(c string) bool {
	switch strings.ToLower(c) {
	case "", "kubelet", "harness", "client", "co", "unknown", "runtime", "csi-controller":
		return true
	}
	return false
}

func (r *runner) attempt(ctx context.Context, st *Step) outcome {
	timeout := r.env.CallTimeout
	if timeout <= 0 {
		timeout = 30 * time.Second
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	switch st.Interface {
	case CRI, CSI:
		return r.grpcCall(ctx, st)
	case CNI:
		return r.cniCall(ctx, st)
	case Node:
		return r.nodeCall(ctx, st)
	case Fault:
		return r.faultCall(st)
	}
	return outcome{err: fmt.Errorf("unknown interface %q", st.Interface)}
}

func (r *runner) conn(st *Step) (grpc.ClientConnInterface, error) {
	if st.Interface == CRI {
		if r.env.CRI == nil {
			return nil, errors.New("no CRI endpoint (give --cri-endpoint, or let the harness start cri-fake)")
		}
		return r.env.CRI, nil
	}
	// The kubelet talks to the node plugin; the sidecars to the controller plugin.
	cc := r.env.CSIController
	if strings.Contains(st.Method.FullMethod, "csi.v1.Node/") || (strings.Contains(st.Method.FullMethod, "csi.v1.Identity/") && !strings.HasPrefix(r.role(st, trace.CSI, st.Method.Name), "external-") && r.env.CSINode != nil) {
		cc = r.env.CSINode
	}
	if cc == nil {
		return nil, errors.New("no CSI endpoint for this call (give --csi-endpoint, or let the harness start csi-fake)")
	}
	return cc, nil
}

func (r *runner) grpcCall(ctx context.Context, st *Step) outcome {
	cc, err := r.conn(st)
	if err != nil {
		return outcome{err: err}
	}
	js, err := r.requestJSON(st)
	if err != nil {
		return outcome{err: err}
	}
	req, err := st.Method.NewRequest(js)
	if err != nil {
		return outcome{err: err}
	}
	// Name the component the harness plays, so the fake's trace records it (one socket serves
	// the kubelet and the sidecars alike).
	ctx = metadata.AppendToOutgoingContext(ctx, trace.CallerMetadata, r.role(st, strings.ToUpper(st.Interface), st.Method.Name))
	start := time.Now()
	res := call.Invoke(ctx, cc, st.Method, req)
	o := outcome{code: status.Code(res.Err).String()}
	if res.Err != nil {
		o.msg = status.Convert(res.Err).Message()
	}
	var doc any
	if res.Response != nil {
		json.Unmarshal(call.FullJSON(res.Response), &doc)
	}
	o.doc = doc
	callee := "cri"
	if st.Interface == CSI {
		callee = "csi"
	}
	o.client = []trace.Event{{
		Time: start, Interface: strings.ToUpper(st.Interface), Caller: r.role(st, strings.ToUpper(st.Interface), st.Method.Name),
		Callee: callee + " endpoint", Method: st.Method.Name, Code: o.code, Error: o.msg, DurationNS: int64(res.Duration),
	}}
	return o
}

// requestJSON substitutes the variables in the step's request and returns it as JSON.
func (r *runner) requestJSON(st *Step) ([]byte, error) {
	if st.Request == nil {
		return nil, nil
	}
	n, err := r.substNode(st.Request)
	if err != nil {
		return nil, err
	}
	return nodeJSON(n)
}

var varRE = regexp.MustCompile(`\$\{([A-Za-z_][A-Za-z0-9_]*)\}`)

// subst replaces ${name} with the variable's value; unknown variables are left for substNode to
// report.
func (r *runner) subst(s string) string {
	return varRE.ReplaceAllStringFunc(s, func(m string) string {
		if v, ok := r.vars[m[2:len(m)-1]]; ok {
			return v
		}
		return m
	})
}

// substNode copies a YAML node with every ${var} in its scalars replaced.
func (r *runner) substNode(n *yaml.Node) (*yaml.Node, error) {
	c := *n
	if n.Kind == yaml.ScalarNode {
		for _, m := range varRE.FindAllStringSubmatch(n.Value, -1) {
			if _, ok := r.vars[m[1]]; !ok {
				return nil, fmt.Errorf("line %d: variable ${%s} is not set (captured so far: %s)", n.Line, m[1], keys(r.vars))
			}
		}
		c.Value = r.subst(n.Value)
		return &c, nil
	}
	c.Content = nil
	for _, e := range n.Content {
		s, err := r.substNode(e)
		if err != nil {
			return nil, err
		}
		c.Content = append(c.Content, s)
	}
	return &c, nil
}

// check compares an outcome with the step's expectations.
func (r *runner) check(st *Step, o outcome) []string {
	var problems []string
	want := st.Expect.Code
	if want == "" {
		want = "OK"
	}
	if o.code != want {
		got := o.code
		if o.msg != "" {
			got += " (" + o.msg + ")"
		}
		problems = append(problems, fmt.Sprintf("expected code %s, got %s", want, got))
		return problems
	}
	if e := r.subst(st.Expect.Error); e != "" && !strings.Contains(o.msg, e) {
		problems = append(problems, fmt.Sprintf("expected the error to contain %q, got %q", e, o.msg))
	}
	for _, fe := range st.Expect.Fields {
		val := fe.Value
		if s, ok := val.(string); ok {
			val = r.subst(s)
		}
		ok, got, err := fe.check(o.doc, val)
		if err != nil {
			problems = append(problems, fmt.Sprintf("line %d: %s: %v", fe.Line, fe.Path, err))
			continue
		}
		if !ok {
			problems = append(problems, fmt.Sprintf("line %d: expected %s %s %v, got %s", fe.Line, fe.Path, fe.Op, val, got))
		}
	}
	return problems
}

func (r *runner) nodeCall(ctx context.Context, st *Step) outcome {
	n, err := r.substNode(st.Request)
	if err != nil {
		return outcome{err: err}
	}
	var req struct {
		Path     string `yaml:"path"`
		Content  string `yaml:"content"`
		Duration string `yaml:"duration"`
	}
	if err := n.Decode(&req); err != nil {
		return outcome{err: err}
	}
	switch st.Call {
	case "WriteFile":
		if err := os.MkdirAll(filepath.Dir(req.Path), 0o755); err != nil {
			return outcome{err: err}
		}
		// Write then rename, as a config management tool would, so a watcher never sees half a file.
		tmp := filepath.Join(filepath.Dir(req.Path), "."+filepath.Base(req.Path)+".tmp")
		if err := os.WriteFile(tmp, []byte(req.Content), 0o644); err != nil {
			return outcome{err: err}
		}
		if err := os.Rename(tmp, req.Path); err != nil {
			return outcome{err: err}
		}
	case "MakeDir":
		if err := os.MkdirAll(req.Path, 0o750); err != nil {
			return outcome{err: err}
		}
	case "RemoveFile":
		if err := os.Remove(req.Path); err != nil && !errors.Is(err, os.ErrNotExist) {
			return outcome{err: err}
		}
	case "Sleep":
		d, err := time.ParseDuration(req.Duration)
		if err != nil {
			return outcome{err: fmt.Errorf("Sleep: duration %q: %v", req.Duration, err)}
		}
		select {
		case <-time.After(d):
		case <-ctx.Done():
		}
	}
	return outcome{code: "OK"}
}

func (r *runner) faultCall(st *Step) outcome {
	t := r.env.Faults[st.Target]
	if t == nil {
		return outcome{err: fmt.Errorf("cannot reach the fault rules of %s (no admin socket or in-process fake)", st.Target)}
	}
	if st.Call == "Clear" {
		if err := t.ClearFaults(); err != nil {
			return outcome{err: err}
		}
		return outcome{code: "OK"}
	}
	rules := make([]faults.Rule, len(st.Rules))
	copy(rules, st.Rules)
	for i := range rules {
		for k, v := range rules[i].Match {
			if rules[i].Match != nil {
				m := map[string]string{}
				for k2, v2 := range rules[i].Match {
					m[k2] = v2
				}
				rules[i].Match = m
			}
			rules[i].Match[k] = r.subst(v)
		}
		rules[i].Message = r.subst(rules[i].Message)
	}
	ids, err := t.AddFaults(rules...)
	if err != nil {
		return outcome{err: err}
	}
	return outcome{code: "OK", doc: map[string]any{"ids": toAny(ids)}}
}

func toAny(ss []string) []any {
	out := make([]any, len(ss))
	for i, s := range ss {
		out[i] = s
	}
	return out
}

// checkTrace applies the step's trace expectations to its events.
func (r *runner) checkTrace(st *Step, evs []trace.Event) []string {
	var problems []string
	for _, te := range st.Expect.Trace {
		var matched []trace.Event
		var near []string
		for _, ev := range evs {
			if !te.matches(ev) {
				continue
			}
			doc := eventDoc(ev)
			ok := true
			for _, fe := range te.Fields {
				val := fe.Value
				if s, isStr := val.(string); isStr {
					val = r.subst(s)
				}
				if good, got, _ := fe.check(doc, val); !good {
					ok = false
					near = append(near, fmt.Sprintf("%s %s was %s", ev.Method, fe.Path, got))
					break
				}
			}
			if ok {
				matched = append(matched, ev)
			}
		}
		switch {
		case te.Absent && len(matched) > 0:
			problems = append(problems, fmt.Sprintf("line %d: expected no call [%s], but one crossed the boundary: %s", te.Line, te.describe(), diagram.Line(matched[0])))
		case !te.Absent && len(matched) == 0:
			msg := fmt.Sprintf("line %d: expected a call [%s] in the step's trace; none of its %d calls matched", te.Line, te.describe(), len(evs))
			if len(near) > 0 {
				msg += " (" + strings.Join(near, ", ") + ")"
			}
			problems = append(problems, msg)
		}
	}
	return problems
}

func (te TraceExpect) describe() string {
	var parts []string
	for _, p := range [][2]string{{"", te.Interface}, {"", te.Method}, {"from ", te.Caller}, {"to ", te.Callee}, {"code ", te.Code}} {
		if p[1] != "" {
			parts = append(parts, p[0]+p[1])
		}
	}
	if len(te.Fields) > 0 {
		var paths []string
		for _, f := range te.Fields {
			paths = append(paths, f.Path)
		}
		parts = append(parts, "with "+strings.Join(paths, ", "))
	}
	return strings.Join(parts, " ")
}

func (te TraceExpect) matches(ev trace.Event) bool {
	if te.Interface != "" && te.Interface != ev.Interface {
		return false
	}
	if te.Method != "" && !strings.EqualFold(te.Method, ev.Method) {
		return false
	}
	if te.Caller != "" && te.Caller != ev.Caller && te.Caller != diagram.Caller(ev) {
		return false
	}
	if te.Code != "" && te.Code != ev.Code {
		return false
	}
	if te.Callee != "" {
		ok := te.Callee == ev.Callee || te.Callee == diagram.Callee(ev)
		for _, p := range diagram.Chain(ev) {
			ok = ok || te.Callee == p
		}
		if !ok {
			return false
		}
	}
	return true
}

// eventDoc is an event as the JSON document trace field paths address.
func eventDoc(ev trace.Event) any {
	doc := map[string]any{}
	var req, resp any
	if len(ev.Request) > 0 {
		json.Unmarshal(ev.Request, &req)
	}
	if len(ev.Response) > 0 {
		json.Unmarshal(ev.Response, &resp)
	}
	doc["request"], doc["response"] = req, resp
	attrs := map[string]any{}
	for k, v := range ev.Attrs {
		attrs[k] = v
	}
	doc["attrs"] = attrs
	return doc
}

// role is who makes the step's call: the step's `as`, or the component that makes that call in a
// cluster.
func (r *runner) role(st *Step, iface, method string) string {
	if st.As != "" {
		return st.As
	}
	return diagram.Role(iface, method)
}
