package applets

import (
	"bufio"
	"context"
	"crypto/md5"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"
	"strconv"
	"strings"
	"syscall"

	"github.com/plugsim/plugsim/cri-fake/process/kernel"
	"github.com/plugsim/plugsim/cri-fake/process/libbb"
	"github.com/plugsim/plugsim/cri-fake/process/vfs"
)

func open(p *kernel.Proc, name string) (io.ReadCloser, error) {
	if name == "-" || name == "/dev/stdin" {
		return io.NopCloser(p.Stdin), nil
	}
	return p.FS().Open(p.Abs(name))
}

func appletCat(p *kernel.Proc) int {
	_, files, err := libbb.Flags(p.Args[1:], "")
	if err != nil {
		return libbb.Usage(p, err)
	}
	broken, failed := false, false
	st := eachInput(p, files, func(_ int, _ string, r io.Reader) bool {
		_, err := libbb.Copy(p, p.Stdout, r)
		var errno syscall.Errno
		if errors.Is(err, syscall.EPIPE) {
			broken = true
			return false
		} else if errors.As(err, &errno) && p.Ctx().Err() == nil {
			// busybox: "cat: write error: No space left on device" (a full
			// file system), "cat: read error: Is a directory"; exit 1.
			what := "write"
			if pe := (*fs.PathError)(nil); errors.As(err, &pe) && pe.Op == "read" {
				what = "read"
			}
			p.Errorf("%s error: %s", what, vfs.Strerror(err))
			failed = true // and on to the next file, as busybox does
		}
		return true
	})
	if broken || failed {
		return 1
	}
	return st
}

// eachInput opens each operand in turn (none, or "-", is stdin), hands it to fn and closes it, the
// way busybox's text applets walk their files: one that cannot be opened is reported as
// "can't open 'f': reason" and makes the status 1, and the others are still read. fn returns false
// to stop early (a broken pipe).
func eachInput(p *kernel.Proc, files []string, fn func(i int, name string, r io.Reader) bool) int {
	if len(files) == 0 {
		files = []string{"-"}
	}
	st := 0
	for i, f := range files {
		r, err := open(p, f)
		if err != nil {
			p.Errorf("can't open '%s': %s", f, vfs.Strerror(err))
			st = 1
			continue
		}
		more := fn(i, f, r)
		r.Close()
		if !more {
			break
		}
	}
	return st
}

func userName(p *kernel.Proc, uid int) string {
	data, _ := p.FS().ReadFile("/etc/passwd")
	for _, line := range strings.Split(string(data), "\n") {
		f := strings.Split(line, ":")
		if len(f) > 2 && f[2] == strconv.Itoa(uid) {
			return f[0]
		}
	}
	return ""
}

func groupName(p *kernel.Proc, gid int) string {
	data, _ := p.FS().ReadFile("/etc/group")
	for _, line := range strings.Split(string(data), "\n") {
		f := strings.Split(line, ":")
		if len(f) > 2 && f[2] == strconv.Itoa(gid) {
			return f[0]
		}
	}
	return ""
}

func ownerOf(st fs.FileInfo) (int, int) {
	switch s := st.Sys().(type) {
	case *vfs.Owner:
		return s.UID, s.GID
	case *syscall.Stat_t:
		return int(s.Uid), int(s.Gid)
	}
	return 0, 0
}

func lsLong(p *kernel.Proc, st fs.FileInfo, name string) string {
	uid, gid := ownerOf(st)
	u, g := userName(p, uid), groupName(p, gid)
	if u == "" {
		u = strconv.Itoa(uid)
	}
	if g == "" {
		g = strconv.Itoa(gid)
	}
	nlink := 1
	if st.IsDir() {
		nlink = 2
	}
	size := st.Size()
	if st.IsDir() && size == 0 {
		size = 4096
	}
	mode := lsMode(st.Mode())
	line := fmt.Sprintf("%s %4d %-8s %-8s %9d %s %s", mode, nlink, u, g, size, st.ModTime().Format("Jan _2 15:04"), name)
	return line
}

