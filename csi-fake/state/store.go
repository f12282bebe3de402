package state

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"

	"github.com/plugsim/plugsim/internal/atomicfile"
)

// FileName is the state file's name inside the state directory.
const FileName = "state.json"

// Store guards the state with a mutex and persists every successful update.
type Store struct {
	mu   sync.Mutex
	data *Data
	path string // "" keeps the state in memory only
	// last is the JSON of the last persisted state; a failed write restores memory from it, so
	// memory never runs ahead of the file.
	last []byte
}

// Open loads path, or starts empty when it does not exist. An empty path keeps the state in
// memory only.
func Open(path string) (*Store, error) {
	s := &Store{data: newData(), path: path}
	if path == "" {
		return s, nil
	}
	b, err := os.ReadFile(path)
	switch {
	case errors.Is(err, os.ErrNotExist):
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return nil, fmt.Errorf("create state directory: %w", err)
		}
		return s, nil
	case err != nil:
		return nil, fmt.Errorf("read state file: %w", err)
	}
	d, err := decode(b)
	if err != nil {
		return nil, &CorruptError{Path: path, Err: err}
	}
	s.data, s.last = d, b
	return s, nil
}

func decode(b []byte) (*Data, error) {
	if len(bytes.TrimSpace(b)) == 0 {
		return nil, errors.New("file is empty")
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	d := &Data{}
	if err := dec.Decode(d); err != nil {
		return nil, err
	}
	if d.Version != CurrentVersion {
		return nil, fmt.Errorf("version %d, this csi-fake reads version %d", d.Version, CurrentVersion)
	}
	d.init()
	if err := d.checkIDs(); err != nil {
		return nil, err
	}
	return d, nil
}

// Path returns the state file, or "" for a memory-only store.
func (s *Store) Path() string { return s.path }

// View runs fn with the state locked; fn must not keep references to it.
func (s *Store) View(fn func(d *Data)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	fn(s.data)
}

// Update runs fn with the state locked. When fn succeeds the new state is persisted; when the
// write fails, the change is undone in memory and the write error returned.
func (s *Store) Update(fn func(d *Data) error) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := fn(s.data); err != nil {
		return err
	}
	if s.path == "" {
		return nil
	}
	b, err := json.MarshalIndent(s.data, "", "  ")
	if err == nil {
		err = atomicfile.Write(s.path, b, 0o600)
	}
	if err != nil {
		s.rollback()
		return fmt.Errorf("persist state: %w", err)
	}
	s.last = b
	return nil
}

func (s *Store) rollback() {
	if s.last == nil {
		s.data = newData()
		return
	}
	if d, err := decode(s.last); err == nil {
		s.data = d
	}
}
