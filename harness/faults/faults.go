// Package faults injects failures and latency into the fakes' calls: a rule names a method,
// optionally a request field that must match, and what to do: return an error code with a message,
// delay the call, or both, for the next N matching calls or with a probability.
//
// Rules come from a YAML or JSON file (the fakes' --faults flag) and can be changed while a fake runs
// (through the admin socket, see package admin). The same rules serve gRPC calls (CRI, CSI), where
// the code is a gRPC code name, and CNI invocations, where it is a CNI error code number.
package faults

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"sigs.k8s.io/yaml"
)

// Rule is one fault. Zero fields match or do nothing: a rule with only Method and Delay slows every
// call of that method down and lets it through.
type Rule struct {
	// ID names the rule; Set.Add assigns one when empty.
	ID string `json:"id,omitempty"`
	// Method is the RPC name ("PullImage"), the full gRPC method ("/runtime.v1.ImageService/PullImage"),
	// the CNI verb ("ADD"), or "*" for every call.
	Method string `json:"method"`
	// Match requires request fields to have these values. A key is a dotted path of proto field names
	// ("image.image", "config.metadata.name") or, for CNI, an invocation field ("containerID",
	// "netns", "ifName", "args.K8S_POD_NAME"). A value may use shell globs ("nginx*").
	Match map[string]string `json:"match,omitempty"`
	// Code is the error to return: a gRPC code name ("Unavailable", "NotFound") or a CNI error code
	// ("11"). Empty means no error (a pure delay).
	Code string `json:"code,omitempty"`
	// Message is the error message; a default naming the rule is used when empty.
	Message string `json:"message,omitempty"`
	// Delay is waited before answering ("250ms", "2s"), cut short when the caller gives up.
	Delay Duration `json:"delay,omitempty"`
	// Times limits the rule to the next N matching calls; 0 means no limit.
	Times int `json:"times,omitempty"`
	// Probability in (0,1] applies the rule to that share of matching calls; 0 means always.
	Probability float64 `json:"probability,omitempty"`

	// Hits counts the calls the rule was applied to.
	Hits int `json:"hits"`
}

// Duration is a time.Duration that reads and writes as a Go duration string.
type Duration time.Duration

// MarshalJSON writes the duration as "1.5s".
func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(time.Duration(d).String()) }

// UnmarshalJSON reads "1.5s" or a number of nanoseconds.
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		var n int64
		if err := json.Unmarshal(b, &n); err != nil {
			return fmt.Errorf("delay: want a duration such as \"250ms\", got %s", b)
		}
		*d = Duration(n)
		return nil
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return fmt.Errorf("delay: %w", err)
	}
	*d = Duration(v)
	return nil
}

// Validate reports what is wrong with a rule.
func (r *Rule) Validate() error {
	if r.Method == "" {
		return fmt.Errorf("fault rule %q: method is required (an RPC name, a CNI verb or \"*\")", r.ID)
	}
	if r.Code == "" && r.Delay == 0 {
		return fmt.Errorf("fault rule %q for %s: give a code, a delay, or both", r.ID, r.Method)
	}
	if r.Code != "" {
		if _, err := strconv.Atoi(r.Code); err != nil {
			if _, ok := grpcCode(r.Code); !ok {
				return fmt.Errorf("fault rule %q for %s: code %q is neither a gRPC code name nor a CNI error number", r.ID, r.Method, r.Code)
			}
		}
	}
	if r.Probability < 0 || r.Probability > 1 {
		return fmt.Errorf("fault rule %q for %s: probability %v is outside [0,1]", r.ID, r.Method, r.Probability)
	}
	if r.Times < 0 {
		return fmt.Errorf("fault rule %q for %s: times %d is negative", r.ID, r.Method, r.Times)
	}
	for k, v := range r.Match {
		if _, err := glob(v); err != nil {
			return fmt.Errorf("fault rule %q for %s: match %s: bad pattern %q: %v", r.ID, r.Method, k, v, err)
		}
	}
	return nil
}

// Fault is what a matching rule asks for.
type Fault struct {
	Rule    string // the rule's ID
	Code    string
	Message string
	Delay   time.Duration
}

// Set holds the rules of one fake. It is safe for concurrent use.
type Set struct {
	// n mirrors len(rules) so that Check, on every call of every fake, costs one atomic load and no
	// lock while there are no rules (the usual case).
	n     atomic.Int32
	mu    sync.Mutex
	rules []*Rule
	ids   int
	rnd   *rand.Rand
}

