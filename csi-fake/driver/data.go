package driver

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/plugsim/plugsim/csi-fake/state"
)

// Each volume is backed by <data-dir>/volumes/<id>: a directory for mount volumes, a sparse file
// of the volume's size for block volumes. Snapshots are copies under <data-dir>/snapshots/<id>.
// Clones and restores copy the data, so they are independent of their source (hostpath does the
// same with tar and dd).
//
// A mount volume's directory is created when data first needs a place: a clone or restore with
// content, a bind-mount publish, a node-only process adopting the volume. Until then the volume
// is empty and has no directory, which keeps CreateVolume and DeleteVolume free of file system
// work (a mkdir costs 70-230µs on a journaled disk).
//
// Every operation on that data goes through an os.Root opened on volumes/ or snapshots/ (and a
// copy through one opened on the volume being copied), so it cannot leave the directory whatever
// a name says or a symlink points at. IDs are checked before they get here (state.CheckID); the
// roots are what holds when a symlink was planted: a container with a bind-published volume can
// create any symlink inside it, or swap a directory for one while a snapshot copies it.

// area is volumes/ or snapshots/ of the data directory.
type area struct {
	root *os.Root
	dir  string
}

func openArea(dir string) (area, error) {
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return area{}, fmt.Errorf("create data directory: %w", err)
	}
	r, err := os.OpenRoot(dir)
	if err != nil {
		return area{}, fmt.Errorf("open data directory: %w", err)
	}
	return area{root: r, dir: dir}, nil
}

// path is where id's data is, for messages and for the tests.
func (a area) path(id string) string { return filepath.Join(a.dir, id) }

// remove deletes id's data, whatever it holds; symlinks inside are removed, never followed.
func (a area) remove(id string) error { return a.root.RemoveAll(id) }

// exists reports an error when id has no data.
func (a area) exists(id string) error {
	_, err := a.root.Lstat(id)
	return err
}

func (d *Driver) volumePath(id string) string   { return d.vols.path(id) }
func (d *Driver) snapshotPath(id string) string { return d.snaps.path(id) }

// create creates the backing data of a new volume or snapshot: a copy of from's srcID when from
// is set, else empty. An empty mount volume gets its directory only when eager is set (see
// above). It reports whether the data now exists.
func (a area) create(id, accessType string, size int64, from *area, srcID string, eager bool) (bool, error) {
	if from != nil {
		fi, err := from.root.Lstat(srcID)
		if err == nil && !(fi.IsDir() && accessType == state.AccessMount || fi.Mode().IsRegular() && accessType == state.AccessBlock) {
			return false, fmt.Errorf("the data of %s is a %s, not what a %s volume is made of; csi-fake does not follow or copy it", from.path(srcID), fi.Mode().Type(), accessType)
		}
		if errors.Is(err, fs.ErrNotExist) && accessType == state.AccessMount {
			// The source never had a directory: it is empty, and so is the copy.
		} else if err := copyEntry(from.root, srcID, a.root, id); err != nil {
			a.remove(id)
			return false, fmt.Errorf("copy data from %s: %w", from.path(srcID), err)
		} else if accessType == state.AccessBlock {
			return true, a.resize(id, accessType, size)
		} else {
			return true, nil
		}
	}
	if accessType == state.AccessBlock {
		f, err := a.root.OpenFile(id, os.O_CREATE|os.O_WRONLY|os.O_EXCL, 0o640)
		if err != nil {
			return false, err
		}
		// Truncate makes a sparse file: no space is used until data is written.
		if err := f.Truncate(size); err != nil {
			f.Close()
			a.root.Remove(id)
			return false, err
		}
		return true, f.Close()
	}
	if !eager {
		return false, nil
	}
	err := a.root.Mkdir(id, 0o770)
	if errors.Is(err, fs.ErrExist) {
		// Already there (a restart, a second adoption): it must be the directory csi-fake made.
		fi, lerr := a.root.Lstat(id)
		if lerr != nil {
			return false, lerr
		}
		if !fi.IsDir() {
			return false, fmt.Errorf("%s exists and is not a directory (%s)", a.path(id), fi.Mode().Type())
		}
		err = nil
	}
	if err != nil {
		return false, err
	}
	return true, nil
}

// resize grows a block volume's file; a directory has no size to change.
func (a area) resize(id, accessType string, size int64) error {
	if accessType != state.AccessBlock {
		return nil
	}
	f, err := a.root.OpenFile(id, os.O_WRONLY|syscall.O_NONBLOCK, 0)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	defer f.Close()
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() {
		return fmt.Errorf("%s is not a regular file", a.path(id))
	}
	return f.Truncate(size)
}

// openPath opens id's data with O_PATH for a bind mount (mounted through /proc/thread-self/fd, so
// what is mounted is what was checked). A symlink there is refused, not followed.
func (a area) openPath(id, accessType string) (*os.File, error) {
	f, err := a.root.OpenFile(id, unix.O_PATH|unix.O_NOFOLLOW, 0)
	if err != nil {
		return nil, err
	}
	if err := checkKind(f, accessType); err != nil {
		f.Close()
		return nil, fmt.Errorf("volume data %s: %w", a.path(id), err)
	}
	return f, nil
}

