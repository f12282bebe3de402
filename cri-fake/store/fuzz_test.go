package store

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// FuzzLoad: a state directory's records (what cri-fake --state-dir reads at start: one file per
// sandbox and container, and images.json), torn by a crash or edited by hand, load or are refused
// with an error that names the file at fault; never a panic.
func FuzzLoad(f *testing.F) {
	f.Add([]byte(`{"id":"s1","name":"p_ns_u_0","config":{"metadata":{"name":"p","namespace":"ns","uid":"u"}},"createdAt":1,"state":"SANDBOX_READY","ips":["10.0.0.2"],"resources":{"cpuShares":"2"}}`),
		[]byte(`{"id":"c1","name":"c_p_ns_u_0","sandboxId":"s1","config":{"metadata":{"name":"c"}},"imageId":"sha256:1","state":"CONTAINER_EXITED","exitCode":3,"stopSignal":"SIGKILL"}`),
		[]byte(`[{"id":"sha256:1","repoTags":["r:1"],"config":{"repositories":["r"]}}]`))
	f.Add([]byte(`{"id":"s1","config":{"metadata":`), []byte(`{"state":"NOPE","config":null}`), []byte(`{}`))
	f.Add([]byte(`{"config":{"unknownField":1}}`), []byte(`{"resources":{"memoryLimitInBytes":"x"}}`), []byte(``))
	f.Fuzz(func(t *testing.T, sandbox, container, images []byte) {
		dir := t.TempDir()
		files := map[string][]byte{filepath.Join(dir, "sandboxes", "s1.json"): sandbox,
			filepath.Join(dir, "containers", "c1.json"): container, filepath.Join(dir, "images.json"): images}
		for p, b := range files {
			os.MkdirAll(filepath.Dir(p), 0o700)
			if err := os.WriteFile(p, b, 0o600); err != nil {
				t.Fatal(err)
			}
		}
		l, err := FileState{Dir: dir}.Load()
		if err != nil {
			named := false
			for p := range files {
				named = named || strings.Contains(err.Error(), p)
			}
			if !named && !errors.Is(err, os.ErrNotExist) {
				t.Fatalf("error %v names none of the files", err)
			}
			return
		}
		for _, sb := range l.Sandboxes {
			_ = sb.Status()
			_ = sb.IsHostNetwork()
			_ = SandboxName(sb.Config.GetMetadata())
		}
		for _, c := range l.Containers {
			_ = c.Status()
		}
	})
}
