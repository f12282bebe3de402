package oci

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/plugsim/plugsim/internal/cgrouptree"
	"github.com/plugsim/plugsim/internal/mountinfo"
)

// cgroupsFile, in the state directory, lists the parent cgroup's directories (one per hierarchy),
// so that Cleanup finds them whichever cgroup it runs in.
const cgroupsFile = "cgroups.json"

func (l *Launcher) writeCgroups() error {
	data, err := json.Marshal(l.cg.Dirs())
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(l.opts.StateDir, cgroupsFile), data, 0o600)
}

// Cleanup removes everything program containers of a cri-fake with this state directory left,
// whether it closed or was killed: every runc container under its runc root (force-deleted: its
// processes killed, its cgroup removed), every bundle, and the parent cgroup, killing what is
// still in a cgroup below it (a container whose runc state was lost mid-create). `harness cluster
// down` runs it for every node; it is for a cri-fake that no longer runs.
func Cleanup(ctx context.Context, stateDir, runcBinary string) error {
	return CleanupIn(ctx, stateDir, runcBinary, "/")
}

// CleanupIn is Cleanup for a cri-fake that ran in a cgroup namespace whose root is the cgroup
// viewRoot of this machine's hierarchies (a node of `harness cluster`): the cgroups it recorded are
// found below viewRoot. runc's own state names them as cri-fake saw them; runc removes the ones it
// finds and the parent's removal here takes the rest.
func CleanupIn(ctx context.Context, stateDir, runcBinary, viewRoot string) error {
	var errs []error
	if _, err := os.Stat(stateDir); errors.Is(err, os.ErrNotExist) {
		return nil
	}
	r := &Runc{Binary: runcBinary, Root: filepath.Join(stateDir, "runc")}
	if ents, err := os.ReadDir(r.Root); err == nil && len(ents) > 0 {
		if _, err := os.Stat(runcBinary); err != nil {
			errs = append(errs, fmt.Errorf("runc containers left in %s and no runc to delete them: %w", r.Root, err))
		}
		for _, e := range ents {
			if err := r.Delete(ctx, e.Name(), true); err != nil && !NotFound(err) {
				errs = append(errs, fmt.Errorf("delete runc container %s: %w", e.Name(), err))
			}
		}
	}
	if err := os.RemoveAll(filepath.Join(stateDir, "bundles")); err != nil {
		errs = append(errs, err)
	}
	dirs, err := CgroupDirs(stateDir, viewRoot)
	if err != nil {
		errs = append(errs, err)
	}
	for _, d := range dirs {
		if !strings.HasPrefix(d, cgroupRoot+"/") {
			errs = append(errs, fmt.Errorf("%s names %q, not a cgroup directory: left alone", cgroupsFile, d))
			continue
		}
		if err := cgrouptree.Remove(d); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// CgroupDirs are the directories of the parent cgroup of the program containers of the cri-fake with
// this state directory, one per hierarchy, on this machine: as that cri-fake recorded them, or, when it
// ran in a cgroup namespace rooted at viewRoot (not "/"), the same cgroups below viewRoot.
func CgroupDirs(stateDir, viewRoot string) ([]string, error) {
	var dirs []string
	data, err := os.ReadFile(filepath.Join(stateDir, cgroupsFile))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err == nil {
		err = json.Unmarshal(data, &dirs)
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", cgroupsFile, err)
	}
	viewRoot = path.Clean("/" + viewRoot)
	if viewRoot == "/" {
		return dirs, nil
	}
	mounts, err := mountinfo.Read()
	if err != nil {
		return nil, err
	}
	out := dirs[:0]
	for _, d := range dirs {
		// The hierarchy is the cgroup mount the directory is below (the longest such mount point).
		mp := ""
		for _, m := range mounts {
			if (m.FSType == "cgroup" || m.FSType == "cgroup2") && len(m.MountPoint) > len(mp) && strings.HasPrefix(d, m.MountPoint+"/") {
				mp = m.MountPoint
			}
		}
		if mp == "" {
			return nil, fmt.Errorf("%s names %q, below no cgroup hierarchy mounted here", cgroupsFile, d)
		}
		out = append(out, filepath.Join(mp, viewRoot, strings.TrimPrefix(d, mp)))
	}
	return out, nil
}
