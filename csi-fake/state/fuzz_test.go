package state

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// FuzzOpen: the state file (csi-fake --state-dir's state.json), torn or edited, opens or is
// refused with a *CorruptError naming it, never a panic; an opened state answers every query, and
// what it saves opens again to the same volumes.
func FuzzOpen(f *testing.F) {
	f.Add([]byte(`{"version":1,"nextSeq":3,"volumes":{"vol-1":{"id":"vol-1","name":"pvc-1","seq":1,"capacityBytes":1073741824,"accessType":"mount","published":{"node-1":{"accessMode":"SINGLE_NODE_WRITER"}}}},"snapshots":{"snap-1":{"id":"snap-1","sourceVolumeId":"vol-1","seq":2}},"node":{"vol-1":{"volumeId":"vol-1","stagingPath":"/s","targets":{"/t":{"accessType":"mount"}}}}}`))
	f.Add([]byte(`{"version":1,"volumes":{"../x":{"id":"../x"}}}`))
	f.Add([]byte(`{"version":1,"volumes":{"a":{"id":"b","capacityBytes":9223372036854775807},"c":{"id":"c","capacityBytes":9223372036854775807}}}`))
	f.Add([]byte(`{"version":1,"volumes":{"a":null},"node":{"a":null},"snapshots":{"s":null},"groupSnapshots":{"g":null}}`))
	f.Add([]byte(`{"version":2}`))
	f.Fuzz(func(t *testing.T, file []byte) {
		path := filepath.Join(t.TempDir(), FileName)
		if err := os.WriteFile(path, file, 0o600); err != nil {
			t.Fatal(err)
		}
		s, err := Open(path)
		if err != nil {
			var ce *CorruptError
			if !errors.As(err, &ce) || ce.Path != path {
				t.Fatalf("error %v (%T) is not a CorruptError naming the file", err, err)
			}
			return
		}
		var n int
		s.View(func(d *Data) {
			_ = d.Seq()
			if d.UsedBytes() < 0 {
				t.Fatalf("used bytes %d", d.UsedBytes())
			}
			for _, v := range d.SortedVolumes() {
				_ = d.VolumeByName(v.Name)
				_ = d.UsedBytesExcept(v.ID)
			}
			for _, sn := range d.SortedSnapshots() {
				_ = d.SnapshotByName(sn.Name)
			}
			for node := range d.Node {
				_ = d.PublishedOn(node)
			}
			n = len(d.Volumes)
		})
		if err := s.Update(func(*Data) error { return nil }); err != nil {
			t.Fatalf("saving an opened state: %v", err)
		}
		again, err := Open(path)
		if err != nil {
			t.Fatalf("the saved state does not open: %v", err)
		}
		again.View(func(d *Data) {
			if len(d.Volumes) != n {
				t.Fatalf("%d volumes saved, %d opened", n, len(d.Volumes))
			}
		})
	})
}
