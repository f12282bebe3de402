package agnhost

import (
	"fmt"
	"io/fs"
	"strconv"
	"syscall"
	"time"

	"github.com/spf13/pflag"

	"github.com/plugsim/plugsim/cri-fake/process/kernel"
	"github.com/plugsim/plugsim/cri-fake/process/vfs"
)

// mounttestInitialContent is what --new_file_* writes (mounttest/mt.go:159).
const mounttestInitialContent = "mount-tester new file\n"

// mounttest follows test/images/agnhost/mounttest/mt.go and mt_utils.go: with the umask cleared,
// it checks a path's file system type, writes new files with the modes asked, prints modes,
// permissions, owners and contents, and reads a file in a loop, in that order, printing the
// lines the specs match ("mount type of %q: tmpfs", "perms of file %q: -rw-r--r--", ...). Paths
// on host mounts are the host's files, read through each time (the kubelet's atomic-writer
// ..data links followed in the container's view), so a ConfigMap or Secret update shows.
func mounttest(p *kernel.Proc, flags *pflag.FlagSet) func([]string) int {
	fsType := flags.String("fs_type", "", "Path to print the fs type for")
	fileMode := flags.String("file_mode", "", "Path to print the mode bits of")
	filePerm := flags.String("file_perm", "", "Path to print the perms of")
	fileOwner := flags.String("file_owner", "", "Path to print the owning UID and GID of")
	new0644 := flags.String("new_file_0644", "", "Path to write to and read from with perm 0644")
	new0666 := flags.String("new_file_0666", "", "Path to write to and read from with perm 0666")
	new0660 := flags.String("new_file_0660", "", "Path to write to and read from with perm 0660")
	new0777 := flags.String("new_file_0777", "", "Path to write to and read from with perm 0777")
	content := flags.String("file_content", "", "Path to read the file content from")
	contentLoop := flags.String("file_content_in_loop", "", "Path to read the file content in loop from")
	retry := flags.Int("retry_time", 180, "Retry time during the loop")
	breakOnExpected := flags.Bool("break_on_expected_content", true, "Break out of loop on expected content, (use with --file_content_in_loop flag only)")
	return func([]string) int {
		out := p.Stdout
		failed := false
		check := func(err error) {
			if err != nil {
				failed = true
			}
		}
		// mt.go:86-131: the order matters to the specs (type, then new files, then what is read).
		check(mtFsType(p, *fsType))
		for _, nf := range []struct {
			path string
			perm fs.FileMode
		}{{*new0644, 0o644}, {*new0666, 0o666}, {*new0660, 0o660}, {*new0777, 0o777}} {
			check(mtReadWriteNewFile(p, nf.path, nf.perm))
		}
		check(mtStat(p, *fileMode, func(path string, st fs.FileInfo) {
			fmt.Fprintf(out, "mode of file %q: %v\n", path, st.Mode())
		}))
		check(mtStat(p, *filePerm, func(path string, st fs.FileInfo) {
			fmt.Fprintf(out, "perms of file %q: %v\n", path, st.Mode().Perm())
		}))
		check(mtFileOwner(p, *fileOwner))
		check(mtReadFileContent(p, *content))
		if *contentLoop != "" {
			check(mtContentInLoop(p, *contentLoop, *retry, *breakOnExpected))
		}
		if code, killed := kernel.ExitCause(p.Ctx()); killed {
			return code
		}
		if failed {
			return 1
		}
		return 0
	}
}

// mtFsType is mt_utils.go fsType: statfs(2), "tmpfs" for TMPFS_MAGIC, the decimal type otherwise
// (mt_utils_linux.go formatFsType).
func mtFsType(p *kernel.Proc, path string) error {
	if path == "" {
		return nil
	}
	t, err := p.Statfs(path)
	if err != nil {
		fmt.Fprintf(p.Stdout, "error from statfs(%q): %v\n", path, errnoOf(err))
		return err
	}
	name := strconv.FormatInt(t, 10)
	if t == vfs.TmpfsMagic {
		name = "tmpfs"
	}
	fmt.Fprintf(p.Stdout, "mount type of %q: %s\n", path, name)
	return nil
}

