package mountinfo

import (
	"fmt"
	"testing"
)

func TestParse(t *testing.T) {
	in := "22 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw\n" +
		"40 22 0:30 /a\\040b /mnt/with\\040space rw master:3 propagate_from:1 - tmpfs tmpfs rw,size=10k\n" +
		"garbage\n41 22 0:31 / /x rw - proc\n"
	got := Parse([]byte(in))
	if len(got) != 2 {
		t.Fatalf("parsed %d mounts, want 2: %+v", len(got), got)
	}
	if got[0].Tag("shared") != 1 || got[0].FSType != "ext4" || got[0].Source != "/dev/sda1" {
		t.Errorf("first: %+v", got[0])
	}
	if got[1].MountPoint != "/mnt/with space" || got[1].Root != "/a b" || got[1].Tag("master") != 3 || got[1].Tag("shared") != 0 || got[1].SuperOpts != "rw,size=10k" {
		t.Errorf("second: %+v", got[1])
	}
	if m, ok := Lookup(got, "/mnt/with space/sub"); !ok || m.ID != 40 {
		t.Errorf("lookup below the second: %+v %v", m, ok)
	}
	if m, ok := Lookup(got, "/mnt/with spaces"); !ok || m.ID != 22 {
		t.Errorf("lookup of a sibling with a longer name: %+v %v (a string prefix is not a parent)", m, ok)
	}
	if e := Escape("/a b\\c"); e != `/a\040b\134c` || Unescape(e) != "/a b\\c" {
		t.Errorf("escape round trip: %q", e)
	}
}

// FuzzParse: any bytes parse without a panic, and what is parsed
// prints and parses back to the same mount points.
func FuzzParse(f *testing.F) {
	f.Add([]byte("22 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw\n"))
	f.Add([]byte("40 22 0:30 /a\\040b /m\\134x rw master:3 - tmpfs tmpfs rw\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, m := range Parse(data) {
			if m.MountPoint == "" {
				continue
			}
			line := fmt.Sprintf("%d %d %s %s %s rw - x y z\n", m.ID, m.Parent, "0:0", Escape(m.Root), Escape(m.MountPoint))
			back := Parse([]byte(line))
			if len(back) != 1 || back[0].MountPoint != m.MountPoint || back[0].Root != m.Root {
				t.Fatalf("%q printed as %q parsed back as %+v", m.MountPoint, line, back)
			}
		}
	})
}
