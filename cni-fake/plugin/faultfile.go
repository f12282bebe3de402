package plugin

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"syscall"

	"github.com/plugsim/plugsim/harness/faults/rules"
	"github.com/plugsim/plugsim/internal/atomicfile"
)

// FaultFile is a faultsFile that a test (or the harness) changes while cni-fake serves, with the
// counts cni-fake keeps for its rules: the Go side of cni-fake's fault rules, as faults.Set is
// for cri-fake and csi-fake. The conflist must name Path as its faultsFile, and DataDir and
// Network must be the entry's dataDir and the list's name, where cni-fake keeps the counts.
type FaultFile struct {
	Path    string
	DataDir string
	Network string
}

// Add validates rules as cni-fake will apply them and appends them to the file, giving each rule
// without an ID one ("cni-N"); it returns the IDs. The next CNI call sees them.
func (f FaultFile) Add(rs ...rules.Rule) ([]string, error) {
	var ids []string
	err := f.update(func(file *rules.File) error {
		set := newFaultSet(nil)
		taken := map[string]bool{}
		for _, r := range file.Rules {
			taken[r.ID] = true
		}
		for i, r := range rs {
			if err := validateFaultRule(set, r, fmt.Sprintf("rule %d", i)); err != nil {
				return err
			}
			if r.ID == "" {
				for n := len(file.Rules) + 1; r.ID == "" || taken[r.ID]; n++ {
					r.ID = "cni-" + strconv.Itoa(n)
				}
			} else if taken[r.ID] {
				return fmt.Errorf("fault rule %q already exists", r.ID)
			}
			taken[r.ID] = true
			r.Matched, r.Hits = 0, 0
			file.Rules = append(file.Rules, r)
			ids = append(ids, r.ID)
		}
		// The whole file as the next call will load it: a set too big (rules.MaxRules,
		// rules.MaxMatchBytes) is refused now, not at every CNI call that reads it.
		if _, err := newFaultSet(nil).Add(file.Rules...); err != nil {
			return configError("%s: %v", f.Path, err)
		}
		return nil
	})
	return ids, err
}

// Reset removes every rule of the file (and so their counts, at the next call).
func (f FaultFile) Reset() error {
	return f.update(func(file *rules.File) error { file.Rules = nil; return nil })
}

// Rules returns the file's rules with the counts cni-fake has kept for them (Matched, Hits).
func (f FaultFile) Rules() ([]rules.Rule, error) {
	file, err := f.read()
	if err != nil {
		return nil, err
	}
	state := filepath.Join(f.DataDir, f.Network, faultStateFile)
	st := &faultState{}
	if sf, err := os.Open(state); err == nil {
		// Under the lock cni-fake holds while it counts, so a count is never read half-written.
		syscall.Flock(int(sf.Fd()), syscall.LOCK_SH)
		st, err = readFaultState(sf, state)
		sf.Close()
		if err != nil {
			return nil, err
		}
	} else if !errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	for i := range file.Rules {
		c := st.Rules[faultKey(file.Rules[i])]
		file.Rules[i].Matched, file.Rules[i].Hits = c.Matched, c.Hits
	}
	return file.Rules, nil
}

func (f FaultFile) read() (rules.File, error) {
	b, err := os.ReadFile(f.Path)
	if errors.Is(err, fs.ErrNotExist) {
		return rules.File{}, nil
	}
	if err != nil {
		return rules.File{}, err
	}
	return rules.ParseJSON(b, f.Path)
}

// update rewrites the file under a lock of its own (Path + ".lock"), by renaming a complete new
// file over it, so that cni-fake never reads half a file.
func (f FaultFile) update(change func(*rules.File) error) error {
	lock, err := os.OpenFile(f.Path+".lock", os.O_RDWR|os.O_CREATE|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, 0o600)
	if err != nil {
		return err
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		return err
	}
	file, err := f.read()
	if err != nil {
		return err
	}
	if err := change(&file); err != nil {
		return err
	}
	if file.Rules == nil {
		file.Rules = []rules.Rule{}
	}
	b, err := json.MarshalIndent(file, "", "  ")
	if err != nil {
		return err
	}
	if len(b)+1 > maxFaultsFile {
		// cni-fake refuses a larger file at every call: every CNI ADD would fail until it shrank.
		return configError("%s: the rules would take %d bytes, more than the %d cni-fake reads: remove some, or clear them", f.Path, len(b)+1, maxFaultsFile)
	}
	return atomicfile.Write(f.Path, append(b, '\n'), 0o600)
}