// errnoOf is the bare errno of a path error, as syscall.Statfs and syscall.Stat return it.
func errnoOf(err error) error {
	if pe, ok := err.(*fs.PathError); ok {
		return pe.Err
	}
	return err
}

// mtReadWriteNewFile is mt.go readWriteNewFile: os.WriteFile with perm (umask 0), then read back.
func mtReadWriteNewFile(p *kernel.Proc, path string, perm fs.FileMode) error {
	if path == "" {
		return nil
	}
	if err := p.WriteFile(p.Abs(path), []byte(mounttestInitialContent), perm); err != nil {
		fmt.Fprintf(p.Stdout, "error writing new file %q: %v\n", path, goPathError(err, path))
		return err
	}
	return mtReadFileContent(p, path)
}

// goPathError is err with the path as the program gave it (Go's os errors name it so).
func goPathError(err error, path string) error {
	if pe, ok := err.(*fs.PathError); ok {
		return &fs.PathError{Op: pe.Op, Path: path, Err: pe.Err}
	}
	return err
}

// mtReadFileContent is mt.go readFileContent.
func mtReadFileContent(p *kernel.Proc, path string) error {
	if path == "" {
		return nil
	}
	data, err := p.ReadFileBounded(p.Abs(path))
	if err != nil {
		fmt.Fprintf(p.Stdout, "error reading file content for %q: %v\n", path, goPathError(err, path))
		return err
	}
	fmt.Fprintf(p.Stdout, "content of file %q: %v\n", path, string(data))
	return nil
}

// mtStat is os.Stat (following links) and a line about the result (mt_utils.go fileMode,
// filePerm).
func mtStat(p *kernel.Proc, path string, show func(string, fs.FileInfo)) error {
	if path == "" {
		return nil
	}
	st, err := p.FS().Stat(p.Abs(path))
	if err != nil {
		fmt.Fprintf(p.Stdout, "error from Stat(%q): %v\n", path, goPathError(err, path))
		return err
	}
	show(path, st)
	return nil
}

// mtFileOwner is mt_utils.go fileOwner: stat(2)'s uid and gid.
func mtFileOwner(p *kernel.Proc, path string) error {
	if path == "" {
		return nil
	}
	st, err := p.FS().Stat(p.Abs(path))
	if err != nil {
		fmt.Fprintf(p.Stdout, "error from stat(%q): %v\n", path, errnoOf(err))
		return err
	}
	uid, gid := 0, 0
	switch s := st.Sys().(type) {
	case *vfs.Owner:
		uid, gid = s.UID, s.GID
	case *syscall.Stat_t:
		uid, gid = int(s.Uid), int(s.Gid)
	}
	fmt.Fprintf(p.Stdout, "owner UID of %q: %v\n", path, uid)
	fmt.Fprintf(p.Stdout, "owner GID of %q: %v\n", path, gid)
	return nil
}

// mtContentInLoop is mt.go testFileContent: read every 2 s for retry seconds, printing the
// content, until it is the new-file content (when breakOnExpected).
func mtContentInLoop(p *kernel.Proc, path string, retry int, breakOnExpected bool) error {
	var err error
	limit := time.Duration(retry) * time.Second
	for start := time.Now(); time.Since(start) < limit; {
		var data []byte
		data, err = p.ReadFileBounded(p.Abs(path))
		switch {
		case err != nil:
			fmt.Fprintf(p.Stdout, "Error reading file %s: %v, retrying\n", path, goPathError(err, path))
		default:
			fmt.Fprintf(p.Stdout, "content of file %q: %v\n", path, string(data))
			if breakOnExpected {
				if string(data) != mounttestInitialContent {
					fmt.Fprintf(p.Stdout, "Unexpected content. Expected: %s. Retrying\n", mounttestInitialContent)
				} else {
					return nil
				}
			}
		}
		if !sleepCtx(p, 2*time.Second) {
			return err
		}
	}
	return err
}
