// Package statedir keeps the harness's state directories (`harness up`'s node, `harness cluster up`'s
// cluster) out of other local users' reach. plugsim runs as root on shared machines: a directory that
// another user made, or could change, lets that user put a program where root will execute it (a CNI
// plugin in opt/cni/bin), a symlink where root will write, or a pid and a network namespace in a state
// file that root's `down` acts on (issue 24). containerd and kubeadm keep their state in root-owned
// directories for that reason; so does plugsim by default (DefaultRoot), and it refuses any other
// directory that fails Check.
//
// Check accepts a directory when
//   - every directory on the way to it (symlinks resolved, each symlink itself owned by root or by
//     the user running plugsim) is owned by root or by that user and not writable by group or others,
//     unless it has the sticky bit (/tmp: others cannot rename or remove what they do not own);
//   - the directory itself and every entry in it is owned by root or by that user, and no directory
//     or regular file among them is writable by others, or by a group other than root's. Sockets and
//     symlinks have no writable contents (a socket's mode says who may connect), so only their owner
//     is checked. Subtrees named by skip patterns (the pods' own data: what a container writes into
//     its volumes belongs to whatever user the container runs as) are not walked; the fakes treat
//     every path there as hostile anyway.
//
// Prepare makes a missing directory 0700 (and its missing parents 0700), sets an existing one to 0700,
// and checks it. What is written inside is written without following symlinks (internal/atomicfile
// renames a new file over the old one; appends open with O_NOFOLLOW).
package statedir

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// DefaultRoot is where the harness keeps its state when run as root: DefaultRoot/node for `harness
// up`, DefaultRoot/cluster for `harness cluster up`. Under /var/lib, like containerd's and the
// kubelet's root directories, rather than /run: a cluster keeps its logs, certificates, etcd data and
// volumes after `down`, which a tmpfs would hold in memory and lose at reboot.
const DefaultRoot = "/var/lib/plugsim"

// Default returns the default directory called name: DefaultRoot/name as root; for anyone else
// $XDG_RUNTIME_DIR/plugsim/name (the user's own 0700 directory, which the login manager makes), or an
// error saying to give one when there is none.
func Default(name string) (string, error) {
	if os.Geteuid() == 0 {
		return filepath.Join(DefaultRoot, name), nil
	}
	if x := os.Getenv("XDG_RUNTIME_DIR"); x != "" && filepath.IsAbs(x) {
		return filepath.Join(x, "plugsim", name), nil
	}
	return "", fmt.Errorf("no default directory for a user other than root without $XDG_RUNTIME_DIR: give --dir (a directory of your own that nobody else can write)")
}

// maxLinks bounds the symlinks followed on the way to a directory, as the kernel's 40 (MAXSYMLINKS).
const maxLinks = 40

// Error is a refused directory: Path is the offending entry (the directory, an ancestor or an entry
// in it), with its owner and mode.
type Error struct {
	Dir    string
	Path   string
	Reason string
	UID    uint32
	Mode   fs.FileMode
}

func (e *Error) Error() string {
	where := e.Path
	if e.Path != e.Dir {
		where = e.Path + ", in the way of " + e.Dir + ","
	}
	return fmt.Sprintf("refusing state directory %s: %s is %s (owner %s, mode %s); plugsim runs as root and keeps state only where no other user can change it: use a directory only root (or you) can write, such as the default under %s",
		e.Dir, where, e.Reason, owner(e.UID), e.Mode, DefaultRoot)
}

// owner names a uid as "uid 1001 (alice)".
func owner(uid uint32) string {
	s := "uid " + strconv.FormatUint(uint64(uid), 10)
	if u, err := user.LookupId(strconv.FormatUint(uint64(uid), 10)); err == nil {
		s += " (" + u.Username + ")"
	}
	return s
}

// trusted reports whether uid may own state: root, or the user running this process.
func trusted(uid uint32) bool { return uid == 0 || int(uid) == os.Geteuid() }

func stat(fi fs.FileInfo) *syscall.Stat_t {
	st, _ := fi.Sys().(*syscall.Stat_t)
	return st
}

// othersMayWrite reports whether someone besides the owner (and root's group) may change the entry.
func othersMayWrite(fi fs.FileInfo) bool {
	m := fi.Mode().Perm()
	if m&0o002 != 0 {
		return true
	}
	st := stat(fi)
	return m&0o020 != 0 && (st == nil || st.Gid != 0)
}

