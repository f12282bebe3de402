package state

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestCheckID(t *testing.T) {
	for _, tc := range []struct {
		id, reason string // reason "" means valid
	}{
		{"vol-0123456789abcdef", ""},
		{"fake-vol-id", ""},
		{"csi-" + strings.Repeat("ab", 32), ""},
		{"..a", ""},
		{"a..", ""},
		{"with space", ""},
		{"ünïcødé", ""},
		{strings.Repeat("x", MaxIDBytes), ""},
		{"", "empty"},
		{".", "names a directory"},
		{"..", "names a directory"},
		{"../x", "contains '/'"},
		{"/etc", "contains '/'"},
		{"a/b", "contains '/'"},
		{"a\x00", "U+0000"},
		{"a\tb", "U+0009"},
		{"a\u009f", "U+009F"},
		{"\xc3", "UTF-8"},
		{strings.Repeat("x", MaxIDBytes+1), "129 bytes"},
	} {
		err := CheckID(tc.id)
		switch {
		case tc.reason == "" && err != nil:
			t.Errorf("CheckID(%s) = %v, want nil", QuoteID(tc.id), err)
		case tc.reason != "" && (err == nil || !strings.Contains(err.Error(), tc.reason)):
			t.Errorf("CheckID(%s) = %v, want an error saying %q", QuoteID(tc.id), err, tc.reason)
		}
	}
	if q := QuoteID(strings.Repeat("ü", 100)); len(q) > 100 || !strings.Contains(q, "200 bytes") {
		t.Errorf("QuoteID of a long ID: %s", q)
	}
}

// TestStateWithHostileIDsIsCorrupt: a state file whose IDs could name paths outside the data
// directory (edited by hand, or by anyone who can write the state directory) is refused at start
// like any corrupt file, and left as it is.
func TestStateWithHostileIDsIsCorrupt(t *testing.T) {
	for name, content := range map[string]string{
		"volume":            `{"version":1,"volumes":{"../../etc":{"id":"../../etc"}}}`,
		"volume key and id": `{"version":1,"volumes":{"vol-1":{"id":"../vol-1"}}}`,
		"null volume":       `{"version":1,"volumes":{"vol-1":null}}`,
		"snapshot":          `{"version":1,"snapshots":{"..":{"id":".."}}}`,
		"group":             `{"version":1,"groupSnapshots":{"g/1":{"id":"g/1"}}}`,
		"group member":      `{"version":1,"groupSnapshots":{"g-1":{"id":"g-1","snapshotIds":["/tmp/x"]}}}`,
		"node volume":       `{"version":1,"node":{"a\u0000b":{"volumeId":"a\u0000b"}}}`,
		"node key and id":   `{"version":1,"node":{"csi-1":{"volumeId":"../../../tmp/victim"}}}`,
	} {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), FileName)
			os.WriteFile(path, []byte(content), 0o600)
			_, err := Open(path)
			var ce *CorruptError
			if !errors.As(err, &ce) {
				t.Fatalf("Open = %v, want a CorruptError", err)
			}
			if got, _ := os.ReadFile(path); string(got) != content {
				t.Fatalf("the file was changed to %q", got)
			}
		})
	}
}
