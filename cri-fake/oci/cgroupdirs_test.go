package oci

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/plugsim/plugsim/internal/mountinfo"
)

// A cri-fake in a node's cgroup namespace records its cgroups as it sees them; from the machine's side
// they are below the namespace's root in the same hierarchy.
func TestCgroupDirsBelowAViewRoot(t *testing.T) {
	mounts, err := mountinfo.Read()
	if err != nil {
		t.Fatal(err)
	}
	mp := ""
	for _, m := range mounts {
		if (m.FSType == "cgroup" || m.FSType == "cgroup2") && strings.HasPrefix(m.MountPoint, cgroupRoot) {
			mp = m.MountPoint
			break
		}
	}
	if mp == "" {
		t.Skip("no cgroup hierarchy mounted below " + cgroupRoot)
	}
	dir := t.TempDir()
	seen := filepath.Join(mp, "system.slice/cri-fake.service/node1-programs")
	if err := os.WriteFile(filepath.Join(dir, cgroupsFile), []byte(`["`+seen+`"]`), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ root, want string }{
		{"/", seen},
		{"", seen},
		{"/plugsim-1a2b3c-node1", filepath.Join(mp, "plugsim-1a2b3c-node1/system.slice/cri-fake.service/node1-programs")},
		{"plugsim-1a2b3c-node1/", filepath.Join(mp, "plugsim-1a2b3c-node1/system.slice/cri-fake.service/node1-programs")},
	} {
		got, err := CgroupDirs(dir, c.root)
		if err != nil || !slices.Equal(got, []string{c.want}) {
			t.Errorf("CgroupDirs(root %q) = %q, %v; want [%q]", c.root, got, err, c.want)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, cgroupsFile), []byte(`["/tmp/not-a-cgroup"]`), 0o600); err != nil {
		t.Fatal(err)
	}
	if got, err := CgroupDirs(dir, "/plugsim-1a2b3c-node1"); err == nil {
		t.Errorf("a recorded directory below no hierarchy: %q, want an error", got)
	}
	if got, err := CgroupDirs(t.TempDir(), "/x"); err != nil || got != nil {
		t.Errorf("no %s: %q, %v; want nothing and no error", cgroupsFile, got, err)
	}
}