// checkKind checks that an O_PATH file is what a volume of accessType is made of: a directory for
// mount, a regular file (or a device) for block.
func checkKind(f *os.File, accessType string) error {
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil {
		return err
	}
	switch mode := st.Mode & unix.S_IFMT; {
	case accessType == state.AccessMount && mode == unix.S_IFDIR:
	case accessType == state.AccessBlock && (mode == unix.S_IFREG || mode == unix.S_IFBLK):
	case mode == unix.S_IFLNK:
		return errors.New("is a symbolic link; csi-fake does not follow it")
	default:
		return fmt.Errorf("is a %s, not what a %s volume needs", fileKind(mode), accessType)
	}
	return nil
}

func fileKind(mode uint32) string {
	switch mode & unix.S_IFMT {
	case unix.S_IFDIR:
		return "directory"
	case unix.S_IFREG:
		return "regular file"
	case unix.S_IFLNK:
		return "symbolic link"
	case unix.S_IFBLK:
		return "block device"
	case unix.S_IFCHR:
		return "character device"
	case unix.S_IFIFO:
		return "fifo"
	case unix.S_IFSOCK:
		return "socket"
	}
	return "special file"
}

// copyEntry copies src's sname to dst's dname: a file (keeping the holes of sparse files), a
// directory tree (each level through an os.Root of its own, so a directory swapped for a symlink
// mid-copy cannot lead outside the tree being copied), or a symlink as a symlink.
func copyEntry(src *os.Root, sname string, dst *os.Root, dname string) error {
	fi, err := src.Lstat(sname)
	if err != nil {
		return err
	}
	switch {
	case fi.Mode().IsRegular():
		return copyFile(src, sname, dst, dname)
	case fi.IsDir():
		if err := dst.Mkdir(dname, fi.Mode().Perm()); err != nil && !errors.Is(err, fs.ErrExist) {
			return err
		}
		from, err := src.OpenRoot(sname)
		if err != nil {
			return err
		}
		defer from.Close()
		to, err := dst.OpenRoot(dname)
		if err != nil {
			return err
		}
		defer to.Close()
		entries, err := fs.ReadDir(from.FS(), ".")
		if err != nil {
			return err
		}
		for _, e := range entries {
			if err := copyEntry(from, e.Name(), to, e.Name()); err != nil {
				return err
			}
		}
		return nil
	case fi.Mode()&fs.ModeSymlink != 0:
		target, err := src.Readlink(sname)
		if err != nil {
			return err
		}
		return dst.Symlink(target, dname)
	default:
		return nil // sockets, fifos, devices: not volume data a test writes
	}
}

// copyFile copies the data regions of a file (SEEK_DATA/SEEK_HOLE), so a 10 GiB sparse block
// volume copies in microseconds instead of writing 10 GiB of zeros. O_NONBLOCK keeps a fifo
// swapped in after the Lstat from blocking the copy (and the state lock) forever.
func copyFile(src *os.Root, sname string, dst *os.Root, dname string) error {
	in, err := src.OpenFile(sname, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return err
	}
	defer in.Close()
	fi, err := in.Stat()
	if err != nil {
		return err
	}
	if !fi.Mode().IsRegular() {
		return nil // swapped for something that is not data
	}
	out, err := dst.OpenFile(dname, os.O_CREATE|os.O_EXCL|os.O_WRONLY, fi.Mode().Perm())
	if err != nil {
		return err
	}
	size := fi.Size()
	var off int64
	for off < size {
		data, err := unix.Seek(int(in.Fd()), off, unix.SEEK_DATA)
		if err != nil {
			break // ENXIO: no data after off
		}
		hole, err := unix.Seek(int(in.Fd()), data, unix.SEEK_HOLE)
		if err != nil {
			hole = size
		}
		if _, err := in.Seek(data, io.SeekStart); err != nil {
			out.Close()
			return err
		}
		if _, err := out.Seek(data, io.SeekStart); err != nil {
			out.Close()
			return err
		}
		if _, err := io.CopyN(out, in, hole-data); err != nil {
			out.Close()
			return err
		}
		off = hole
	}
	if err := out.Truncate(size); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// usage returns the bytes and inodes (files and directories) used by id's data: a file, or a
// tree walked in an os.Root of the volume, never following a symlink.
func (a area) usage(id string) (bytes, inodes int64) {
	fi, err := a.root.Lstat(id)
	if err != nil {
		return 0, 0
	}
	switch {
	case fi.Mode().IsRegular():
		return used(fi), 1
	case !fi.IsDir():
		return 0, 0 // not data csi-fake made (a symlink planted there is not followed)
	}
	r, err := a.root.OpenRoot(id)
	if err != nil {
		return 0, 0
	}
	defer r.Close()
	fs.WalkDir(r.FS(), ".", func(_ string, e fs.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		inodes++
		if fi, err := e.Info(); err == nil {
			bytes += used(fi)
		}
		return nil
	})
	return bytes, inodes
}

// used is the space a file takes: its allocated blocks, so a sparse file counts what was written.
func used(fi fs.FileInfo) int64 {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return st.Blocks * 512
	}
	return fi.Size()
}