func refuse(dir, path string, fi fs.FileInfo, reason string) *Error {
	e := &Error{Dir: dir, Path: path, Reason: reason, Mode: fi.Mode()}
	if st := stat(fi); st != nil {
		e.UID = st.Uid
	}
	return e
}

// checkEntry checks one entry's owner and, for directories and regular files, its mode.
func checkEntry(dir, path string, fi fs.FileInfo) error {
	st := stat(fi)
	if st == nil {
		return fmt.Errorf("refusing state directory %s: cannot read the owner of %s", dir, path)
	}
	if !trusted(st.Uid) {
		return refuse(dir, path, fi, "owned by another user")
	}
	if (fi.IsDir() || fi.Mode().IsRegular()) && othersMayWrite(fi) {
		return refuse(dir, path, fi, "writable by other users")
	}
	return nil
}

// resolve walks an absolute path from /, component by component, checking each directory on the way
// and each symlink met, and returns the path with the symlinks resolved. A missing component ends
// the walk: the rest is returned as it is, with exists false.
func resolve(dir string) (real string, exists bool, err error) {
	cur := "/"
	rest := strings.Split(strings.TrimPrefix(filepath.Clean(dir), "/"), "/")
	links := 0
	for len(rest) > 0 {
		name := rest[0]
		rest = rest[1:]
		switch name {
		case "", ".":
			continue
		case "..":
			cur = filepath.Dir(cur)
			continue
		}
		// The directory we are in must not let others swap this entry.
		pfi, err := os.Lstat(cur)
		if err != nil {
			return "", false, err
		}
		if st := stat(pfi); st != nil && !trusted(st.Uid) {
			return "", false, refuse(dir, cur, pfi, "owned by another user")
		}
		if othersMayWrite(pfi) && pfi.Mode()&fs.ModeSticky == 0 {
			return "", false, refuse(dir, cur, pfi, "writable by other users (and not sticky)")
		}
		next := filepath.Join(cur, name)
		fi, err := os.Lstat(next)
		if errors.Is(err, fs.ErrNotExist) {
			return filepath.Join(append([]string{next}, rest...)...), false, nil
		}
		if err != nil {
			return "", false, err
		}
		if fi.Mode()&fs.ModeSymlink != 0 {
			if st := stat(fi); st == nil || !trusted(st.Uid) {
				return "", false, refuse(dir, next, fi, "a symlink owned by another user")
			}
			if links++; links > maxLinks {
				return "", false, fmt.Errorf("refusing state directory %s: more than %d symlinks on the way", dir, maxLinks)
			}
			target, err := os.Readlink(next)
			if err != nil {
				return "", false, err
			}
			if filepath.IsAbs(target) {
				cur = "/"
			}
			rest = append(strings.Split(strings.TrimPrefix(filepath.Clean(target), "/"), "/"), rest...)
			continue
		}
		if !fi.IsDir() {
			return "", false, fmt.Errorf("refusing state directory %s: %s is not a directory", dir, next)
		}
		cur = next
	}
	return cur, true, nil
}

// Check verifies dir (see the package comment); skip holds patterns (filepath.Match, relative to dir)
// of subtrees that are not walked. A missing dir is an error satisfying errors.Is(err,
// fs.ErrNotExist).
func Check(dir string, skip ...string) error {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return err
	}
	real, exists, err := resolve(abs)
	if err != nil {
		return err
	}
	if !exists {
		return fmt.Errorf("state directory %s: %w", abs, fs.ErrNotExist)
	}
	return filepath.WalkDir(real, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) && p != real {
				return nil // gone while we walked (a fake removing a sandbox's files)
			}
			return err
		}
		fi, err := d.Info()
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if err != nil {
			return err
		}
		if err := checkEntry(abs, p, fi); err != nil {
			return err
		}
		if p == real {
			return nil
		}
		rel, _ := filepath.Rel(real, p)
		for _, pat := range skip {
			if ok, _ := filepath.Match(pat, rel); ok && d.IsDir() {
				return filepath.SkipDir
			}
		}
		return nil
	})
}

// Prepare makes dir when it is missing (0700, with missing parents 0700), makes it 0700 when it is
// there, and checks it (Check, with skip).
func Prepare(dir string, skip ...string) error {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return err
	}
	// The way to it is checked before anything is made, so nothing is made in another user's
	// directory.
	if _, _, err := resolve(abs); err != nil {
		return err
	}
	if err := os.MkdirAll(abs, 0o700); err != nil {
		return err
	}
	if err := Check(abs, skip...); err != nil {
		return err
	}
	return os.Chmod(abs, 0o700)
}
