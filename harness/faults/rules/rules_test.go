package rules

import (
	"encoding/json"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestGlob(t *testing.T) {
	for _, tc := range []struct {
		pattern, s string
		want       bool
	}{
		{"nginx*", "nginx:1.27", true},
		{"*nginx*", "docker.io/library/nginx:1.27", true},
		{"nginx*", "docker.io/library/nginx", false},
		{"*", "", true},
		{"a?c", "abc", true},
		{"a?c", "a/c", true}, // ? and * cross slashes: references and paths have them
		{"a?c", "ac", false},
		{"/var/run/netns/*", "/var/run/netns/cni-1/x", true},
		{"[abc]x", "bx", true},
		{"[!abc]x", "bx", false},
		{"[!abc]x", "dx", true},
		{"[^abc]x", "dx", true},
		{"[a-c]", "b", true},
		{"[]]", "]", true},
		{`\*`, "*", true},
		{`\*`, "x", false},
		{"a.b", "aXb", false}, // regexp metacharacters are literal
		{"(x)+", "(x)+", true},
		{"10.88.*", "10.88.0.7", true},
		{"*\n*", "a\nb", true},
	} {
		re, err := Glob(tc.pattern)
		if err != nil {
			t.Errorf("Glob(%q): %v", tc.pattern, err)
			continue
		}
		if got := re.MatchString(tc.s); got != tc.want {
			t.Errorf("Glob(%q) on %q = %v, want %v", tc.pattern, tc.s, got, tc.want)
		}
	}
	for _, bad := range []string{"[abc", `x\`, "[]"} {
		if _, err := Glob(bad); err == nil {
			t.Errorf("Glob(%q) accepted", bad)
		}
	}
}

func TestMethodMatches(t *testing.T) {
	for _, tc := range []struct {
		rule, method string
		want         bool
	}{
		{"PullImage", "/runtime.v1.ImageService/PullImage", true},
		{"pullimage", "/runtime.v1.ImageService/PullImage", true},
		{"/runtime.v1.ImageService/PullImage", "/runtime.v1.ImageService/PullImage", true},
		{"/runtime.v1.ImageService/PullImage", "PullImage", true},
		{"/runtime.v1.RuntimeService/PullImage", "/runtime.v1.ImageService/PullImage", false},
		{"RemoveImage", "/runtime.v1.ImageService/PullImage", false},
		{"*", "ADD", true},
		{"add", "ADD", true},
		{"ADD", "DEL", false},
	} {
		if got := MethodMatches(tc.rule, tc.method); got != tc.want {
			t.Errorf("MethodMatches(%q, %q) = %v, want %v", tc.rule, tc.method, got, tc.want)
		}
	}
}

func TestDecode(t *testing.T) {
	var r Rule
	if err := json.Unmarshal([]byte(`{"verb":"ADD","code":11,"message":"no IP addresses available","after":2,"times":1,"delay":"10ms","match":{"CNI_CONTAINERID":"abc*"}}`), &r); err != nil {
		t.Fatal(err)
	}
	if r.Method != "ADD" || r.Code != "11" || r.After != 2 || r.Times != 1 || time.Duration(r.Delay) != 10*time.Millisecond || r.Match["CNI_CONTAINERID"] != "abc*" {
		t.Fatalf("decoded %+v", r)
	}
	if err := json.Unmarshal([]byte(`{"method":"PullImage","code":"Unavailable","hits":3}`), &r); err != nil || r.Code != "Unavailable" || r.Hits != 3 {
		t.Fatalf("decoded %+v, %v", r, err)
	}
	for _, tc := range []struct{ in, want string }{
		{`{"method":"X","cod":"NotFound"}`, `unknown field "cod"`},
		{`{"method":"X","verb":"ADD","code":"NotFound"}`, "not both"},
		{`{"verb":"ADD","code":-1}`, "CNI error number"},
		{`{"verb":"ADD","code":1.5}`, "CNI error number"},
		{`{"verb":"ADD","delay":"soon"}`, "delay"},
	} {
		if err := json.Unmarshal([]byte(tc.in), &r); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err = %v, want %q", tc.in, err, tc.want)
		}
	}
	// Written back, a rule reads the same (the admin API lists rules as JSON).
	in := Rule{ID: "a", Method: "ADD", Code: "11", Delay: Duration(time.Second), Times: 2, After: 1, Match: map[string]string{"k": "v"}}
	b, _ := json.Marshal(in)
	var out Rule
	if err := json.Unmarshal(b, &out); err != nil || out.ID != "a" || out.Code != "11" || out.Delay != in.Delay || out.After != 1 || out.Match["k"] != "v" {
		t.Fatalf("round trip of %s: %+v, %v", b, out, err)
	}
}

func TestParseJSON(t *testing.T) {
	f, err := ParseJSON([]byte(`{"seed":3,"rules":[{"verb":"DEL","code":5,"times":1}]}`), "f.json")
	if err != nil || f.Seed != 3 || len(f.Rules) != 1 || f.Rules[0].Method != "DEL" {
		t.Fatalf("%+v, %v", f, err)
	}
	for _, tc := range []struct{ in, want string }{
		{`{"rules":[{"verb":"DEL"}]}`, "f.json: rules[0]: fault rule for DEL: give a code, a delay, or both"},
		{`{"rule":[]}`, `f.json: json: unknown field "rule"`},
		{`{"rules":[]} {}`, "more than one"},
		{`rules: []`, "f.json"},
	} {
		if _, err := ParseJSON([]byte(tc.in), "f.json"); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err = %v, want %q", tc.in, err, tc.want)
		}
	}
}

func TestValidateAgainstTheFake(t *testing.T) {
	cri := NewSet(0, WithMethods("/runtime.v1.ImageService/PullImage", "/runtime.v1.ImageService/ListImages", "/runtime.v1.RuntimeService/Version"), WithCodes(GRPCCodes))
	cni := NewSet(0, WithMethods("ADD", "DEL", "CHECK", "STATUS", "GC"), WithCodes(CNICodes))
	for _, tc := range []struct {
		set  *Set
		rule Rule
		want string // "" accepts
	}{
		{cri, Rule{Method: "PullImage", Code: "Unavailable"}, ""},
		{cri, Rule{Method: "/runtime.v1.ImageService/PullImage", Code: "Unavailable"}, ""},
		{cri, Rule{Method: "*", Delay: Duration(time.Millisecond)}, ""},
		{cri, Rule{Method: "PullImag", Code: "Unavailable"}, `"PullImag" is not a method of this fake (did you mean PullImage?); the methods are ListImages, PullImage, Version`},
		{cri, Rule{Method: "/runtime.v1.RuntimeService/PullImage", Code: "Unavailable"}, "is not a method"},
		{cri, Rule{Method: "Frobnicate", Code: "Unavailable"}, "is not a method of this fake; the methods are"},
		{cri, Rule{Method: "PullImage", Code: "11"}, `code "11" is not a gRPC code name`},
		{cni, Rule{Method: "add", Code: "11"}, ""},
		{cni, Rule{Method: "ADD", Code: "Unavailable"}, "not a CNI error number"},
		{cni, Rule{Method: "ADDD", Code: "11"}, "did you mean ADD?"},
		{cni, Rule{Method: "ADD", Code: "0"}, `code "0" is neither a gRPC code name`},
	} {
		err := tc.set.Validate(tc.rule)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%+v refused: %v", tc.rule, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%+v: err = %v, want %q", tc.rule, err, tc.want)
		}
		if _, aerr := tc.set.Add(tc.rule); (aerr == nil) != (err == nil) {
			t.Errorf("%+v: Add says %v, Validate %v", tc.rule, aerr, err)
		}
	}
}

func TestAddIsAllOrNothing(t *testing.T) {
	s := NewSet(0)
	if _, err := s.Add(Rule{ID: "a", Method: "X", Code: "NotFound"}, Rule{ID: "a", Method: "Y", Code: "NotFound"}); err == nil {
		t.Fatal("duplicate IDs accepted")
	}
	if _, err := s.Add(Rule{Method: "X", Code: "NotFound"}, Rule{Method: "Y"}); err == nil {
		t.Fatal("an invalid rule accepted")
	}
	if n := len(s.Rules()); n != 0 || s.Active() {
		t.Fatalf("a refused Add left %d rules (active %v)", n, s.Active())
	}
	// Automatic IDs step over the ones given.
	ids, err := s.Add(Rule{ID: "rule-1", Method: "X", Code: "NotFound"}, Rule{Method: "Y", Code: "NotFound"})
	if err != nil || ids[0] != "rule-1" || ids[1] != "rule-2" {
		t.Fatalf("ids %v, %v", ids, err)
	}
}

func TestCounting(t *testing.T) {
	s := NewSet(7)
	ids, _ := s.Add(Rule{ID: "third", Method: "ADD", Code: "11", After: 2, Times: 1})
	var got []bool
	for range 5 {
		_, hit := s.Check("ADD", nil)
		got = append(got, hit)
	}
	if want := []bool{false, false, true, false, false}; !slices.Equal(got, want) {
		t.Fatalf("hits %v, want %v", got, want)
	}
	r, ok := s.Rule(ids[0])
	if !ok || r.Hits != 1 || r.Matched != 3 || !r.UsedUp() {
		t.Fatalf("a used-up rule should stay with its counts: %+v, %v", r, ok)
	}
	if s.Active() {
		t.Fatal("a set whose rules are all used up is still active (Check would take its lock)")
	}
	// Counts restored from elsewhere (cni-fake's state file) decide what the next call sees.
	s.SetCounts("third", 0, 0)
	if !s.Active() {
		t.Fatal("reset counts: not active")
	}
	s.SetCounts("third", 2, 0)
	if f, hit := s.Check("ADD", nil); !hit || f.Rule != "third" || f.Code != "11" || f.Message != "injected fault third on ADD" {
		t.Fatalf("after restoring matched=2: %+v %v", f, hit)
	}

	s.Reset()
	s.Add(Rule{Method: "Version", Code: "Unavailable", Probability: 0.5})
	hits := 0
	for range 1000 {
		if _, hit := s.Check("Version", nil); hit {
			hits++
		}
	}
	if hits < 400 || hits > 600 {
		t.Fatalf("probability 0.5 hit %d of 1000", hits)
	}
	if r := s.Rules()[0]; r.Hits != hits || r.Matched != 1000 {
		t.Fatalf("counts %d/%d, want %d/1000", r.Hits, r.Matched, hits)
	}
	if s.Remove("rule-9") || !s.Remove(s.Rules()[0].ID) || s.Active() {
		t.Fatal("Remove")
	}
}

// The same seed, or the same saved source, gives the same sequence.
func TestSourceIsRepeatable(t *testing.T) {
	run := func(s *Set) []bool {
		s.Add(Rule{Method: "ADD", Code: "11", Probability: 0.3})
		var out []bool
		for range 50 {
			_, hit := s.Check("ADD", nil)
			out = append(out, hit)
		}
		return out
	}
	if a, b := run(NewSet(42)), run(NewSet(42)); !slices.Equal(a, b) {
		t.Fatal("same seed, different hits")
	}
	src := rand.NewPCG(1, 2)
	first := run(NewSet(0, WithSource(src)))
	saved, _ := src.MarshalBinary()
	second := run(NewSet(0, WithSource(src)))
	again := rand.NewPCG(0, 0)
	again.UnmarshalBinary(saved)
	if replay := run(NewSet(0, WithSource(again))); !slices.Equal(second, replay) || slices.Equal(first, second) {
		t.Fatal("a restored source does not continue the sequence")
	}
}

func TestFieldsMatch(t *testing.T) {
	s := NewSet(0)
	s.Add(Rule{Method: "ADD", Code: "11", Match: map[string]string{"CNI_CONTAINERID": "abc*", "name": "plugsim"}})
	fields := func(m map[string]string) Fields {
		return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
	}
	for _, tc := range []struct {
		f    Fields
		want bool
	}{
		{fields(map[string]string{"CNI_CONTAINERID": "abc123", "name": "plugsim"}), true},
		{fields(map[string]string{"CNI_CONTAINERID": "xabc", "name": "plugsim"}), false},
		{fields(map[string]string{"CNI_CONTAINERID": "abc123"}), false}, // a missing field never matches
		{nil, false},
	} {
		if _, hit := s.Check("ADD", tc.f); hit != tc.want {
			t.Errorf("hit = %v, want %v", hit, tc.want)
		}
	}
}

// Issue 24, 4: rules are bounded before anything is compiled or searched. A 1 MB match string (about
// 100 MB compiled, before) and a 1 MB method name (1.7 s in the did-you-mean search, before) are
// refused by their size; a set holds at most MaxRules rules and MaxMatchBytes of match patterns.
func TestRulesAreBounded(t *testing.T) {
	huge := strings.Repeat("?", 1<<20)
	s := NewSet(1, WithMethods("/runtime.v1.ImageService/PullImage", "/runtime.v1.RuntimeService/RunPodSandbox"))
	for _, tc := range []struct {
		rule Rule
		want string
	}{
		{Rule{Method: "PullImage", Match: map[string]string{"auth.password": huge}, Code: "Unavailable"}, "the pattern is 1048576 bytes, more than 1024"},
		{Rule{Method: huge, Code: "Unavailable"}, "the method is 1048576 bytes, more than 128"},
		{Rule{ID: huge, Method: "PullImage", Code: "Unavailable"}, "the ID is 1048576 bytes"},
		{Rule{Method: "PullImage", Message: huge, Code: "Unavailable"}, "the message is 1048576 bytes"},
		{Rule{Method: "PullImage", Match: map[string]string{huge: "x"}, Code: "Unavailable"}, "bytes, more than 128"},
		{Rule{Method: "PullImage", Match: map[string]string{"a": "1", "b": "1", "c": "1", "d": "1", "e": "1", "f": "1", "g": "1", "h": "1", "i": "1"}, Code: "Unavailable"}, "it matches 9 fields, more than 8"},
	} {
		_, err := s.Add(tc.rule)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Add: %v, want an error saying %q", err, tc.want)
		} else if len(err.Error()) > 1024 {
			t.Errorf("the error is %d bytes: it repeats the input", len(err.Error()))
		}
	}
	// The count.
	for i := range MaxRules {
		if _, err := s.Add(Rule{Method: "PullImage", Code: "Unavailable", Times: 1}); err != nil {
			t.Fatalf("rule %d: %v", i+1, err)
		}
	}
	if _, err := s.Add(Rule{Method: "PullImage", Code: "Unavailable"}); err == nil || !strings.Contains(err.Error(), "more than the 256 a fake holds") {
		t.Errorf("rule %d: %v, want it refused", MaxRules+1, err)
	}
	s.Remove("rule-1")
	if _, err := s.Add(Rule{Method: "PullImage", Code: "Unavailable"}); err != nil {
		t.Errorf("after removing one: %v", err)
	}
	// The patterns of all rules together.
	s.Reset()
	pattern := strings.Repeat("*a", MaxPatternBytes/2)
	n := 0
	var err error
	for ; n < MaxRules; n++ {
		if _, err = s.Add(Rule{Method: "PullImage", Match: map[string]string{"image.image": pattern}, Code: "Unavailable"}); err != nil {
			break
		}
	}
	if err == nil || !strings.Contains(err.Error(), "more than the 65536 a fake holds") || n != MaxMatchBytes/(MaxPatternBytes+len("image.image")) {
		t.Errorf("after %d rules of 1 KiB patterns: %v, want the %dth refused", n, err, MaxMatchBytes/(MaxPatternBytes+len("image.image"))+1)
	}
}
