package rules

import (
	"strings"
	"testing"
)

// FuzzParseJSON: a rules file (cni-fake's faultsFile, the fakes' --faults after YAML → JSON)
// parses or is refused with its name; what parses is added to a set and checked against calls
// with fields, never panicking, and a rule used up stops matching.
func FuzzParseJSON(f *testing.F) {
	for _, s := range []string{
		`{"seed":7,"rules":[{"method":"PullImage","match":{"image.image":"*nginx*"},"code":"Unavailable","message":"down","times":2}]}`,
		`{"rules":[{"method":"Stop*","delay":"3s","after":1,"probability":0.5}]}`,
		`{"rules":[{"method":"ADD","code":"11","times":1}]}`,
		`{"rules":[{"method":"[","match":{"a":"[!]"}}]}`, `{"rules":[{"delay":"-1s"}]}`, `{"rules":[{"delay":"9999999999h"}]}`,
		`{"rules":[]} {}`, `{"rules":[{"probability":2}]}`,
	} {
		f.Add([]byte(s), "PullImage", "image.image", "docker.io/library/nginx:1")
	}
	f.Fuzz(func(t *testing.T, data []byte, method, key, value string) {
		file, err := ParseJSON(data, "faults.json")
		if err != nil {
			if !strings.HasPrefix(err.Error(), "faults.json") {
				t.Fatalf("error does not name the file: %v", err)
			}
			return
		}
		for _, codes := range []Codes{GRPCCodes, CNICodes} {
			s := NewSet(file.Seed, WithCodes(codes))
			ids, err := s.Add(file.Rules...)
			if err != nil {
				continue
			}
			fields := func(k string) (string, bool) { return value, k == key }
			for range 3 {
				s.Check(method, fields)
			}
			for _, id := range ids {
				r, ok := s.Rule(id)
				if !ok {
					t.Fatalf("rule %s added but not found", id)
				}
				if r.Times > 0 && r.Hits > r.Times || r.Hits > r.Matched {
					t.Fatalf("rule %+v: hits past its times or its matches", r)
				}
			}
		}
	})
}

// FuzzGlob: a match pattern compiles or is refused; a compiled one matches its own literal text
// when it has no special characters.
func FuzzGlob(f *testing.F) {
	for _, s := range []string{"*nginx*", "a?c", "[abc]", "[!a]", "[]]", "[", "\\*", "x[a-", "**", "é", "\\é*"} {
		f.Add(s, "nginx")
	}
	f.Fuzz(func(t *testing.T, pattern, s string) {
		re, err := Glob(pattern)
		if err != nil {
			return
		}
		re.MatchString(s)
		if !strings.ContainsAny(pattern, `*?[\`) && !re.MatchString(pattern) {
			t.Fatalf("literal pattern %q does not match itself", pattern)
		}
		if strings.HasPrefix(pattern, `\`) && len(pattern) > 1 && !strings.ContainsAny(pattern[1:], `*?[\`) && !re.MatchString(pattern[1:]) {
			t.Fatalf("escaped literal %q does not match %q", pattern, pattern[1:])
		}
	})
}