// NewSet returns an empty set; seed makes probabilistic rules repeatable.
func NewSet(seed uint64) *Set {
	return &Set{rnd: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))}
}

// Add validates and appends rules, returning their IDs.
func (s *Set) Add(rules ...Rule) ([]string, error) {
	for i := range rules {
		if err := rules[i].Validate(); err != nil {
			return nil, err
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var ids []string
	for _, r := range rules {
		if r.ID == "" {
			s.ids++
			r.ID = "rule-" + strconv.Itoa(s.ids)
		}
		for _, have := range s.rules {
			if have.ID == r.ID {
				return ids, fmt.Errorf("fault rule %q already exists", r.ID)
			}
		}
		r.Hits = 0
		s.rules = append(s.rules, &r)
		s.n.Store(int32(len(s.rules)))
		ids = append(ids, r.ID)
	}
	return ids, nil
}

// Remove deletes the rule with that ID and reports whether there was one.
func (s *Set) Remove(id string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, r := range s.rules {
		if r.ID == id {
			s.rules = append(s.rules[:i], s.rules[i+1:]...)
			s.n.Store(int32(len(s.rules)))
			return true
		}
	}
	return false
}

// Reset deletes every rule.
func (s *Set) Reset() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.rules = nil
	s.n.Store(0)
}

// Rules returns a copy of the rules, with their hit counts.
func (s *Set) Rules() []Rule {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Rule, len(s.rules))
	for i, r := range s.rules {
		out[i] = *r
	}
	return out
}

// Fields looks up a request field by its dotted path.
type Fields func(path string) (string, bool)

