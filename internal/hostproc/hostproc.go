// Package hostproc tells whether a pid recorded in a state file is still the process that was
// recorded: `harness down` and `harness cluster down` signal only processes they verify this way,
// never whatever now holds the pid, nor a process another state file merely names (issue 24).
//
// A process is identified by its pid, its start time (field 22 of /proc/PID/stat, clock ticks since
// boot: a pid reused after ours exited has another) and its working directory, which the harness sets
// to the state directory for every process it starts (a process another user runs cannot have its
// working directory in a directory only root may enter).
package hostproc

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// Start returns the start time of a process (field 22 of /proc/PID/stat), or an error satisfying
// errors.Is(err, os.ErrNotExist) when it is gone (a zombie counts as gone: only its parent's wait is
// left of it).
func Start(pid int) (uint64, error) {
	if pid <= 0 {
		return 0, os.ErrNotExist
	}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, err
	}
	// The command name (field 2) is in parentheses and may hold spaces: count fields after the last ')'.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, errors.New("malformed /proc stat")
	}
	f := strings.Fields(string(b[i+1:]))
	// After ')' come field 3 (state) onwards: the start time, field 22, is f[19].
	if len(f) < 20 {
		return 0, errors.New("short /proc stat")
	}
	if f[0] == "Z" {
		return 0, os.ErrNotExist
	}
	return strconv.ParseUint(f[19], 10, 64)
}

// Cwd returns a process's working directory.
func Cwd(pid int) (string, error) {
	return os.Readlink("/proc/" + strconv.Itoa(pid) + "/cwd")
}

// Self returns this process's pid and start time, for a state file.
func Self() (pid int, start uint64, err error) {
	pid = os.Getpid()
	start, err = Start(pid)
	return pid, start, err
}

// Verify returns nil when pid is running, started at start, and works in dir or below it; else an
// error saying which of these is not so. A process that is gone satisfies errors.Is(err,
// os.ErrNotExist).
func Verify(pid int, start uint64, dir string) error {
	s, err := Start(pid)
	if err != nil {
		return fmt.Errorf("pid %d: %w", pid, err)
	}
	if s != start {
		return fmt.Errorf("pid %d started at tick %d, not %d as recorded: another process has it now: %w", pid, s, start, os.ErrNotExist)
	}
	cwd, err := Cwd(pid)
	if err != nil {
		return fmt.Errorf("pid %d: its working directory: %w", pid, err)
	}
	real, err := filepath.EvalSymlinks(dir)
	if err != nil {
		real = dir
	}
	if cwd != real && !strings.HasPrefix(cwd, real+"/") {
		return fmt.Errorf("pid %d works in %s, not in %s: not a process plugsim started there", pid, cwd, real)
	}
	return nil
}
