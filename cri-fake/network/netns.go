package network

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// NetNS modes.
const (
	// NetNSPlaceholder creates an empty file as the namespace path; plugins that only record what
	// they were given (cni-fake in fake mode) accept it, real ones do not.
	NetNSPlaceholder = "placeholder"
	// NetNSReal creates a real network namespace bind-mounted at the path (root only).
	NetNSReal = "real"
)

// NetNSManager creates and removes the sandboxes' network namespace paths under Dir.
type NetNSManager struct {
	Dir  string
	Mode string
}

// Create makes the namespace for a sandbox and returns its path.
func (m NetNSManager) Create(id string) (string, error) {
	if err := os.MkdirAll(m.Dir, 0o755); err != nil {
		return "", fmt.Errorf("create netns directory: %w", err)
	}
	p := filepath.Join(m.Dir, "cni-"+id[:min(len(id), 32)])
	switch m.Mode {
	case NetNSReal:
		if err := createRealNetNS(p); err != nil {
			return "", fmt.Errorf("create network namespace %s: %w", p, err)
		}
	case NetNSPlaceholder, "":
		if err := os.WriteFile(p, nil, 0o644); err != nil {
			return "", fmt.Errorf("create placeholder netns %s: %w", p, err)
		}
	default:
		return "", fmt.Errorf("netns mode %q: want %q or %q", m.Mode, NetNSPlaceholder, NetNSReal)
	}
	return p, nil
}

// Remove deletes a namespace path; a missing one is fine (StopPodSandbox is idempotent).
func (m NetNSManager) Remove(p string) error {
	if p == "" {
		return nil
	}
	if m.Mode == NetNSReal {
		if err := removeRealNetNS(p); err != nil {
			return err
		}
	}
	if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("remove netns %s: %w", p, err)
	}
	return nil
}
