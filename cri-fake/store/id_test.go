package store

import (
	"strings"
	"testing"
)

func TestValidateID(t *testing.T) {
	for _, tc := range []struct {
		id string
		ok bool
	}{
		{"web-7c9f", true}, {"a", true}, {"A.b_c-d", true}, {strings.Repeat("a", 76), true},
		{strings.Repeat("f", 64), true},
		{"", false}, {strings.Repeat("a", 77), false}, {"../x", false}, {"a/b", false}, {".hidden", false},
		{"a..b", false}, {"a-", false}, {"-a", false}, {"a b", false}, {"ü", false},
	} {
		if err := ValidateID(tc.id); (err == nil) != tc.ok {
			t.Errorf("ValidateID(%q) = %v, want ok=%v", tc.id, err, tc.ok)
		}
	}
}

func TestSeeded(t *testing.T) {
	f := FileState{Dir: t.TempDir()}
	if _, ok := f.Seeded(); ok {
		t.Fatal("a fresh directory reads as seeded")
	}
	if err := f.SaveSeeded("node.yaml"); err != nil {
		t.Fatal(err)
	}
	if from, ok := f.Seeded(); !ok || from != "node.yaml" {
		t.Fatalf("Seeded = %q, %v", from, ok)
	}
	if l, err := f.Load(); err != nil || !l.Empty() {
		t.Fatalf("the marker is read as state: %+v %v", l, err)
	}
}
