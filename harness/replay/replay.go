// Package replay turns a recorded boundary trace (cri-fake's or csi-fake's, for example while a
// real kubelet drove it) into a scenario that replays the same calls against any endpoint.
//
// IDs are what makes a replay portable: the sandbox, container, volume and image IDs a runtime or
// driver hands out differ from one run (and one implementation) to the next. Every ID-like field of
// an answer (a key named id, or ending in Id or Ref, outside lists) becomes a capture, and every
// later request value equal to it becomes a ${variable}, so the replay uses the IDs the endpoint
// under test hands out.
package replay

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	"go.yaml.in/yaml/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/plugsim/plugsim/harness/call"
	"github.com/plugsim/plugsim/harness/diagram"
	"github.com/plugsim/plugsim/harness/scenario"
	"github.com/plugsim/plugsim/harness/trace"
)

// Options shape the scenario.
type Options struct {
	Name string
	// Interfaces to replay (default CRI and CSI: CNI calls are made by the runtime itself, and
	// registration by the kubelet's plugin watcher).
	Interfaces []string
}

// Stats say what the conversion did.
type Stats struct {
	Steps    int
	Skipped  map[string]int // why → count
	Captures int
	// Substituted counts request values replaced by a captured variable.
	Substituted int
}

// skipped methods and why: a watch never ends, so there is no answer to compare.
var skipMethods = map[string]string{
	"GetContainerEvents": "a server stream that lasts as long as the client watches",
}

// Scenario converts events (in the order they happened) into scenario YAML.
func Scenario(events []trace.Event, opts Options) ([]byte, Stats, error) {
	ifaces := opts.Interfaces
	if len(ifaces) == 0 {
		ifaces = []string{trace.CRI, trace.CSI}
	}
	want := map[string]bool{}
	for _, i := range ifaces {
		want[strings.ToUpper(i)] = true
	}
	st := Stats{Skipped: map[string]int{}}
	vars := map[string]string{} // captured value → variable name
	counts := map[string]int{}  // variable base name → how many so far

	var steps []*yaml.Node
	sorted := append([]trace.Event(nil), events...)
	sort.SliceStable(sorted, func(i, j int) bool { return sorted[i].Time.Before(sorted[j].Time) })
	for _, ev := range sorted {
		if !want[ev.Interface] {
			st.Skipped[ev.Interface+" calls (not replayed)"]++
			continue
		}
		if why, ok := skipMethods[ev.Method]; ok {
			st.Skipped[ev.Method+": "+why]++
			continue
		}
		iface := strings.ToLower(ev.Interface)
		name := ev.Method
		if ev.Service != "" {
			name = ev.Service + "/" + ev.Method
		}
		m, err := call.Lookup(iface, name)
		if err != nil {
			st.Skipped[fmt.Sprintf("%s: %v", ev.Method, err)]++
			continue
		}
		if m.ServerStreaming {
			st.Skipped[ev.Method+": server stream"]++
			continue
		}
		if ev.Truncated > 0 && len(ev.Request) > 0 && ev.Request[0] == '"' {
			// The recorder kept only the start of a request past trace.MaxPayload.
			st.Skipped[ev.Method+": request truncated in the trace"]++
			continue
		}
		var req any
		if len(ev.Request) > 0 {
			if err := json.Unmarshal(ev.Request, &req); err != nil {
				return nil, st, fmt.Errorf("event %d (%s): request is not JSON: %w", ev.Seq, ev.Method, err)
			}
			// A gRPC request is a message: anything else would write a step the scenario
			// parser refuses ("want a mapping").
			if _, ok := req.(map[string]any); !ok && req != nil {
				return nil, st, fmt.Errorf("event %d (%s): request is not a JSON object", ev.Seq, ev.Method)
			}
			// And a message of the method's request type, as a client would marshal it: a field
			// the type lacks would write a step the scenario parser refuses.
			if err := protojson.Unmarshal(ev.Request, m.Input.New().Interface()); err != nil && req != nil {
				return nil, st, fmt.Errorf("event %d (%s): request is no %s: %w", ev.Seq, ev.Method, m.Input.Descriptor().FullName(), err)
			}
		}
		if ev.Code != "" && !isCodeName(ev.Code) {
			return nil, st, fmt.Errorf("event %d (%s): code %q is not a gRPC code name", ev.Seq, ev.Method, ev.Code)
		}
		req = substitute(req, vars, &st.Substituted)

		step := mapping(
			"name", fmt.Sprintf("%s (recorded #%d, %s → %s)", ev.Method, ev.Seq, ev.Caller, ev.Callee),
			"interface", iface,
			"call", ev.Method,
		)
		if ev.Caller != "" && ev.Caller != diagram.Role(ev.Interface, ev.Method) && ev.Caller != "csi-controller" {
			// Keep who made the call: it decides which plugin half an Identity call goes to.
			step.Content = append(step.Content, scalar("as"), scalar(ev.Caller))
		}
		if req != nil {
			n := &yaml.Node{}
			if err := n.Encode(req); err != nil {
				return nil, st, err
			}
			// Flow style keeps a replayed request to a line or two.
			n.Style = yaml.FlowStyle
			step.Content = append(step.Content, scalar("request"), n)
		}
		code := ev.Code
		if code == "" {
			code = "OK"
		}
		step.Content = append(step.Content, scalar("expect"), mapping("code", code))

		if code == "OK" && len(ev.Response) > 0 {
			var resp any
			if json.Unmarshal(normalize(ev.Response, m.Output), &resp) == nil {
				var caps [][2]string
				collectIDs(resp, "", func(path, value string) {
					if _, seen := vars[value]; seen || value == "" {
						return
					}
					// Capture only what a step may name: a path of the answer's type.
					if scenario.CheckPath(m.Output.Descriptor(), path) != nil {
						return
					}
					base := varBase(path)
					counts[base]++
					v := fmt.Sprintf("%s_%d", base, counts[base])
					vars[value] = v
					caps = append(caps, [2]string{v, path})
				})
				if len(caps) > 0 {
					cm := &yaml.Node{Kind: yaml.MappingNode}
					for _, c := range caps {
						cm.Content = append(cm.Content, scalar(c[0]), scalar(c[1]))
					}
					step.Content = append(step.Content, scalar("capture"), cm)
					st.Captures += len(caps)
				}
			}
		}
		steps = append(steps, step)
		st.Steps++
	}
	if len(steps) == 0 {
		return nil, st, fmt.Errorf("no %s calls to replay in the trace", strings.Join(ifaces, " or "))
	}
	name := opts.Name
	if name == "" {
		name = "replay"
	}
	doc := mapping("name", name, "description",
		fmt.Sprintf("Replayed from a recorded trace: %d calls; IDs from earlier answers are substituted.", len(steps)))
	doc.Content = append(doc.Content, scalar("steps"), &yaml.Node{Kind: yaml.SequenceNode, Content: steps})
	var b bytes.Buffer
	enc := yaml.NewEncoder(&b)
	enc.SetIndent(2)
	if err := enc.Encode(doc); err != nil {
		return nil, st, err
	}
	enc.Close()
	return b.Bytes(), st, nil
}

