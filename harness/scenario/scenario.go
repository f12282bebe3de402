// Package scenario reads and runs YAML scenarios: ordered steps, each a call across one plugin
// interface (a CRI or CSI RPC, a CNI verb, a change to the node's files, a fault rule for a fake),
// with expectations on what comes back, values captured for later steps, and waits.
//
// A scenario file reads like the call sequence it teaches:
//
//	name: pod lifecycle
//	steps:
//	  - name: kubelet asks for a sandbox
//	    interface: cri
//	    call: RunPodSandbox
//	    request:
//	      config:
//	        metadata: {name: web, namespace: default, uid: "${run}-web"}
//	    capture: {sandbox: podSandboxId}
//	  - interface: cri
//	    call: PodSandboxStatus
//	    request: {podSandboxId: "${sandbox}"}
//	    expect:
//	      fields:
//	        status.state: SANDBOX_READY
//
// Every error in a file points at its line and the field that is wrong, so a typo in a request
// ("podSandboxID") is caught before anything is called.
package scenario

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
	"google.golang.org/grpc/codes"

	"github.com/plugsim/plugsim/harness/call"
	"github.com/plugsim/plugsim/harness/faults"
)

// Scenario is one parsed file.
type Scenario struct {
	File        string
	Name        string
	Description string
	Setup       Setup
	// Requires names what the node must have for the scenario to mean anything: "portmap" (the
	// real portmap plugin in the chain, which needs root). Without it the scenario is skipped.
	Requires []string
	Steps    []*Step
}

// Setup says how the harness wires the fakes when it starts them itself for this scenario. It is
// ignored when the scenario runs against endpoints given on the command line.
type Setup struct {
	// CNI is "default" (cni-fake chained before portmap, the shape of Calico's 10-calico.conflist)
	// or "none" (an empty conf dir: the runtime must report NetworkReady=false).
	CNI string
	// RuntimeHandlers are the handlers cri-fake accepts (RuntimeClass → handler); default runc.
	RuntimeHandlers []string
	// CSI configures csi-fake.
	CSI CSISetup
}

// CSISetup configures csi-fake for a scenario.
type CSISetup struct {
	DriverName    string
	EphemeralOnly bool
	// AttachRequired false removes ControllerPublish/Unpublish (CSIDriver attachRequired: false).
	AttachRequired *bool
}

// Interfaces a step can name.
const (
	CRI   = "cri"
	CSI   = "csi"
	CNI   = "cni"
	Node  = "node"  // the node's files: WriteFile, RemoveFile, Sleep
	Fault = "fault" // add or clear fault rules in a fake: Add, Clear
)

// Step is one call and what is expected of it.
type Step struct {
	Index     int // 1-based
	Line      int
	Name      string
	Interface string
	Call      string
	// As names the component the harness plays for this call ("external-provisioner"), where the
	// method alone does not say it: Identity calls come from the sidecars and from the kubelet.
	As string
	// Method is set for CRI and CSI steps.
	Method *call.Method
	// Request is the YAML request, substituted (${var}) when the step runs.
	Request *yaml.Node
	// Target is the fake a fault step changes: cri, csi or cni.
	Target  string
	Rules   []faults.Rule
	Expect  Expect
	Capture []Capture
	Wait    *Wait
}

// Title names the step in reports: its name, or its call.
func (s *Step) Title() string {
	if s.Name != "" {
		return s.Name
	}
	return s.Call
}

// Expect is what the answer must look like.
type Expect struct {
	// Code is a gRPC code name for CRI and CSI ("OK", "NotFound"), "OK" or a CNI error code number
	// for CNI. Empty means OK.
	Code string
	// Error must be contained in the error message.
	Error  string
	Fields []FieldExpect
	// Trace are calls that must (or, with Absent, must not) have crossed a boundary during the
	// step: what the runtime passed to the CNI chain, which CSI calls a driver received.
	Trace []TraceExpect
}

