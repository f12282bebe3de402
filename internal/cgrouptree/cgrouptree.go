// Package cgrouptree kills what runs in a cgroup tree and removes the tree: what cri-fake's runc
// cleanup and `harness cluster down` both do to the cgroups they made.
package cgrouptree

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// removeFor bounds how long Remove waits for a cgroup's killed processes to leave it (they leave as
// they exit).
const removeFor = 10 * time.Second

// dirs lists dir and every cgroup directory below it, parents before children.
func dirs(dir string) []string {
	var out []string
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			out = append(out, p)
		}
		return nil
	})
	return out
}

// killIn sends SIGKILL to every process in the one cgroup d (its cgroup.procs), and returns how many.
func killIn(d string) int {
	n := 0
	procs, _ := os.ReadFile(filepath.Join(d, "cgroup.procs"))
	for _, f := range strings.Fields(string(procs)) {
		if pid, err := strconv.Atoi(f); err == nil && pid > 0 && unix.Kill(pid, unix.SIGKILL) == nil {
			n++
		}
	}
	return n
}

// Kill sends SIGKILL to every process in cgroup dir and below it, and returns how many it signalled.
func Kill(dir string) int {
	n := 0
	for _, d := range dirs(dir) {
		n += killIn(d)
	}
	return n
}

// Remove kills every process in cgroup dir and below it and removes the cgroups, deepest first: a cgroup
// directory goes with rmdir (its files are the kernel's) once it has no children and no processes, so
// a removal the kernel refuses as busy is retried, for up to 10 s, killing again what is in it.
func Remove(dir string) error {
	tree := dirs(dir)
	var errs []error
	for i := len(tree) - 1; i >= 0; i-- {
		d := tree[i]
		for deadline := time.Now().Add(removeFor); ; {
			killIn(d)
			err := os.Remove(d)
			if err == nil || errors.Is(err, fs.ErrNotExist) {
				break
			}
			if !errors.Is(err, unix.EBUSY) || time.Now().After(deadline) {
				errs = append(errs, fmt.Errorf("remove cgroup %s: %w", d, err))
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	return errors.Join(errs...)
}
