package main

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/containernetworking/cni/pkg/types"

	"github.com/plugsim/plugsim/internal/victimtest"
)

// hostileSetup is one test directory: <root>/data is cni-fake's dataDir, <root>/victim is outside
// it, with a file and a subdirectory the calls must never touch.
type hostileSetup struct {
	root, data, victim, secret string
}

func newHostileSetup(t testing.TB) *hostileSetup {
	t.Helper()
	h := &hostileSetup{root: t.TempDir()}
	h.data = filepath.Join(h.root, "data")
	h.victim = filepath.Join(h.root, "victim")
	h.secret = filepath.Join(h.victim, "leases.json")
	os.MkdirAll(filepath.Join(h.victim, "sub"), 0o755)
	os.WriteFile(h.secret, []byte(`{"leases":[]}`), 0o644) // valid lease JSON: a write would succeed
	os.WriteFile(filepath.Join(h.victim, "sub", "leases.json"), []byte("secret"), 0o644)
	return h
}

func (h *hostileSetup) victimTree(t testing.TB) string { return victimtest.Tree(t, h.victim) }

// TestHostileNamesNeverLeaveTheDataDir execs cni-fake with every name that becomes a file name
// (the network name: <dataDir>/<name>/leases.json) or reaches a lease record, a link or the log
// (CNI_CONTAINERID, CNI_IFNAME), hostile and neighbouring, and with dataDir and logFile paths.
// Hostile ones get the CNI spec's code (4 invalid environment variables, 7 invalid network
// config); the victim beside the dataDir is untouched either way; good neighbours work.
func TestHostileNamesNeverLeaveTheDataDir(t *testing.T) {
	long := func(n int) string { return strings.Repeat("n", n) }
	type tc struct {
		name                string
		containerID, ifName string
		conf                map[string]any // merged into testConf; the dataDir is the setup's
		verbs               []string
		code                uint // 0: must succeed
	}
	env := []string{"ADD", "CHECK", "DEL"}
	all := []string{"ADD", "CHECK", "DEL", "GC", "STATUS"}
	cases := []tc{
		// CNI_CONTAINERID (utils.ValidateContainerID, through skel: code 4)
		{name: "container ../", containerID: "../victim", verbs: env, code: types.ErrInvalidEnvironmentVariables},
		{name: "container absolute", containerID: "/tmp/x", verbs: env, code: types.ErrInvalidEnvironmentVariables},
		{name: "container slash", containerID: "a/b", verbs: env, code: types.ErrInvalidEnvironmentVariables},
		{name: "container dot", containerID: ".", verbs: env, code: types.ErrInvalidEnvironmentVariables},
		{name: "container dotdot", containerID: "..", verbs: env, code: types.ErrInvalidEnvironmentVariables},
		{name: "container leading dash", containerID: "-rf", verbs: env, code: types.ErrInvalidEnvironmentVariables},
		{name: "container space", containerID: "a b", verbs: env, code: types.ErrInvalidEnvironmentVariables},
		{name: "container semicolon", containerID: "a;IP=10.0.0.9", verbs: env, code: types.ErrInvalidEnvironmentVariables},
		{name: "container newline", containerID: "a\nb", verbs: env, code: types.ErrInvalidEnvironmentVariables},
		{name: "container a.b_c-d", containerID: "a.b_c-d", verbs: []string{"ADD", "DEL"}},
		{name: "container 64 hex", containerID: strings.Repeat("0123456789abcdef", 4), verbs: []string{"ADD", "DEL"}},
		{name: "container 300 bytes", containerID: long(300), verbs: []string{"ADD", "DEL"}},
		// CNI_IFNAME (utils.ValidateInterfaceName: code 4)
		{name: "ifname ../", ifName: "../x", verbs: env, code: types.ErrInvalidEnvironmentVariables},
		{name: "ifname slash", ifName: "a/b", verbs: env, code: types.ErrInvalidEnvironmentVariables},
		{name: "ifname dot", ifName: ".", verbs: env, code: types.ErrInvalidEnvironmentVariables},
		{name: "ifname dotdot", ifName: "..", verbs: env, code: types.ErrInvalidEnvironmentVariables},
		{name: "ifname colon", ifName: "eth:0", verbs: env, code: types.ErrInvalidEnvironmentVariables},
		{name: "ifname space", ifName: "eth 0", verbs: env, code: types.ErrInvalidEnvironmentVariables},
		{name: "ifname 16 bytes", ifName: long(16), verbs: env, code: types.ErrInvalidEnvironmentVariables},
		{name: "ifname 15 bytes", ifName: long(15), verbs: []string{"ADD", "DEL"}},
		{name: "ifname net1", ifName: "net1", verbs: []string{"ADD", "DEL"}},
		// the network name (utils.ValidateNetworkName, through skel, and our bound: code 7)
		{name: "network ../victim", conf: map[string]any{"name": "../victim"}, verbs: all, code: types.ErrInvalidNetworkConfig},
		{name: "network absolute", conf: map[string]any{"name": "/tmp/victim"}, verbs: all, code: types.ErrInvalidNetworkConfig},
		{name: "network slash", conf: map[string]any{"name": "a/../../victim"}, verbs: all, code: types.ErrInvalidNetworkConfig},
		{name: "network dot", conf: map[string]any{"name": "."}, verbs: all, code: types.ErrInvalidNetworkConfig},
		{name: "network dotdot", conf: map[string]any{"name": ".."}, verbs: all, code: types.ErrInvalidNetworkConfig},
		{name: "network hidden", conf: map[string]any{"name": ".hidden"}, verbs: all, code: types.ErrInvalidNetworkConfig},
		{name: "network NUL", conf: map[string]any{"name": "a\x00b"}, verbs: all, code: types.ErrInvalidNetworkConfig},
		{name: "network 256 bytes", conf: map[string]any{"name": long(256)}, verbs: all, code: types.ErrInvalidNetworkConfig},
		{name: "network 255 bytes", conf: map[string]any{"name": long(255)}, verbs: []string{"ADD", "DEL", "GC", "STATUS"}},
		{name: "network a.b_c-d", conf: map[string]any{"name": "a.b_c-d"}, verbs: []string{"ADD", "DEL", "GC", "STATUS"}},
		// dataDir and logFile must be absolute (code 7)
		{name: "dataDir relative", conf: map[string]any{"dataDir": "data"}, verbs: all, code: types.ErrInvalidNetworkConfig},
		{name: "dataDir ../", conf: map[string]any{"dataDir": "../victim"}, verbs: all, code: types.ErrInvalidNetworkConfig},
		{name: "logFile relative", conf: map[string]any{"logFile": "../victim/leases.json"}, verbs: all, code: types.ErrInvalidNetworkConfig},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h := newHostileSetup(t)
			extra := map[string]any{"dataDir": h.data}
			for k, v := range c.conf {
				extra[k] = v
			}
			conf := testConf(h.root, "1.1.0", extra)
			before := h.victimTree(t)
			for _, verb := range c.verbs {
				cl := call{cmd: verb, containerID: c.containerID, ifName: c.ifName, netns: "/var/run/netns/fake", stdin: conf}
				if cl.containerID == "" {
					cl.containerID = "c1"
				}
				if cl.ifName == "" {
					cl.ifName = "eth0"
				}
				if verb == "CHECK" && c.code == 0 {
					continue // CHECK needs a prevResult; its name checks are the same as ADD's
				}
				cl.dir = h.victim // run in the victim's directory, so a relative path would land in it
				o := run(t, cl)
				switch {
				case c.code == 0 && o.err != nil:
					t.Errorf("%s: %v, want success", verb, o.err)
				case c.code != 0 && (o.err == nil || o.err.Code != c.code):
					t.Errorf("%s: %v, want code %d", verb, o.err, c.code)
				}
			}
			if now := h.victimTree(t); now != before {
				t.Fatalf("the victim beside the dataDir changed:\nbefore:\n%s\nafter:\n%s", before, now)
			}
			if c.code != 0 {
				if _, err := os.Stat(h.data); !os.IsNotExist(err) {
					t.Errorf("a refused call created the dataDir: %v", err)
				}
			}
		})
	}
}