// TraceExpect matches events of the step's boundary trace. Empty fields match anything; Callee
// also matches a plugin further down a CNI chain (portmap).
type TraceExpect struct {
	Line      int
	Interface string
	Method    string
	Caller    string
	Callee    string
	Code      string
	Absent    bool
	// Fields apply to {request, response, attrs} of the event: "request.capabilityArgs.portMappings[0].hostPort".
	Fields []FieldExpect
}

// FieldExpect is one condition on a field of the answer.
type FieldExpect struct {
	Path string
	Line int
	Op   string // equals, contains, matches, exists, len, notEmpty, oneOf
	// Value is the operand, as YAML scalar text (or a list for oneOf).
	Value any
}

// Capture stores a field of the answer in a variable.
type Capture struct {
	Var  string
	Path string
	Line int
}

// Wait repeats the call until every expectation holds or the timeout passes.
type Wait struct {
	Timeout  time.Duration
	Interval time.Duration
}

// Error is a problem in a scenario file, with its place.
type Error struct {
	File  string
	Line  int
	Field string
	Msg   string
}

func (e *Error) Error() string {
	loc := e.File
	if e.Line > 0 {
		loc += ":" + strconv.Itoa(e.Line)
	}
	if e.Field != "" {
		return fmt.Sprintf("%s: %s: %s", loc, e.Field, e.Msg)
	}
	return fmt.Sprintf("%s: %s", loc, e.Msg)
}

// ParseFile reads a scenario file.
func ParseFile(path string) (*Scenario, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return Parse(data, path)
}

// Parse reads a scenario; name is used in error messages.
func Parse(data []byte, name string) (*Scenario, error) {
	var doc yaml.Node
	dec := yaml.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&doc); err != nil {
		return nil, &Error{File: name, Line: yamlErrLine(err), Msg: yamlLineRE.ReplaceAllString(strings.TrimPrefix(err.Error(), "yaml: "), "")}
	}
	p := &parser{file: name}
	sc := p.scenario(&doc)
	if p.err != nil {
		return nil, p.err
	}
	return sc, nil
}

var yamlLineRE = regexp.MustCompile(`line (\d+): `)

func yamlErrLine(err error) int {
	if m := yamlLineRE.FindStringSubmatch(err.Error()); m != nil {
		n, _ := strconv.Atoi(m[1])
		return n
	}
	return 0
}

// parser keeps the first error; every method returns early once it is set.
type parser struct {
	file string
	err  *Error
}

func (p *parser) fail(n *yaml.Node, field, format string, args ...any) {
	if p.err != nil {
		return
	}
	line := 0
	if n != nil {
		line = n.Line
	}
	p.err = &Error{File: p.file, Line: line, Field: field, Msg: fmt.Sprintf(format, args...)}
}

// fields walks a mapping, calling f for each known key and failing on an unknown one.
func (p *parser) fields(n *yaml.Node, where string, known map[string]func(k, v *yaml.Node)) {
	if n.Kind != yaml.MappingNode {
		p.fail(n, where, "want a mapping, got %s", kindName(n))
		return
	}
	for i := 0; i+1 < len(n.Content) && p.err == nil; i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		f, ok := known[k.Value]
		if !ok {
			p.fail(k, join(where, k.Value), "unknown field (known: %s)", keys(known))
			return
		}
		f(k, v)
	}
}

func keys[V any](m map[string]V) string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return strings.Join(ks, ", ")
}

func join(where, field string) string {
	if where == "" {
		return field
	}
	return where + "." + field
}

func kindName(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.ScalarNode:
		return fmt.Sprintf("%q", n.Value)
	case yaml.AliasNode:
		return "an alias"
	}
	return "nothing"
}

func (p *parser) str(n *yaml.Node, where string) string {
	if n.Kind != yaml.ScalarNode {
		p.fail(n, where, "want a string, got %s", kindName(n))
		return ""
	}
	return n.Value
}

