package state

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"
)

func addVolume(s *Store, id string) error {
	return s.Update(func(d *Data) error {
		d.Volumes[id] = &Volume{ID: id, Name: "name-" + id, Seq: d.Seq(), CapacityBytes: 1 << 30, AccessType: AccessMount,
			Created: time.Unix(1700000000, 0).UTC(), Published: map[string]Attachment{"node-1": {AccessMode: "SINGLE_NODE_WRITER"}}}
		d.Node[id] = &NodeVolume{VolumeID: id, StagingPath: "/staging", Targets: map[string]Target{"/pods/t": {AccessType: AccessMount}}}
		return nil
	})
}

func TestPersistAndReopen(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sub", FileName)
	s, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := addVolume(s, "vol-1"); err != nil {
		t.Fatal(err)
	}
	if err := s.Update(func(d *Data) error {
		d.Snapshots["snap-1"] = &Snapshot{ID: "snap-1", SourceVolumeID: "vol-1", Seq: d.Seq()}
		d.GroupSnapshots["g-1"] = &GroupSnapshot{ID: "g-1", SnapshotIDs: []string{"snap-1"}}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	r, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	r.View(func(d *Data) {
		v := d.Volumes["vol-1"]
		if v == nil || v.Published["node-1"].AccessMode != "SINGLE_NODE_WRITER" || d.NextSeq != 2 {
			t.Errorf("volume after reopen: %+v (nextSeq %d)", v, d.NextSeq)
		}
		if d.Node["vol-1"].Targets["/pods/t"].AccessType != AccessMount || d.Snapshots["snap-1"] == nil || d.GroupSnapshots["g-1"] == nil {
			t.Errorf("node records or snapshots lost: %+v", d)
		}
	})
	entries, _ := os.ReadDir(filepath.Dir(path))
	if len(entries) != 1 {
		t.Errorf("temporary files left next to the state file: %v", entries)
	}
}

func TestCorruptFileIsReportedNotReplaced(t *testing.T) {
	for name, content := range map[string]string{
		"garbage":       "{not json",
		"empty":         "",
		"unknown field": `{"version":1,"volumez":{}}`,
		"wrong version": `{"version":99}`,
	} {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), FileName)
			os.WriteFile(path, []byte(content), 0o600)
			_, err := Open(path)
			var ce *CorruptError
			if !errors.As(err, &ce) || ce.Path != path {
				t.Fatalf("Open = %v, want a CorruptError naming %s", err, path)
			}
			if got, _ := os.ReadFile(path); string(got) != content {
				t.Fatalf("the corrupt file was changed to %q", got)
			}
		})
	}
}

// TestFailedWriteRollsBack: when the state cannot be written, the update is undone in memory so
// memory never claims what the file does not hold.
func TestFailedWriteRollsBack(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "state", FileName)
	s, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := addVolume(s, "vol-1"); err != nil {
		t.Fatal(err)
	}
	os.RemoveAll(filepath.Dir(path)) // the directory is gone: the next write fails
	if err := addVolume(s, "vol-2"); err == nil {
		t.Fatal("update succeeded without a state directory")
	}
	s.View(func(d *Data) {
		if d.Volumes["vol-2"] != nil || d.Volumes["vol-1"] == nil {
			t.Errorf("after a failed write memory holds %v", d.Volumes)
		}
	})
}

func TestMemoryOnly(t *testing.T) {
	s, err := Open("")
	if err != nil {
		t.Fatal(err)
	}
	if err := addVolume(s, "v"); err != nil {
		t.Fatal(err)
	}
	if s.Path() != "" {
		t.Errorf("path %q", s.Path())
	}
}