func lsMode(m fs.FileMode) string {
	b := []byte("----------")
	switch {
	case m.IsDir():
		b[0] = 'd'
	case m&fs.ModeSymlink != 0:
		b[0] = 'l'
	case m&fs.ModeCharDevice != 0:
		b[0] = 'c'
	case m&fs.ModeDevice != 0:
		b[0] = 'b'
	case m&fs.ModeNamedPipe != 0:
		b[0] = 'p'
	}
	const rwx = "rwxrwxrwx"
	for i := 0; i < 9; i++ {
		if m&(1<<uint(8-i)) != 0 {
			b[i+1] = rwx[i]
		}
	}
	special := func(i int, bit fs.FileMode, set, setNoExec byte) {
		switch {
		case m&bit == 0:
		case b[i] == 'x':
			b[i] = set
		default:
			b[i] = setNoExec
		}
	}
	special(3, fs.ModeSetuid, 's', 'S')
	special(6, fs.ModeSetgid, 's', 'S')
	special(9, fs.ModeSticky, 't', 'T')
	return string(b)
}

func appletLs(p *kernel.Proc) int {
	opts, names, err := libbb.Flags(p.Args[1:], "")
	if err != nil {
		return libbb.Usage(p, err)
	}
	if len(names) == 0 {
		names = []string{"."}
	}
	all, almost, long, dirOnly, recursive := opts['a'] != "", opts['A'] != "", opts['l'] != "", opts['d'] != "", opts['R'] != ""
	st := 0
	var files []string
	var dirs []string
	for _, n := range names {
		info, err := p.FS().Stat(p.Abs(n))
		if err != nil {
			if _, lerr := p.FS().Lstat(p.Abs(n)); lerr == nil {
				files = append(files, n)
				continue
			}
			p.Errorf("%s: %s", n, vfs.Strerror(err))
			st = 1
			continue
		}
		if info.IsDir() && !dirOnly {
			dirs = append(dirs, n)
		} else {
			files = append(files, n)
		}
	}
	w := bufio.NewWriter(p.Stdout)
	defer w.Flush()
	for _, f := range files {
		if long {
			info, err := p.FS().Lstat(p.Abs(f))
			if err == nil {
				fmt.Fprintln(w, lsLong(p, info, f))
				continue
			}
		}
		fmt.Fprintln(w, f)
	}
	headers := len(dirs)+len(files) > 1 || recursive
	var listDir func(d string, first bool)
	listDir = func(d string, first bool) {
		ents, err := p.FS().ReadDir(p.Abs(d))
		if err != nil {
			p.Errorf("%s: %s", d, vfs.Strerror(err))
			st = 1
			return
		}
		if headers {
			if !first || len(files) > 0 {
				fmt.Fprintln(w)
			}
			fmt.Fprintf(w, "%s:\n", d)
		}
		if long {
			fmt.Fprintf(w, "total %d\n", len(ents)*4)
		}
		var names []string
		if all {
			names = append(names, ".", "..")
		}
		var sub []string
		for _, e := range ents {
			if strings.HasPrefix(e.Name(), ".") && !all && !almost {
				continue
			}
			names = append(names, e.Name())
			if e.IsDir() {
				sub = append(sub, path.Join(d, e.Name()))
			}
		}
		for _, n := range names {
			if long {
				info, err := p.FS().Lstat(p.Abs(path.Join(d, n)))
				if err == nil {
					line := lsLong(p, info, n)
					if info.Mode()&fs.ModeSymlink != 0 {
						if t, err := p.FS().Readlink(p.Abs(path.Join(d, n))); err == nil {
							line += " -> " + t
						}
					}
					fmt.Fprintln(w, line)
					continue
				}
			}
			fmt.Fprintln(w, n)
		}
		if recursive {
			for _, s := range sub {
				listDir(s, false)
			}
		}
	}
	for i, d := range dirs {
		listDir(d, i == 0)
	}
	return st
}