func (p *parser) boolean(n *yaml.Node, where string) bool {
	var b bool
	if n.Kind != yaml.ScalarNode || n.Decode(&b) != nil {
		p.fail(n, where, "want true or false, got %s", kindName(n))
	}
	return b
}

func (p *parser) duration(n *yaml.Node, where string) time.Duration {
	s := p.str(n, where)
	if p.err != nil {
		return 0
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		p.fail(n, where, "want a duration such as 5s or 200ms, got %q", s)
	}
	return d
}

func (p *parser) strings(n *yaml.Node, where string) []string {
	if n.Kind != yaml.SequenceNode {
		p.fail(n, where, "want a list of strings, got %s", kindName(n))
		return nil
	}
	var out []string
	for i, e := range n.Content {
		out = append(out, p.str(e, fmt.Sprintf("%s[%d]", where, i)))
	}
	return out
}

func (p *parser) scenario(doc *yaml.Node) *Scenario {
	sc := &Scenario{File: p.file, Setup: Setup{CNI: "default"}}
	if doc.Kind != yaml.DocumentNode || len(doc.Content) == 0 {
		p.fail(doc, "", "empty scenario: want name and steps")
		return sc
	}
	root := doc.Content[0]
	var stepsNode *yaml.Node
	p.fields(root, "", map[string]func(k, v *yaml.Node){
		"name":        func(_, v *yaml.Node) { sc.Name = p.str(v, "name") },
		"description": func(_, v *yaml.Node) { sc.Description = p.str(v, "description") },
		"setup":       func(_, v *yaml.Node) { p.setup(v, &sc.Setup) },
		"requires": func(_, v *yaml.Node) {
			sc.Requires = p.strings(v, "requires")
			for i, r := range sc.Requires {
				if r != "portmap" && p.err == nil {
					p.fail(v.Content[i], "requires", "unknown requirement %q (known: portmap)", r)
				}
			}
		},
		"steps": func(_, v *yaml.Node) { stepsNode = v },
	})
	if p.err != nil {
		return sc
	}
	if sc.Name == "" {
		sc.Name = strings.TrimSuffix(filepath.Base(p.file), filepath.Ext(p.file))
	}
	if stepsNode == nil || stepsNode.Kind != yaml.SequenceNode || len(stepsNode.Content) == 0 {
		p.fail(root, "steps", "want a non-empty list of steps")
		return sc
	}
	for i, n := range stepsNode.Content {
		st := p.step(n, i+1)
		if p.err != nil {
			return sc
		}
		sc.Steps = append(sc.Steps, st)
	}
	return sc
}

func (p *parser) setup(n *yaml.Node, s *Setup) {
	p.fields(n, "setup", map[string]func(k, v *yaml.Node){
		"cni": func(_, v *yaml.Node) {
			s.CNI = p.str(v, "setup.cni")
			if s.CNI != "default" && s.CNI != "none" {
				p.fail(v, "setup.cni", "want default (cni-fake → portmap) or none (empty conf dir), got %q", s.CNI)
			}
		},
		"runtimeHandlers": func(_, v *yaml.Node) { s.RuntimeHandlers = p.strings(v, "setup.runtimeHandlers") },
		"csi": func(_, v *yaml.Node) {
			p.fields(v, "setup.csi", map[string]func(k, v *yaml.Node){
				"driverName":    func(_, v *yaml.Node) { s.CSI.DriverName = p.str(v, "setup.csi.driverName") },
				"ephemeralOnly": func(_, v *yaml.Node) { s.CSI.EphemeralOnly = p.boolean(v, "setup.csi.ephemeralOnly") },
				"attachRequired": func(_, v *yaml.Node) {
					b := p.boolean(v, "setup.csi.attachRequired")
					s.CSI.AttachRequired = &b
				},
			})
		},
	})
}

// Node calls and their request fields.
var nodeCalls = map[string][]string{
	"WriteFile":  {"path", "content"},
	"MakeDir":    {"path"},
	"RemoveFile": {"path"},
	"Sleep":      {"duration"},
}