// TestPlantedSymlinksInDataDir: a lease file or network directory under dataDir that is a symlink
// out of it (planted by anyone who can write the dataDir) makes the call fail with an I/O error,
// and nothing outside is read back or written; a symlink that stays inside the dataDir works.
func TestPlantedSymlinksInDataDir(t *testing.T) {
	for _, tc := range []struct {
		name  string
		plant func(h *hostileSetup)
		code  uint
	}{
		{"leases.json to a file outside", func(h *hostileSetup) {
			os.MkdirAll(filepath.Join(h.data, "testnet"), 0o755)
			os.Symlink(h.secret, filepath.Join(h.data, "testnet", "leases.json"))
		}, types.ErrIOFailure},
		{"leases.json by a relative link", func(h *hostileSetup) {
			os.MkdirAll(filepath.Join(h.data, "testnet"), 0o755)
			os.Symlink("../../victim/leases.json", filepath.Join(h.data, "testnet", "leases.json"))
		}, types.ErrIOFailure},
		{"the network directory to a directory outside", func(h *hostileSetup) {
			os.MkdirAll(h.data, 0o755)
			os.Symlink(h.victim, filepath.Join(h.data, "testnet"))
		}, types.ErrIOFailure},
		{"a dangling leases.json", func(h *hostileSetup) {
			os.MkdirAll(filepath.Join(h.data, "testnet"), 0o755)
			os.Symlink(filepath.Join(h.victim, "created-by-cni-fake"), filepath.Join(h.data, "testnet", "leases.json"))
		}, types.ErrIOFailure},
		{"a fifo as leases.json", func(h *hostileSetup) {
			os.MkdirAll(filepath.Join(h.data, "testnet"), 0o755)
			if err := mkfifo(filepath.Join(h.data, "testnet", "leases.json")); err != nil {
				panic(err)
			}
		}, types.ErrIOFailure},
		{"the network directory to another one inside dataDir", func(h *hostileSetup) {
			os.MkdirAll(filepath.Join(h.data, "elsewhere"), 0o755)
			os.Symlink("elsewhere", filepath.Join(h.data, "testnet"))
		}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHostileSetup(t)
			tc.plant(h)
			before := h.victimTree(t)
			conf := testConf(h.root, "1.1.0", map[string]any{"dataDir": h.data})
			for _, verb := range []string{"ADD", "DEL", "GC", "STATUS"} {
				o := run(t, call{cmd: verb, containerID: "c1", ifName: "eth0", netns: "/var/run/netns/fake", stdin: conf})
				want := tc.code
				if verb == "STATUS" && want != 0 {
					want = types.ErrPluginNotAvailable // STATUS reports an unusable dataDir as 50
				}
				switch {
				case want == 0 && o.err != nil:
					t.Errorf("%s: %v, want success", verb, o.err)
				case want != 0 && (o.err == nil || o.err.Code != want):
					t.Errorf("%s: %v, want code %d", verb, o.err, want)
				}
			}
			if now := h.victimTree(t); now != before {
				t.Fatalf("the victim changed:\nbefore:\n%s\nafter:\n%s", before, now)
			}
		})
	}
}

func mkfifo(p string) error { return syscall.Mkfifo(p, 0o600) }