// Check returns the fault for a call of method, if a rule applies. The first applicable rule wins;
// a rule limited by Times is removed once used up.
func (s *Set) Check(method string, fields Fields) (Fault, bool) {
	if s == nil || s.n.Load() == 0 {
		return Fault{}, false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	defer func() { s.n.Store(int32(len(s.rules))) }()
	for i, r := range s.rules {
		if !methodMatches(r.Method, method) || !fieldsMatch(r.Match, fields) {
			continue
		}
		if r.Probability > 0 && s.rnd.Float64() >= r.Probability {
			continue
		}
		r.Hits++
		if r.Times > 0 && r.Hits >= r.Times {
			s.rules = append(s.rules[:i], s.rules[i+1:]...)
		}
		msg := r.Message
		if msg == "" && r.Code != "" {
			msg = fmt.Sprintf("injected fault %s on %s", r.ID, method)
		}
		return Fault{Rule: r.ID, Code: r.Code, Message: msg, Delay: time.Duration(r.Delay)}, true
	}
	return Fault{}, false
}

func methodMatches(rule, method string) bool {
	if rule == "*" || rule == method {
		return true
	}
	// "/runtime.v1.ImageService/PullImage" matches the rule "PullImage" and vice versa; CNI verbs
	// compare without regard to case ("add" is ADD).
	return path.Base(rule) == path.Base(method) || strings.EqualFold(rule, method)
}

func fieldsMatch(match map[string]string, fields Fields) bool {
	for k, want := range match {
		if fields == nil {
			return false
		}
		got, ok := fields(k)
		if !ok {
			return false
		}
		if re, err := glob(want); err != nil || !re.MatchString(got) {
			return false
		}
	}
	return true
}

// glob compiles a shell-style pattern in which * and ? match any character, "/" included (image
// references and volume paths have slashes), and [...] is a character class.
func glob(pattern string) (*regexp.Regexp, error) {
	var b strings.Builder
	b.WriteString("^")
	for i := 0; i < len(pattern); i++ {
		switch c := pattern[i]; c {
		case '*':
			b.WriteString(".*")
		case '?':
			b.WriteString(".")
		case '[':
			j := strings.IndexByte(pattern[i:], ']')
			if j < 0 {
				return nil, fmt.Errorf("unclosed [")
			}
			b.WriteString(pattern[i : i+j+1])
			i += j
		default:
			b.WriteString(regexp.QuoteMeta(string(c)))
		}
	}
	b.WriteString("$")
	return regexp.Compile(b.String())
}

// Wait sleeps for the fault's delay, returning early with the context's error.
func (f Fault) Wait(ctx context.Context) error {
	if f.Delay <= 0 {
		return nil
	}
	t := time.NewTimer(f.Delay)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// GRPCError returns the fault as a gRPC status error, or nil for a pure delay.
func (f Fault) GRPCError() error {
	if f.Code == "" {
		return nil
	}
	c, ok := grpcCode(f.Code)
	if !ok {
		c = codes.Unknown
	}
	return status.Error(c, f.Message)
}

func grpcCode(name string) (codes.Code, bool) {
	for c := codes.OK; c <= codes.Unauthenticated; c++ {
		if strings.EqualFold(c.String(), name) {
			return c, true
		}
	}
	return 0, false
}

// ProtoFields looks fields up in a protobuf message by dotted proto field names (the JSON names
// work too): "config.metadata.name", "image.image", "volume_id". Map entries are reached by key
// ("config.labels.app").
func ProtoFields(m proto.Message) Fields {
	return func(p string) (string, bool) {
		if m == nil {
			return "", false
		}
		msg := m.ProtoReflect()
		parts := strings.Split(p, ".")
		for i, part := range parts {
			fd := msg.Descriptor().Fields().ByName(protoreflect.Name(part))
			if fd == nil {
				fd = msg.Descriptor().Fields().ByJSONName(part)
			}
			if fd == nil {
				return "", false
			}
			v := msg.Get(fd)
			switch {
			case fd.IsMap():
				if i+1 >= len(parts) {
					return "", false
				}
				key := strings.Join(parts[i+1:], ".")
				mv := v.Map().Get(protoreflect.ValueOfString(key).MapKey())
				if !mv.IsValid() {
					return "", false
				}
				return mv.String(), true
			case fd.IsList():
				return "", false
			case fd.Kind() == protoreflect.MessageKind:
				if i+1 == len(parts) {
					return "", false
				}
				msg = v.Message()
			default:
				if i+1 != len(parts) {
					return "", false
				}
				if fd.Kind() == protoreflect.EnumKind {
					if ev := fd.Enum().Values().ByNumber(v.Enum()); ev != nil {
						return string(ev.Name()), true
					}
				}
				return v.String(), true
			}
		}
		return "", false
	}
}

// UnaryServerInterceptor applies the set's rules to every unary gRPC call before its handler runs.
func (s *Set) UnaryServerInterceptor() grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		if s == nil || s.n.Load() == 0 {
			// No rules (the usual case): skip building the field lookup, which allocates.
			return handler(ctx, req)
		}
		m, _ := req.(proto.Message)
		if f, ok := s.Check(info.FullMethod, ProtoFields(m)); ok {
			if err := f.Wait(ctx); err != nil {
				return nil, status.FromContextError(err).Err()
			}
			if err := f.GRPCError(); err != nil {
				return nil, err
			}
		}
		return handler(ctx, req)
	}
}

// StreamServerInterceptor applies the rules to streaming calls (matching on the method only).
func (s *Set) StreamServerInterceptor() grpc.StreamServerInterceptor {
	return func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
		if f, ok := s.Check(info.FullMethod, nil); ok {
			if err := f.Wait(ss.Context()); err != nil {
				return status.FromContextError(err).Err()
			}
			if err := f.GRPCError(); err != nil {
				return err
			}
		}
		return handler(srv, ss)
	}
}

// File is the shape of a --faults file.
type File struct {
	Seed  uint64 `json:"seed,omitempty"`
	Rules []Rule `json:"rules"`
}

// ParseFile reads rules from YAML or JSON.
func ParseFile(data []byte, name string) (File, error) {
	var f File
	if err := yaml.UnmarshalStrict(data, &f); err != nil {
		return f, fmt.Errorf("%s: %w", name, err)
	}
	for i := range f.Rules {
		if err := f.Rules[i].Validate(); err != nil {
			return f, fmt.Errorf("%s: rules[%d]: %w", name, i, err)
		}
	}
	return f, nil
}

// Load reads a --faults file into a new set.
func Load(filename string) (*Set, error) {
	data, err := os.ReadFile(filename)
	if err != nil {
		return nil, fmt.Errorf("read faults file: %w", err)
	}
	f, err := ParseFile(data, filename)
	if err != nil {
		return nil, err
	}
	s := NewSet(f.Seed)
	if _, err := s.Add(f.Rules...); err != nil {
		return nil, fmt.Errorf("%s: %w", filename, err)
	}
	return s, nil
}
