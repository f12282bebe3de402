package pathlimit

import (
	"strings"
	"testing"
)

func TestCheck(t *testing.T) {
	for _, c := range []struct {
		p    string
		want string // "" for no error
	}{
		{"/var/lib/kubelet/pods/x/volumes/v", ""},
		{"/" + strings.Repeat("n", MaxName), ""},
		{"/" + strings.Repeat("n", MaxName+1), "NAME_MAX"},
		{"a/" + strings.Repeat("n", MaxName+1) + "/b", "NAME_MAX"},
		{strings.Repeat("d/", (MaxPath-1)/2) + "x", ""}, // MaxPath-1 bytes
		{strings.Repeat("d/", MaxPath/2), "PATH_MAX"},   // MaxPath bytes
	} {
		err := Check(c.p)
		switch {
		case c.want == "" && err != nil:
			t.Errorf("Check(%d bytes): %v, want nil", len(c.p), err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("Check(%d bytes): %v, want an error naming %s", len(c.p), err, c.want)
		}
	}
}