func scalar(s string) *yaml.Node {
	return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: s}
}

func mapping(kv ...string) *yaml.Node {
	n := &yaml.Node{Kind: yaml.MappingNode}
	for i := 0; i+1 < len(kv); i += 2 {
		n.Content = append(n.Content, scalar(kv[i]), scalar(kv[i+1]))
	}
	return n
}

// normalize reads a recorded answer as the method's response type and writes it back with the
// type's JSON names, so captures name fields as a step does (a trace written by hand or by an
// older recorder may spell them otherwise); fields the type lacks are dropped. An answer that is
// no such message at all gives nothing to capture.
func normalize(resp []byte, t protoreflect.MessageType) []byte {
	msg := t.New().Interface()
	if err := (protojson.UnmarshalOptions{DiscardUnknown: true}).Unmarshal(resp, msg); err != nil {
		return nil
	}
	out, err := protojson.Marshal(msg)
	if err != nil {
		return nil
	}
	return out
}

// isIDKey says whether a response field carries an ID a later request may refer to.
func isIDKey(k string) bool {
	return k == "id" || strings.HasSuffix(k, "Id") || strings.HasSuffix(k, "Ref")
}

// collectIDs visits the ID-like string fields of a decoded answer, outside lists (an item's
// position in a list answer is not stable from one run to the next).
func collectIDs(v any, path string, f func(path, value string)) {
	m, ok := v.(map[string]any)
	if !ok {
		return
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		p := k
		if path != "" {
			p = path + "." + k
		}
		switch x := m[k].(type) {
		case string:
			if isIDKey(k) {
				f(p, x)
			}
		case map[string]any:
			// Labels and annotations are maps of user data, not fields.
			if k != "labels" && k != "annotations" && !strings.HasSuffix(k, "Context") {
				collectIDs(x, p, f)
			}
		}
	}
}

// varBase names a variable after the field it came from: status.id → status_id, imageRef →
// imageRef.
func varBase(path string) string {
	return strings.ReplaceAll(path, ".", "_")
}

// substitute replaces every string equal to a captured value with its ${variable}.
func substitute(v any, vars map[string]string, n *int) any {
	switch x := v.(type) {
	case string:
		if name, ok := vars[x]; ok {
			*n++
			return "${" + name + "}"
		}
		return x
	case map[string]any:
		for k, e := range x {
			x[k] = substitute(e, vars, n)
		}
		return x
	case []any:
		for i, e := range x {
			x[i] = substitute(e, vars, n)
		}
		return x
	}
	return v
}

// isCodeName reports whether code is a gRPC code name spelt as the scenario parser wants it
// ("NotFound", not "notfound").
func isCodeName(code string) bool {
	for c := codes.OK; c <= codes.Unauthenticated; c++ {
		if c.String() == code {
			return true
		}
	}
	return false
}
