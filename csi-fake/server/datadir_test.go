package server

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
)

// TestDataDir checks where Options.DataDir (--data-dir) puts a volume's data: there, with
// state.json in StateDir (or in memory), and nothing of it in StateDir; and that Close leaves a
// given data directory in place (it may be another process's too).
func TestDataDir(t *testing.T) {
	block := &csi.VolumeCapability{
		AccessMode: &csi.VolumeCapability_AccessMode{Mode: csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER},
		AccessType: &csi.VolumeCapability_Block{Block: &csi.VolumeCapability_BlockVolume{}},
	}
	for _, withState := range []bool{true, false} {
		name := "state in memory"
		if withState {
			name = "state dir apart"
		}
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			stateDir, dataDir := "", filepath.Join(dir, "data")
			if withState {
				stateDir = filepath.Join(dir, "state")
			}
			s, err := Start(Options{Endpoint: "unix://" + filepath.Join(dir, "csi.sock"), NodeID: "node-1", StateDir: stateDir, DataDir: dataDir})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { s.Close() })
			// A block volume's sparse file is made at CreateVolume.
			v, err := csi.NewControllerClient(dial(t, s.Endpoint())).CreateVolume(tctx(t), &csi.CreateVolumeRequest{Name: "v", VolumeCapabilities: []*csi.VolumeCapability{block}})
			if err != nil {
				t.Fatal(err)
			}
			data := filepath.Join(dataDir, "volumes", v.GetVolume().GetVolumeId())
			if fi, err := os.Stat(data); err != nil || !fi.Mode().IsRegular() {
				t.Fatalf("the block volume's data %s: %v, want a file there", data, err)
			}
			if withState {
				if _, err := os.Stat(filepath.Join(stateDir, "state.json")); err != nil {
					t.Errorf("no state.json in the state dir: %v", err)
				}
				if _, err := os.Stat(filepath.Join(stateDir, "volumes")); !os.IsNotExist(err) {
					t.Errorf("the state dir has a volumes/ directory (%v); the data belongs in --data-dir", err)
				}
			}
			if _, err := os.Stat(filepath.Join(dataDir, "state.json")); !os.IsNotExist(err) {
				t.Errorf("state.json in the data dir (%v); it belongs in --state-dir", err)
			}
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			if _, err := os.Stat(data); err != nil {
				t.Errorf("Close removed the given data directory's volume: %v", err)
			}
		})
	}
}
