// Package faults injects failures and latency into the fakes' gRPC calls: a rule names a method,
// optionally request fields that must match, and what to do: answer with an error code and a
// message, delay the call, or both, for the next N matching calls (after skipping the first M) or
// with a probability. A test author adds rules to a running fake and asserts on their counts:
//
//	ids, err := node.CRI.Faults().Add(faults.Rule{Method: "PullImage", Code: "Unavailable", Times: 2})
//	...
//	r, _ := node.CRI.Faults().Rule(ids[0]) // r.Hits == 2 once both were used
//
// Rules come from a YAML or JSON file (the fakes' --faults flag), from Go, or from other processes
// through the admin socket (package admin). A Set knows its fake's method names (WithMethods) and
// refuses a rule naming none of them. The trace event of a call that a rule hit carries the rule's
// ID in Attrs["fault"].
//
// The rule language itself (Rule, Set, matching, counting) is package rules, which this package
// re-exports; cni-fake uses that package directly for its own rules (CNI verbs and error codes,
// from its conflist), since it must not link gRPC.
package faults

import (
	"context"
	"fmt"
	"os"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"sigs.k8s.io/yaml"

	"github.com/plugsim/plugsim/harness/faults/rules"
	"github.com/plugsim/plugsim/harness/trace"
)

// The rule language, from package rules.
type (
	// Rule is one fault (see rules.Rule for every field).
	Rule = rules.Rule
	// Duration is a time.Duration that reads and writes as "250ms".
	Duration = rules.Duration
	// Fault is what a rule that applies asks for.
	Fault = rules.Fault
	// Fields looks up a request field by its Match key.
	Fields = rules.Fields
	// File is the shape of a --faults file.
	File = rules.File
	// Option configures a Set.
	Option = rules.Option
)

// WithMethods gives the method names of the fake a set belongs to (see MethodsOf): Add refuses a
// rule whose method is none of them.
func WithMethods(names ...string) Option { return rules.WithMethods(names...) }

// WithGRPCCodes refuses rules whose code is not a gRPC code name (a CNI number, say).
func WithGRPCCodes() Option { return rules.WithCodes(rules.GRPCCodes) }

// MethodsOf lists the full method names ("/runtime.v1.ImageService/PullImage") of gRPC services,
// unary and streaming, for WithMethods.
func MethodsOf(services ...*grpc.ServiceDesc) []string {
	var out []string
	for _, sd := range services {
		for _, m := range sd.Methods {
			out = append(out, "/"+sd.ServiceName+"/"+m.MethodName)
		}
		for _, st := range sd.Streams {
			out = append(out, "/"+sd.ServiceName+"/"+st.StreamName)
		}
	}
	return out
}

// Set holds the fault rules of one fake. It is safe for concurrent use. Make one with NewSet; a
// nil *Set has no rules (Check, Inject and the interceptors let every call through).
type Set struct {
	core *rules.Set
}

// NewSet returns an empty set; seed makes probabilistic rules repeatable.
func NewSet(seed uint64, opts ...Option) *Set {
	return &Set{core: rules.NewSet(seed, opts...)}
}

// Seed is the seed the set was made with (NewSet's seed): a set made with it again, given the
// same calls, lets its probabilistic rules hit the same calls. 0 for a nil set.
func (s *Set) Seed() uint64 {
	if s == nil {
		return 0
	}
	return s.core.Seed()
}

// Add validates and appends rules, returning their IDs; either all are added or none is.
func (s *Set) Add(r ...Rule) ([]string, error) { return s.core.Add(r...) }

// Validate checks a rule as Add would, without adding it.
func (s *Set) Validate(r Rule) error { return s.core.Validate(r) }

// Remove deletes the rule with that ID and reports whether there was one.
func (s *Set) Remove(id string) bool { return s.core.Remove(id) }

// Reset deletes every rule.
func (s *Set) Reset() { s.core.Reset() }

// Rules returns a copy of the rules, with their counts (Matched, Hits); rules limited by Times
// stay there once used up.
func (s *Set) Rules() []Rule {
	if s == nil {
		return nil
	}
	return s.core.Rules()
}

// Rule returns the rule with that ID, with its counts.
func (s *Set) Rule(id string) (Rule, bool) {
	if s == nil {
		return Rule{}, false
	}
	return s.core.Rule(id)
}

// Check returns the fault for a call of method, if a rule applies, and counts the call.
func (s *Set) Check(method string, fields Fields) (Fault, bool) {
	if s == nil {
		return Fault{}, false
	}
	return s.core.Check(method, fields)
}

// Inject applies the rules to a unary call before its handler runs (trace.Injector: the trace
// interceptor calls it, and names the fault in the call's event). It waits for the fault's
// delay, then returns the fault's error, if it has one.
func (s *Set) Inject(ctx context.Context, fullMethod string, req any) (fault string, err error) {
	if s == nil || !s.core.Active() {
		// No rule can apply (the usual case): skip building the field lookup, which allocates.
		return "", nil
	}
	m, _ := req.(proto.Message)
	f, ok := s.core.Check(fullMethod, ProtoFields(m))
	if !ok {
		return "", nil
	}
	return f.Rule, answer(ctx, f)
}

