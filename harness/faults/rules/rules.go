// Package rules is the fault-rule language every fake shares, with no dependency outside the
// standard library: a rule names a method (an RPC or a CNI verb), optionally request fields that
// must match globs, and what to do: answer with an error code and message, wait, or both, for
// every matching call, for N of them after skipping the first M, or with a probability.
//
// It lives apart from package faults (which adds the gRPC interceptors and YAML files and
// re-exports these types under the same names) so that the cni-fake plugin binary, exec'd once
// per CNI call, can apply the same rules without linking gRPC, protobuf or a YAML parser: their
// package initialisation would add milliseconds to every exec.
package rules

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"path"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"
)

// Rule is one fault. Zero fields match or do nothing: a rule with only Method and Delay slows
// every call of that method down and lets it through.
//
// In JSON (and the YAML files of package faults) a rule is an object with the keys below. Two
// spellings are accepted besides: "verb" for "method" (what a CNI rule names), and a number for
// "code" (a CNI error code: "code": 11). Unknown keys are refused.
type Rule struct {
	// ID names the rule; Set.Add assigns "rule-N" (N counting the rules added) when empty.
	ID string `json:"id,omitempty"`
	// Method is the RPC name ("PullImage"), the full gRPC method
	// ("/runtime.v1.ImageService/PullImage"), the CNI verb ("ADD"), or "*" for every call. Names
	// compare without regard to case. A Set that knows its fake's methods (WithMethods) refuses a
	// name that is none of them.
	Method string `json:"method"`
	// Match requires request fields to have these values; each value is a glob (see Glob). What
	// a key names depends on the fake: a dotted path of proto field names for gRPC
	// ("image.image", "config.metadata.name", "config.labels.app"), an environment variable or a
	// path into the network configuration for CNI ("CNI_CONTAINERID", "CNI_ARGS.K8S_POD_NAME",
	// "args.cni.foo"). A field the call does not have never matches.
	Match map[string]string `json:"match,omitempty"`
	// Code is the error to answer with: a gRPC code name ("Unavailable", "NotFound") or a CNI
	// error code ("11"). Empty means no error (a pure delay).
	Code string `json:"code,omitempty"`
	// Message is the error message; a default naming the rule is used when empty.
	Message string `json:"message,omitempty"`
	// Delay is waited before answering ("250ms", "2s"), cut short when the caller gives up.
	Delay Duration `json:"delay,omitempty"`
	// After lets the first N matching calls through untouched: "after": 2, "times": 1 fails the
	// third call only.
	After int `json:"after,omitempty"`
	// Times limits the rule to N applications; 0 means no limit. A used-up rule stays in the set
	// (and in Set.Rules, with its counts) but applies no more.
	Times int `json:"times,omitempty"`
	// Probability in (0,1] applies the rule to that share of the matching calls (after the first
	// After); 0 means always.
	Probability float64 `json:"probability,omitempty"`

	// Matched counts the calls the rule matched, including those After let through and those
	// Probability spared.
	Matched int `json:"matched"`
	// Hits counts the calls the rule was applied to.
	Hits int `json:"hits"`
}

// UsedUp reports whether a rule limited by Times has been applied that many times.
func (r *Rule) UsedUp() bool { return r.Times > 0 && r.Hits >= r.Times }