// CNI verbs a step can run through libcni.
var cniCalls = []string{"ADD", "DEL", "CHECK", "STATUS", "GC"}

func (p *parser) step(n *yaml.Node, index int) *Step {
	st := &Step{Index: index, Line: n.Line}
	where := fmt.Sprintf("steps[%d]", index-1)
	var expectNode *yaml.Node
	p.fields(n, where, map[string]func(k, v *yaml.Node){
		"name":      func(_, v *yaml.Node) { st.Name = p.str(v, where+".name") },
		"interface": func(_, v *yaml.Node) { st.Interface = strings.ToLower(p.str(v, where+".interface")) },
		"call":      func(_, v *yaml.Node) { st.Call = p.str(v, where+".call") },
		"as":        func(_, v *yaml.Node) { st.As = p.str(v, where+".as") },
		"request":   func(_, v *yaml.Node) { st.Request = v },
		"target":    func(_, v *yaml.Node) { st.Target = strings.ToLower(p.str(v, where+".target")) },
		"rules":     func(_, v *yaml.Node) { st.Request = v },
		"expect":    func(_, v *yaml.Node) { expectNode = v },
		"capture": func(_, v *yaml.Node) {
			if v.Kind != yaml.MappingNode {
				p.fail(v, where+".capture", "want a mapping of variable: field.path")
				return
			}
			for i := 0; i+1 < len(v.Content); i += 2 {
				name := v.Content[i].Value
				if !varNameRE.MatchString(name) {
					p.fail(v.Content[i], where+".capture", "variable name %q: use letters, digits and _", name)
					return
				}
				st.Capture = append(st.Capture, Capture{Var: name, Path: p.str(v.Content[i+1], where+".capture."+name), Line: v.Content[i].Line})
			}
		},
		"wait": func(_, v *yaml.Node) {
			w := &Wait{Timeout: 10 * time.Second, Interval: 100 * time.Millisecond}
			p.fields(v, where+".wait", map[string]func(k, v *yaml.Node){
				"timeout":  func(_, v *yaml.Node) { w.Timeout = p.duration(v, where+".wait.timeout") },
				"interval": func(_, v *yaml.Node) { w.Interval = p.duration(v, where+".wait.interval") },
			})
			st.Wait = w
		},
	})
	if p.err != nil {
		return st
	}
	switch st.Interface {
	case "":
		p.fail(n, where+".interface", "missing: want cri, csi, cni, node or fault")
	case CRI, CSI:
		if st.Call == "" {
			p.fail(n, where+".call", "missing: name the %s method (see `harness methods %s`)", strings.ToUpper(st.Interface), st.Interface)
			return st
		}
		m, err := call.Lookup(st.Interface, st.Call)
		if err != nil {
			p.fail(n, where+".call", "%v", err)
			return st
		}
		st.Method = m
		if st.Request != nil {
			p.checkMessage(st.Request, m.Input.Descriptor(), where+".request")
		}
	case CNI:
		st.Call = strings.ToUpper(st.Call)
		if !contains(cniCalls, st.Call) {
			p.fail(n, where+".call", "CNI verb %q: want one of %s", st.Call, strings.Join(cniCalls, ", "))
			return st
		}
		if st.Request != nil {
			p.fields(st.Request, where+".request", mapOf(cniRequestFields, func(k, v *yaml.Node) {}))
		}
	case Node:
		fs, ok := nodeCalls[st.Call]
		if !ok {
			p.fail(n, where+".call", "node call %q: want one of %s", st.Call, keys(nodeCalls))
			return st
		}
		if st.Request == nil {
			p.fail(n, where+".request", "missing: %s takes %s", st.Call, strings.Join(fs, ", "))
			return st
		}
		p.fields(st.Request, where+".request", mapOf(fs, func(k, v *yaml.Node) {}))
	case Fault:
		p.faultStep(st, n, where)
	default:
		p.fail(n, where+".interface", "unknown interface %q: want cri, csi, cni, node or fault", st.Interface)
	}
	if expectNode != nil && p.err == nil {
		p.expect(expectNode, st, where+".expect")
	}
	if st.Method != nil && p.err == nil {
		for _, c := range st.Capture {
			if err := CheckPath(st.Method.Output.Descriptor(), c.Path); err != nil {
				p.fail(&yaml.Node{Line: c.Line}, fmt.Sprintf("%s.capture.%s", where, c.Var), "%v", err)
				return st
			}
		}
	}
	if st.Wait != nil && (st.Interface == Fault || st.Interface == Node) {
		p.fail(n, where+".wait", "only cri, csi and cni steps can wait")
	}
	return st
}

var varNameRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

var cniRequestFields = []string{"containerID", "netns", "ifName", "args", "capabilityArgs", "network", "validAttachments"}

func mapOf(names []string, f func(k, v *yaml.Node)) map[string]func(k, v *yaml.Node) {
	m := map[string]func(k, v *yaml.Node){}
	for _, n := range names {
		m[n] = f
	}
	return m
}

func contains(list []string, s string) bool {
	for _, e := range list {
		if e == s {
			return true
		}
	}
	return false
}

func (p *parser) faultStep(st *Step, n *yaml.Node, where string) {
	switch st.Call {
	case "Add", "Clear":
	default:
		p.fail(n, where+".call", "fault call %q: want Add or Clear", st.Call)
		return
	}
	switch st.Target {
	case CRI, CSI, CNI:
	case "":
		p.fail(n, where+".target", "missing: which fake gets the rule (cri, csi or cni)")
		return
	default:
		p.fail(n, where+".target", "unknown fake %q: want cri, csi or cni", st.Target)
		return
	}
	if st.Call == "Clear" {
		return
	}
	if st.Request == nil {
		p.fail(n, where+".rules", "missing: give the fault rules (method, code, message, delay, times, match)")
		return
	}
	list := []*yaml.Node{st.Request}
	if st.Request.Kind == yaml.SequenceNode {
		list = st.Request.Content
	}
	for i, rn := range list {
		w := fmt.Sprintf("%s.rules[%d]", where, i)
		p.fields(rn, w, mapOf([]string{"id", "method", "verb", "match", "code", "message", "delay", "after", "times", "probability"}, func(k, v *yaml.Node) {}))
		if p.err != nil {
			return
		}
		var r faults.Rule
		js, err := nodeJSON(rn)
		if err == nil {
			err = unmarshalJSON(js, &r)
		}
		if err == nil {
			err = r.Validate()
		}
		if err != nil {
			p.fail(rn, w, "%v", err)
			return
		}
		st.Rules = append(st.Rules, r)
	}
}