// answer waits for the fault's delay and returns its error (nil for a pure delay that ran out).
// An error carries the rule's ID, which the trace shows (see InjectedError).
func answer(ctx context.Context, f Fault) error {
	if err := f.Wait(ctx); err != nil {
		// The client's RST_STREAM for an expired deadline can cancel the call before the
		// server's own deadline timer fires; what ran out is still the deadline.
		if dl, ok := ctx.Deadline(); ok && !time.Now().Before(dl) {
			err = context.DeadlineExceeded
		}
		return &InjectedError{Fault: f.Rule, st: status.FromContextError(err)}
	}
	if f.Code == "" {
		return nil
	}
	c, ok := grpcCode(f.Code)
	if !ok || c == codes.OK {
		return nil
	}
	return &InjectedError{Fault: f.Rule, st: status.New(c, f.Message)}
}

// InjectedError is the error of a call a fault rule failed: a gRPC status (what the client gets)
// that also names the rule, for the trace.
type InjectedError struct {
	Fault string // the rule's ID
	st    *status.Status
}

func (e *InjectedError) Error() string { return e.st.Err().Error() }

// GRPCStatus is what gRPC sends the client.
func (e *InjectedError) GRPCStatus() *status.Status { return e.st }

// InjectedFault names the rule (see trace's events).
func (e *InjectedError) InjectedFault() string { return e.Fault }

// GRPCError returns the fault as a gRPC status error, or nil for a pure delay.
func GRPCError(f Fault) error {
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
//
// It sees the message as the trace shows it (trace.Redact): a secret (a CRI AuthConfig's password,
// auth and tokens, every CSI field marked csi_secret) reads as trace.Redacted. A rule can match
// only what the trace would show, so its matched count can never reveal a redacted value (issue 24:
// one silent rule per character of "auth.password" and the counts read back recovered it).
func ProtoFields(m proto.Message) Fields {
	redacted := false
	return func(p string) (string, bool) {
		if m == nil {
			return "", false
		}
		if !redacted {
			// On the first lookup only: most calls of a fake with rules match on the method alone.
			m, redacted = trace.Redact(m), true
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

// UnaryServerInterceptor applies the set's rules to every unary gRPC call before its handler
// runs, for a server that chains interceptors; trace.Recorder.UnaryServerInterceptorWith takes
// the Set itself and names the fault in the trace.
func (s *Set) UnaryServerInterceptor() grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		if _, err := s.Inject(ctx, info.FullMethod, req); err != nil {
			return nil, err
		}
		return handler(ctx, req)
	}
}

// StreamServerInterceptor applies the rules to streaming calls (matching on the method only).
// A failed call's error names the rule (InjectedError), which the trace's stream events show.
func (s *Set) StreamServerInterceptor() grpc.StreamServerInterceptor {
	return func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
		if f, ok := s.Check(info.FullMethod, nil); ok {
			if err := answer(ss.Context(), f); err != nil {
				return err
			}
		}
		return handler(srv, ss)
	}
}

// ParseFile reads rules from YAML or JSON; name is used in error messages.
func ParseFile(data []byte, name string) (File, error) {
	js, err := yaml.YAMLToJSON(data)
	if err != nil {
		return File{}, fmt.Errorf("%s: %w", name, err)
	}
	return rules.ParseJSON(js, name)
}

// Load reads a --faults file into a new set seeded by the file's seed, with the given options
// (WithMethods: the fake's methods, so a misspelt method is an error naming the file).
func Load(filename string, opts ...Option) (*Set, error) {
	f, err := ReadFile(filename)
	if err != nil {
		return nil, err
	}
	return NewSetOf(f, f.Seed, filename, opts...)
}

// ReadFile reads and parses a --faults file without making a set of it, for a caller that
// chooses the seed itself (a --fault-seed flag over the file's seed: NewSetOf).
func ReadFile(filename string) (File, error) {
	data, err := os.ReadFile(filename)
	if err != nil {
		return File{}, fmt.Errorf("read faults file: %w", err)
	}
	return ParseFile(data, filename)
}

// NewSetOf returns a set seeded by seed (not f.Seed) holding f's rules, each validated as Add
// validates it; name is the file's, for error messages.
func NewSetOf(f File, seed uint64, name string, opts ...Option) (*Set, error) {
	s := NewSet(seed, opts...)
	for i, r := range f.Rules {
		if err := s.Validate(r); err != nil {
			return nil, fmt.Errorf("%s: rules[%d]: %w", name, i, err)
		}
	}
	if _, err := s.Add(f.Rules...); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return s, nil
}