// modeOption is the octal -m MODE of mkdir and mknod (def when not given);
// false after it printed that MODE is invalid.
func modeOption(p *kernel.Proc, opts map[byte]string, def fs.FileMode) (fs.FileMode, bool) {
	m, ok := opts['m']
	if !ok {
		return def, true
	}
	v, err := strconv.ParseUint(m, 8, 32)
	if err != nil {
		p.Errorf("invalid mode '%s'", m)
		return 0, false
	}
	return fs.FileMode(v), true
}

func appletMkdir(p *kernel.Proc) int {
	opts, names, err := libbb.Flags(p.Args[1:], "m")
	if err != nil {
		return libbb.Usage(p, err)
	}
	perm, ok := modeOption(p, opts, 0o755)
	if !ok {
		return 1
	}
	st := 0
	for _, n := range names {
		var err error
		if opts['p'] != "" {
			err = p.MkdirAll(p.Abs(n), perm)
		} else {
			err = p.Mkdir(p.Abs(n), perm)
		}
		if err != nil {
			p.Errorf("can't create directory '%s': %s", n, vfs.Strerror(err))
			st = 1
		}
	}
	return st
}

func appletTouch(p *kernel.Proc) int {
	opts, names, err := libbb.Flags(p.Args[1:], "dtr")
	if err != nil {
		return libbb.Usage(p, err)
	}
	st := 0
	for _, n := range names {
		if opts['c'] != "" {
			if _, err := p.FS().Stat(p.Abs(n)); err != nil {
				continue
			}
		}
		if err := p.Touch(p.Abs(n)); err != nil {
			// busybox: "touch: /tmp/x: Read-only file system"
			p.Errorf("%s: %s", n, vfs.Strerror(err))
			st = 1
		}
	}
	return st
}

func appletRm(p *kernel.Proc) int {
	opts, names, err := libbb.Flags(p.Args[1:], "")
	if err != nil {
		return libbb.Usage(p, err)
	}
	force, rec := opts['f'] != "", opts['r'] != "" || opts['R'] != ""
	st := 0
	for _, n := range names {
		info, err := p.FS().Lstat(p.Abs(n))
		if err != nil {
			if !force {
				p.Errorf("can't remove '%s': %s", n, vfs.Strerror(err))
				st = 1
			}
			continue
		}
		if info.IsDir() && !rec {
			p.Errorf("'%s' is a directory", n)
			st = 1
			continue
		}
		if err := p.Remove(p.Abs(n), rec); err != nil {
			p.Errorf("can't remove '%s': %s", n, vfs.Strerror(err))
			st = 1
		}
	}
	return st
}

func appletRmdir(p *kernel.Proc) int {
	_, names, _ := libbb.Flags(p.Args[1:], "")
	st := 0
	for _, n := range names {
		info, err := p.FS().Lstat(p.Abs(n))
		if err == nil && !info.IsDir() {
			err = &fs.PathError{Op: "rmdir", Path: n, Err: syscall.ENOTDIR}
		}
		if err == nil {
			err = p.Remove(p.Abs(n), false)
		}
		if err != nil {
			p.Errorf("'%s': %s", n, vfs.Strerror(err))
			st = 1
		}
	}
	return st
}