func (p *parser) expect(n *yaml.Node, st *Step, where string) {
	p.fields(n, where, map[string]func(k, v *yaml.Node){
		"code": func(_, v *yaml.Node) {
			st.Expect.Code = p.str(v, where+".code")
			if p.err == nil && !validCode(st.Interface, st.Expect.Code) {
				p.fail(v, where+".code", "%q is not a gRPC code name (OK, NotFound, InvalidArgument, ...) or a CNI error number", st.Expect.Code)
			}
		},
		"error": func(_, v *yaml.Node) { st.Expect.Error = p.str(v, where+".error") },
		"trace": func(_, v *yaml.Node) {
			if v.Kind != yaml.SequenceNode {
				p.fail(v, where+".trace", "want a list of calls to look for ({interface, method, caller, callee, code, absent, fields})")
				return
			}
			for i, e := range v.Content {
				w := fmt.Sprintf("%s.trace[%d]", where, i)
				te := TraceExpect{Line: e.Line}
				p.fields(e, w, map[string]func(k, v *yaml.Node){
					"interface": func(_, v *yaml.Node) { te.Interface = strings.ToUpper(p.str(v, w+".interface")) },
					"method":    func(_, v *yaml.Node) { te.Method = p.str(v, w+".method") },
					"caller":    func(_, v *yaml.Node) { te.Caller = p.str(v, w+".caller") },
					"callee":    func(_, v *yaml.Node) { te.Callee = p.str(v, w+".callee") },
					"code":      func(_, v *yaml.Node) { te.Code = p.str(v, w+".code") },
					"absent":    func(_, v *yaml.Node) { te.Absent = p.boolean(v, w+".absent") },
					"fields": func(_, v *yaml.Node) {
						if v.Kind != yaml.MappingNode {
							p.fail(v, w+".fields", "want a mapping of request.path / response.path / attrs.key: value")
							return
						}
						for j := 0; j+1 < len(v.Content); j += 2 {
							fe := p.fieldExpect(v.Content[j], v.Content[j+1], w+".fields")
							root, _, _ := strings.Cut(fe.Path, ".")
							if root != "request" && root != "response" && root != "attrs" && p.err == nil {
								p.fail(v.Content[j], w+".fields."+fe.Path, "a trace field path starts with request., response. or attrs.")
							}
							te.Fields = append(te.Fields, fe)
						}
					},
				})
				st.Expect.Trace = append(st.Expect.Trace, te)
			}
		},
		"fields": func(_, v *yaml.Node) {
			if v.Kind != yaml.MappingNode {
				p.fail(v, where+".fields", "want a mapping of field.path: value")
				return
			}
			for i := 0; i+1 < len(v.Content); i += 2 {
				fe := p.fieldExpect(v.Content[i], v.Content[i+1], where+".fields")
				if p.err != nil {
					return
				}
				if st.Method != nil {
					if err := CheckPath(st.Method.Output.Descriptor(), fe.Path); err != nil {
						p.fail(v.Content[i], where+".fields."+fe.Path, "%v", err)
						return
					}
				}
				st.Expect.Fields = append(st.Expect.Fields, fe)
			}
		},
	})
}

// Operators a field expectation can use; a bare value means equals.
var ops = []string{"equals", "contains", "matches", "exists", "len", "notEmpty", "oneOf"}

func (p *parser) fieldExpect(k, v *yaml.Node, where string) FieldExpect {
	fe := FieldExpect{Path: k.Value, Line: k.Line, Op: "equals"}
	w := where + "." + k.Value
	switch v.Kind {
	case yaml.ScalarNode:
		fe.Value = v.Value
	case yaml.MappingNode:
		if len(v.Content) != 2 {
			p.fail(v, w, "give one operator: %s", strings.Join(ops, ", "))
			return fe
		}
		fe.Op = v.Content[0].Value
		arg := v.Content[1]
		switch fe.Op {
		case "equals", "contains", "matches":
			fe.Value = p.str(arg, w+"."+fe.Op)
			if fe.Op == "matches" && p.err == nil {
				if _, err := regexp.Compile(fe.Value.(string)); err != nil {
					p.fail(arg, w+".matches", "bad regular expression: %v", err)
				}
			}
		case "exists", "notEmpty":
			fe.Value = p.boolean(arg, w+"."+fe.Op)
		case "len":
			n, err := strconv.Atoi(arg.Value)
			if err != nil || arg.Kind != yaml.ScalarNode {
				p.fail(arg, w+".len", "want a number, got %s", kindName(arg))
			}
			fe.Value = n
		case "oneOf":
			fe.Value = p.strings(arg, w+".oneOf")
		default:
			p.fail(v.Content[0], w, "unknown operator %q (known: %s)", fe.Op, strings.Join(ops, ", "))
		}
	default:
		p.fail(v, w, "want a value or {operator: value}, got %s", kindName(v))
	}
	return fe
}

func validCode(iface, code string) bool {
	if iface == CNI {
		if code == "OK" {
			return true
		}
		_, err := strconv.Atoi(code)
		return err == nil
	}
	for c := codes.OK; c <= codes.Unauthenticated; c++ {
		if c.String() == code {
			return true
		}
	}
	return false
}