// UnmarshalJSON reads a rule strictly (an unknown key is an error, whatever decoder the caller
// uses), taking "verb" for "method" and a number for "code".
func (r *Rule) UnmarshalJSON(b []byte) error {
	type plain Rule // without this method, so the decoder below does not recurse
	var aux struct {
		plain
		Verb string          `json:"verb"`
		Code json.RawMessage `json:"code"` // shadows plain.Code: a string or a number
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&aux); err != nil {
		return err
	}
	*r = Rule(aux.plain)
	if aux.Verb != "" {
		if r.Method != "" {
			return fmt.Errorf("fault rule %q: give either method (%q) or verb (%q), not both", r.ID, r.Method, aux.Verb)
		}
		r.Method = aux.Verb
	}
	if c := bytes.TrimSpace(aux.Code); len(c) > 0 && !bytes.Equal(c, []byte("null")) {
		if c[0] == '"' {
			if err := json.Unmarshal(c, &r.Code); err != nil {
				return fmt.Errorf("code: %w", err)
			}
		} else {
			n, err := strconv.ParseUint(string(c), 10, 32)
			if err != nil {
				return fmt.Errorf("code: want a gRPC code name or a CNI error number, got %s", c)
			}
			r.Code = strconv.FormatUint(n, 10)
		}
	}
	return nil
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

// Bounds on rules and sets. Rules come from other processes (the admin socket, the live view, a
// faults file), and a match pattern compiles to a regular expression about 50 to 130 times its size:
// before these bounds, each rule with a 1 MB match string added about 100 MB to the fake, and a 1 MB
// method name cost 1.7 s of CPU in the did-you-mean search (issue 24). Within them a set holds at most
// MaxMatchBytes of patterns, about 8 MiB compiled.
const (
	// MaxRules is the most rules a set (one fake's rules, or cni-fake's faults file) holds; a used-up
	// rule counts until it is removed.
	MaxRules = 256
	// MaxMatchKeys is the most fields one rule matches on.
	MaxMatchKeys = 8
	// MaxKeyBytes bounds a match key, MaxPatternBytes a match pattern.
	MaxKeyBytes     = 128
	MaxPatternBytes = 1024
	// MaxMatchBytes bounds the match keys and patterns of all a set's rules together.
	MaxMatchBytes = 64 << 10
	// MaxMethodBytes bounds a rule's method (the longest CRI or CSI method, with its service, is
	// under 70 bytes) and MaxIDBytes its ID.
	MaxMethodBytes = 128
	MaxIDBytes     = 128
	// MaxMessageBytes bounds a rule's error message.
	MaxMessageBytes = 4096
)

// clip shortens s for an error message.
func clip(s string) string {
	if len(s) <= 64 {
		return s
	}
	return fmt.Sprintf("%s… (%d bytes)", s[:64], len(s))
}

// name is how errors refer to the rule.
func (r *Rule) name() string {
	switch {
	case r.ID != "" && r.Method != "":
		return fmt.Sprintf("fault rule %q for %s", clip(r.ID), clip(r.Method))
	case r.ID != "":
		return fmt.Sprintf("fault rule %q", clip(r.ID))
	case r.Method != "":
		return "fault rule for " + clip(r.Method)
	}
	return "fault rule"
}

// matchBytes is what a rule's match takes of a set's MaxMatchBytes.
func (r *Rule) matchBytes() int {
	n := 0
	for k, v := range r.Match {
		n += len(k) + len(v)
	}
	return n
}

// checkBounds refuses a rule larger than the bounds above, before anything looks at its contents.
func (r *Rule) checkBounds() error {
	switch {
	case len(r.ID) > MaxIDBytes:
		return fmt.Errorf("%s: the ID is %d bytes, more than %d", r.name(), len(r.ID), MaxIDBytes)
	case len(r.Method) > MaxMethodBytes:
		return fmt.Errorf("%s: the method is %d bytes, more than %d (no method is that long)", r.name(), len(r.Method), MaxMethodBytes)
	case len(r.Message) > MaxMessageBytes:
		return fmt.Errorf("%s: the message is %d bytes, more than %d", r.name(), len(r.Message), MaxMessageBytes)
	case len(r.Match) > MaxMatchKeys:
		return fmt.Errorf("%s: it matches %d fields, more than %d", r.name(), len(r.Match), MaxMatchKeys)
	}
	for k, v := range r.Match {
		if len(k) > MaxKeyBytes {
			return fmt.Errorf("%s: match key %q is %d bytes, more than %d", r.name(), clip(k), len(k), MaxKeyBytes)
		}
		if len(v) > MaxPatternBytes {
			return fmt.Errorf("%s: match %s: the pattern is %d bytes, more than %d", r.name(), clip(k), len(v), MaxPatternBytes)
		}
	}
	return nil
}

// Validate reports what is wrong with a rule on its own; Set.Add checks more (the method names
// and code kind of its fake, and the set's bounds).
func (r *Rule) Validate() error {
	if err := r.checkBounds(); err != nil {
		return err
	}
	if r.Method == "" {
		return fmt.Errorf("%s: method is required (an RPC name, a CNI verb or \"*\")", r.name())
	}
	if r.Code == "" && r.Delay == 0 {
		return fmt.Errorf("%s: give a code, a delay, or both", r.name())
	}
	if r.Code != "" && !isCNICode(r.Code) && !IsGRPCCodeName(r.Code) {
		return fmt.Errorf("%s: code %q is neither a gRPC code name (%s) nor a CNI error number", r.name(), r.Code, strings.Join(grpcCodeNames[1:], ", "))
	}
	if r.Delay < 0 {
		return fmt.Errorf("%s: delay %v is negative", r.name(), time.Duration(r.Delay))
	}
	if r.Probability < 0 || r.Probability > 1 {
		return fmt.Errorf("%s: probability %v is outside [0,1]", r.name(), r.Probability)
	}
	if r.Times < 0 {
		return fmt.Errorf("%s: times %d is negative", r.name(), r.Times)
	}
	if r.After < 0 {
		return fmt.Errorf("%s: after %d is negative", r.name(), r.After)
	}
	for k, v := range r.Match {
		if k == "" {
			return fmt.Errorf("%s: match has an empty key", r.name())
		}
		if _, err := Glob(v); err != nil {
			return fmt.Errorf("%s: match %s: bad pattern %q: %v", r.name(), k, v, err)
		}
	}
	return nil
}

// grpcCodeNames are the gRPC status code names in code order (google.golang.org/grpc/codes),
// written out so that this package need not link gRPC.
var grpcCodeNames = []string{
	"OK", "Canceled", "Unknown", "InvalidArgument", "DeadlineExceeded", "NotFound", "AlreadyExists",
	"PermissionDenied", "ResourceExhausted", "FailedPrecondition", "Aborted", "OutOfRange",
	"Unimplemented", "Internal", "Unavailable", "DataLoss", "Unauthenticated",
}

// IsGRPCCodeName reports whether name is a gRPC status code name, in any case.
func IsGRPCCodeName(name string) bool {
	return slices.ContainsFunc(grpcCodeNames, func(n string) bool { return strings.EqualFold(n, name) })
}

// isCNICode reports whether code is a CNI error number. The spec reserves 0-99 for itself and
// gives 100 and up to plugins; 0 is no error at all.
func isCNICode(code string) bool {
	n, err := strconv.ParseUint(code, 10, 32)
	return err == nil && n > 0
}

// Codes says which kind of error code the rules of a Set may give.
type Codes int

const (
	// AnyCodes accepts gRPC code names and CNI numbers (a Set that does not know its fake).
	AnyCodes Codes = iota
	// GRPCCodes accepts gRPC code names: cri-fake and csi-fake.
	GRPCCodes
	// CNICodes accepts CNI error numbers: cni-fake.
	CNICodes
)

// Fault is what a matching rule asks for.
type Fault struct {
	Rule    string // the rule's ID
	Code    string
	Message string
	Delay   time.Duration
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

// Fields looks up a request field by its key (a Rule.Match key).
type Fields func(key string) (string, bool)

// Option configures a Set.
type Option func(*Set)

// WithMethods gives the method names of the fake the set belongs to: full gRPC names
// ("/runtime.v1.ImageService/PullImage"), bare RPC names or CNI verbs. Add then refuses a rule
// whose method is none of them, instead of keeping a rule that can never match.
func WithMethods(names ...string) Option {
	return func(s *Set) { s.methods = slices.Clone(names) }
}

// WithCodes restricts the rules' codes to one kind.
func WithCodes(c Codes) Option { return func(s *Set) { s.codes = c } }

// WithSource draws the probabilities from src, whose state the caller may save and restore
// (rand.PCG marshals itself): cni-fake, a new process for every call, does.
func WithSource(src rand.Source) Option { return func(s *Set) { s.rnd = rand.New(src) } }

// Set holds the rules of one fake. It is safe for concurrent use.
type Set struct {
	// active counts the rules not used up, so that Check, on every call of every fake, costs one
	// atomic load and no lock while no rule can apply (the usual case).
	active  atomic.Int32
	mu      sync.Mutex
	rules   []*entry
	ids     int
	rnd     *rand.Rand
	seed    uint64
	methods []string
	codes   Codes
}

// entry is a rule with its match patterns compiled.
type entry struct {
	Rule
	match []matcher
}

type matcher struct {
	key string
	re  *regexp.Regexp
}

// NewSet returns an empty set; seed makes probabilistic rules repeatable.
func NewSet(seed uint64, opts ...Option) *Set {
	s := &Set{seed: seed}
	for _, o := range opts {
		o(s)
	}
	if s.rnd == nil {
		s.rnd = rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	}
	return s
}

// Seed is the seed NewSet was given: with the same seed and the same calls, the probabilistic
// rules hit the same calls again. (A set given its source by WithSource reports the seed it was
// passed, which did not seed it.)
func (s *Set) Seed() uint64 { return s.seed }

// Validate checks a rule against what the set knows of its fake (its method names and code
// kind) besides what Rule.Validate checks, without adding it.
func (s *Set) Validate(r Rule) error {
	if err := r.Validate(); err != nil {
		return err
	}
	switch {
	case s.codes == GRPCCodes && r.Code != "" && !IsGRPCCodeName(r.Code):
		return fmt.Errorf("%s: code %q is not a gRPC code name; use one of %s", r.name(), r.Code, strings.Join(grpcCodeNames[1:], ", "))
	case s.codes == CNICodes && r.Code != "" && !isCNICode(r.Code):
		return fmt.Errorf("%s: code %q is not a CNI error number (the spec's: 1-7, 11, 50, 51; a plugin's own: 100 and up)", r.name(), r.Code)
	}
	if len(s.methods) > 0 && r.Method != "*" && !slices.ContainsFunc(s.methods, func(m string) bool { return MethodMatches(r.Method, m) }) {
		return fmt.Errorf("%s: %q is not a method of this fake%s; the methods are %s", r.name(), r.Method, s.suggest(r.Method), strings.Join(s.methodNames(), ", "))
	}
	return nil
}

// methodNames are the bare names of the set's methods, sorted, for error messages.
func (s *Set) methodNames() []string {
	var out []string
	for _, m := range s.methods {
		out = append(out, path.Base(m))
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// suggest names the method closest to a misspelt one, when one is close.
func (s *Set) suggest(method string) string {
	best, bestD := "", 4 // at most three edits away
	for _, m := range s.methodNames() {
		if d := editDistance(strings.ToLower(path.Base(method)), strings.ToLower(m)); d < bestD {
			best, bestD = m, d
		}
	}
	if best == "" {
		return ""
	}
	return fmt.Sprintf(" (did you mean %s?)", best)
}

func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// Add validates and appends rules, returning their IDs. Either every rule is added or none is.
// The counts a rule carries in (Matched, Hits) are reset.
func (s *Set) Add(rules ...Rule) ([]string, error) {
	entries := make([]*entry, len(rules))
	for i, r := range rules {
		if err := s.Validate(r); err != nil {
			return nil, err
		}
		e := &entry{Rule: r}
		e.Matched, e.Hits = 0, 0
		for k, v := range r.Match {
			re, _ := Glob(v) // Validate compiled it already
			e.match = append(e.match, matcher{key: k, re: re})
		}
		// Match order does not change the outcome; a fixed order makes Check's work repeatable.
		slices.SortFunc(e.match, func(a, b matcher) int { return strings.Compare(a.key, b.key) })
		entries[i] = e
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if n := len(s.rules) + len(entries); n > MaxRules {
		return nil, fmt.Errorf("fault rules: %d rules would be more than the %d a fake holds (used-up rules count until removed): remove some, or clear them", n, MaxRules)
	}
	total := 0
	for _, e := range s.rules {
		total += e.matchBytes()
	}
	for _, e := range entries {
		total += e.matchBytes()
	}
	if total > MaxMatchBytes {
		return nil, fmt.Errorf("fault rules: their match keys and patterns would take %d bytes, more than the %d a fake holds: remove some rules, or clear them", total, MaxMatchBytes)
	}
	taken := map[string]bool{}
	for _, have := range s.rules {
		taken[have.ID] = true
	}
	for _, e := range entries {
		if e.ID == "" {
			continue
		}
		if taken[e.ID] {
			return nil, fmt.Errorf("fault rule %q already exists", e.ID)
		}
		taken[e.ID] = true
	}
	ids := make([]string, len(entries))
	for i, e := range entries {
		for e.ID == "" {
			s.ids++
			if id := "rule-" + strconv.Itoa(s.ids); !taken[id] {
				e.ID = id
				taken[id] = true
			}
		}
		ids[i] = e.ID
		s.rules = append(s.rules, e)
		s.active.Add(1)
	}
	return ids, nil
}

// Remove deletes the rule with that ID and reports whether there was one.
func (s *Set) Remove(id string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, e := range s.rules {
		if e.ID == id {
			if !e.UsedUp() {
				s.active.Add(-1)
			}
			s.rules = slices.Delete(s.rules, i, i+1)
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
	s.active.Store(0)
}

// Rules returns a copy of the rules in the order they apply, with their counts; used-up rules
// are still there.
func (s *Set) Rules() []Rule {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Rule, len(s.rules))
	for i, e := range s.rules {
		out[i] = e.Rule
	}
	return out
}

// Rule returns the rule with that ID, with its counts.
func (s *Set) Rule(id string) (Rule, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, e := range s.rules {
		if e.ID == id {
			return e.Rule, true
		}
	}
	return Rule{}, false
}

// SetCounts sets the counts of the rule with that ID, for a process that keeps them between its
// runs (cni-fake restores them from its state file before each call).
func (s *Set) SetCounts(id string, matched, hits int) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, e := range s.rules {
		if e.ID == id {
			was := e.UsedUp()
			e.Matched, e.Hits = matched, hits
			switch now := e.UsedUp(); {
			case now && !was:
				s.active.Add(-1)
			case was && !now:
				s.active.Add(1)
			}
			return true
		}
	}
	return false
}

// Active reports whether any rule may still apply: false for an empty set, or one whose every
// rule is used up. It takes no lock.
func (s *Set) Active() bool { return s != nil && s.active.Load() > 0 }

// Check returns the fault for a call of method, if a rule applies, and counts the call in the
// rules it matched. The first rule that applies wins.
func (s *Set) Check(method string, fields Fields) (Fault, bool) {
	if !s.Active() {
		return Fault{}, false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, e := range s.rules {
		if e.UsedUp() || !MethodMatches(e.Method, method) || !e.fieldsMatch(fields) {
			continue
		}
		e.Matched++
		if e.Matched <= e.After {
			continue
		}
		if e.Probability > 0 && s.rnd.Float64() >= e.Probability {
			continue
		}
		e.Hits++
		if e.UsedUp() {
			s.active.Add(-1)
		}
		msg := e.Message
		if msg == "" && e.Code != "" {
			msg = fmt.Sprintf("injected fault %s on %s", e.ID, path.Base(method))
		}
		return Fault{Rule: e.ID, Code: e.Code, Message: msg, Delay: time.Duration(e.Delay)}, true
	}
	return Fault{}, false
}

// MethodMatches reports whether a rule's method names a call's method. Names compare without
// regard to case; a bare name matches the method of that name in any service; a full name
// ("/runtime.v1.ImageService/PullImage") matches only that service's method when the call's
// name is full too.
func MethodMatches(rule, method string) bool {
	if rule == "*" {
		return true
	}
	if strings.Contains(rule, "/") && strings.Contains(method, "/") {
		return strings.EqualFold(rule, method)
	}
	return strings.EqualFold(path.Base(rule), path.Base(method))
}

func (e *entry) fieldsMatch(fields Fields) bool {
	for _, m := range e.match {
		if fields == nil {
			return false
		}
		got, ok := fields(m.key)
		if !ok || !m.re.MatchString(got) {
			return false
		}
	}
	return true
}

// Glob compiles a shell-style pattern in which * matches any run of characters and ? any one
// character, "/" included (image references, volume paths and netns paths have slashes), [...]
// is a character class ([!...] or [^...] negated), and \ makes the next character literal.
func Glob(pattern string) (*regexp.Regexp, error) {
	var b strings.Builder
	b.WriteString("^")
	for i := 0; i < len(pattern); i++ {
		switch c := pattern[i]; c {
		case '*':
			b.WriteString("(?s:.*)")
		case '?':
			b.WriteString("(?s:.)")
		case '\\':
			if i+1 == len(pattern) {
				return nil, errors.New("trailing \\")
			}
			_, n := utf8.DecodeRuneInString(pattern[i+1:])
			b.WriteString(regexp.QuoteMeta(pattern[i+1 : i+1+n]))
			i += n
		case '[':
			j := strings.IndexByte(pattern[i+1:], ']')
			if j == 0 { // "[]...]": a leading ] is a member, as in the shell
				j = strings.IndexByte(pattern[i+2:], ']') + 1
				if j == 0 {
					return nil, errors.New("unclosed [")
				}
			}
			if j < 0 {
				return nil, errors.New("unclosed [")
			}
			class := pattern[i+1 : i+1+j]
			if strings.HasPrefix(class, "!") {
				class = "^" + class[1:]
			}
			b.WriteString("[" + strings.ReplaceAll(class, `\`, `\\`) + "]")
			i += j + 1
		default:
			// The byte itself: string(c) would be the rune c, so "é" (two bytes) matched "Ã©"
			// and a byte past 0x7f never matched itself (found by FuzzGlob).
			b.WriteString(regexp.QuoteMeta(pattern[i : i+1]))
		}
	}
	b.WriteString("$")
	return regexp.Compile(b.String())
}

// File is the shape of a fault rules file (the fakes' --faults, cni-fake's faultsFile).
type File struct {
	Seed  uint64 `json:"seed,omitempty"`
	Rules []Rule `json:"rules"`
}

// ParseJSON reads a rules file in JSON, strictly, and validates each rule; name is used in
// error messages.
func ParseJSON(data []byte, name string) (File, error) {
	var f File
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&f); err != nil {
		return f, fmt.Errorf("%s: %w", name, err)
	}
	if dec.More() {
		return f, fmt.Errorf("%s: more than one JSON value", name)
	}
	for i := range f.Rules {
		if err := f.Rules[i].Validate(); err != nil {
			return f, fmt.Errorf("%s: rules[%d]: %w", name, i, err)
		}
	}
	return f, nil
}