func copyTree(p *kernel.Proc, src, dst string, rec bool) error {
	info, err := p.FS().Stat(p.Abs(src))
	if err != nil {
		return fmt.Errorf("can't stat '%s': %s", src, vfs.Strerror(err))
	}
	if info.IsDir() {
		if !rec {
			return fmt.Errorf("omitting directory '%s'", src)
		}
		if err := p.MkdirAll(p.Abs(dst), info.Mode().Perm()); err != nil {
			return fmt.Errorf("can't create directory '%s': %s", dst, vfs.Strerror(err))
		}
		ents, err := p.FS().ReadDir(p.Abs(src))
		if err != nil {
			return fmt.Errorf("can't open '%s': %s", src, vfs.Strerror(err))
		}
		for _, e := range ents {
			if err := copyTree(p, path.Join(src, e.Name()), path.Join(dst, e.Name()), rec); err != nil {
				return err
			}
		}
		return nil
	}
	// Streamed, not read whole: `cp /dev/zero f` runs (and fills f) as it would on a kernel,
	// without holding the copy in memory on the way.
	in, err := p.FS().Open(p.Abs(src))
	if err != nil {
		return fmt.Errorf("can't open '%s': %s", src, vfs.Strerror(err))
	}
	defer in.Close()
	out, err := p.OpenWrite(p.Abs(dst), false, info.Mode().Perm())
	if err != nil {
		return fmt.Errorf("can't create '%s': %s", dst, vfs.Strerror(err))
	}
	_, err = libbb.Copy(p, out, in)
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err != nil && !errors.Is(err, context.Canceled) {
		return fmt.Errorf("write error: %s", vfs.Strerror(err))
	}
	return nil
}

// destFor is where src goes when copied or moved to dst (into dst if it is a directory).
func destFor(p *kernel.Proc, src, dst string) string {
	if info, err := p.FS().Stat(p.Abs(dst)); err == nil && info.IsDir() {
		return path.Join(dst, path.Base(src))
	}
	return dst
}

func appletCp(p *kernel.Proc) int {
	opts, args, err := libbb.Flags(p.Args[1:], "")
	if err != nil {
		return libbb.Usage(p, err)
	}
	if len(args) < 2 {
		p.Errorf("missing file operand")
		return 1
	}
	rec := opts['r'] != "" || opts['R'] != "" || opts['a'] != ""
	dst := args[len(args)-1]
	st := 0
	for _, src := range args[:len(args)-1] {
		if err := copyTree(p, src, destFor(p, src, dst), rec); err != nil {
			p.Errorf("%v", err)
			st = 1
		}
	}
	return st
}

func appletMv(p *kernel.Proc) int {
	_, args, err := libbb.Flags(p.Args[1:], "")
	if err != nil {
		return libbb.Usage(p, err)
	}
	if len(args) < 2 {
		p.Errorf("missing file operand")
		return 1
	}
	dst := args[len(args)-1]
	st := 0
	for _, src := range args[:len(args)-1] {
		to := destFor(p, src, dst)
		err := p.Rename(p.Abs(src), p.Abs(to))
		if errors.Is(err, syscall.EXDEV) {
			if err = copyTree(p, src, to, true); err == nil {
				err = p.Remove(p.Abs(src), true)
			}
		}
		if err != nil {
			if errno := syscall.Errno(0); errors.As(err, &errno) {
				p.Errorf("can't rename '%s': %s", src, vfs.Strerror(err)) // busybox's words for any rename failure
			} else {
				p.Errorf("%v", err) // the copy across mounts said what failed
			}
			st = 1
		}
	}
	return st
}

func appletLn(p *kernel.Proc) int {
	opts, args, err := libbb.Flags(p.Args[1:], "")
	if err != nil {
		return libbb.Usage(p, err)
	}
	if len(args) < 2 {
		p.Errorf("missing operand")
		return 1
	}
	target, dst := args[0], destFor(p, args[0], args[1])
	if opts['f'] != "" {
		_ = p.Remove(p.Abs(dst), false)
	}
	if opts['s'] != "" {
		err = p.Symlink(target, p.Abs(dst))
	} else {
		var data []byte
		mem := p.Held() // the copy, while it is written
		defer mem.Release()
		if data, err = mem.ReadFile(p.Abs(target)); err == nil {
			err = p.WriteFile(p.Abs(dst), data, 0o644)
		}
	}
	if err != nil {
		p.Errorf("%s: %s", dst, vfs.Strerror(err))
		return 1
	}
	return 0
}

func appletStat(p *kernel.Proc) int {
	opts, names, err := libbb.Flags(p.Args[1:], "c")
	if err != nil {
		return libbb.Usage(p, err)
	}
	st := 0
	for _, n := range names {
		info, err := p.FS().Stat(p.Abs(n))
		if err != nil {
			p.Errorf("can't stat '%s': %s", n, vfs.Strerror(err))
			st = 1
			continue
		}
		uid, gid := ownerOf(info)
		if f, ok := opts['c']; ok {
			r := strings.NewReplacer("%n", n, "%s", strconv.FormatInt(info.Size(), 10), "%a", strconv.FormatUint(uint64(info.Mode().Perm()), 8),
				"%u", strconv.Itoa(uid), "%g", strconv.Itoa(gid), "%U", userName(p, uid), "%G", groupName(p, gid), "%A", lsMode(info.Mode()))
			fmt.Fprintln(p.Stdout, r.Replace(f))
			continue
		}
		kind := "regular file"
		if info.IsDir() {
			kind = "directory"
		}
		fmt.Fprintf(p.Stdout, "  File: %s\n  Size: %d\t%s\nAccess: (%04o/%s)  Uid: (%5d/%8s)   Gid: (%5d/%8s)\nModify: %s\n",
			n, info.Size(), kind, info.Mode().Perm(), lsMode(info.Mode()), uid, userName(p, uid), gid, groupName(p, gid), info.ModTime().Format("2006-01-02 15:04:05.000000000 -0700"))
	}
	return st
}

func appletChmod(p *kernel.Proc) int {
	_, args, _ := libbb.Flags(p.Args[1:], "")
	if len(args) < 2 {
		p.Errorf("missing operand")
		return 1
	}
	v, err := strconv.ParseUint(args[0], 8, 32)
	if err != nil {
		// Symbolic modes: only +x/-x/+w/-w/+r/-r for everyone.
		info, serr := p.FS().Stat(p.Abs(args[1]))
		if serr != nil {
			p.Errorf("%s: %s", args[1], vfs.Strerror(serr))
			return 1
		}
		m := info.Mode().Perm()
		for _, part := range strings.Split(args[0], ",") {
			part = strings.TrimLeft(part, "ugoa")
			if len(part) < 2 {
				continue
			}
			var bits fs.FileMode
			for _, c := range part[1:] {
				switch c {
				case 'r':
					bits |= 0o444
				case 'w':
					bits |= 0o222
				case 'x':
					bits |= 0o111
				}
			}
			if part[0] == '+' {
				m |= bits
			} else if part[0] == '-' {
				m &^= bits
			}
		}
		v = uint64(m)
	}
	st := 0
	for _, n := range args[1:] {
		if err := p.Chmod(p.Abs(n), fs.FileMode(v)); err != nil {
			p.Errorf("%s: %s", n, vfs.Strerror(err))
			st = 1
		}
	}
	return st
}

func appletReadlink(p *kernel.Proc) int {
	opts, args, _ := libbb.Flags(p.Args[1:], "")
	if len(args) == 0 {
		return 1
	}
	if opts['f'] != "" {
		return appletRealpath(p)
	}
	t, err := p.FS().Readlink(p.Abs(args[0]))
	if err != nil {
		return 1
	}
	fmt.Fprintln(p.Stdout, t)
	return 0
}

func appletRealpath(p *kernel.Proc) int {
	_, args, _ := libbb.Flags(p.Args[1:], "")
	st := 0
	for _, a := range args {
		real, err := p.FS().Realpath(p.Abs(a))
		if err != nil {
			p.Errorf("%s: %s", a, vfs.Strerror(err))
			st = 1
			continue
		}
		fmt.Fprintln(p.Stdout, real)
	}
	return st
}

func appletMd5sum(p *kernel.Proc) int {
	_, files, _ := libbb.Flags(p.Args[1:], "")
	return eachInput(p, files, func(_ int, f string, r io.Reader) bool {
		h := md5.New()
		io.Copy(h, r)
		fmt.Fprintf(p.Stdout, "%x  %s\n", h.Sum(nil), f)
		return true
	})
}
