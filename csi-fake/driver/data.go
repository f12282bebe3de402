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

func (d *Driver) volumePath(id string) string   { return filepath.Join(d.cfg.DataDir, "volumes", id) }
func (d *Driver) snapshotPath(id string) string { return filepath.Join(d.cfg.DataDir, "snapshots", id) }

// createBacking creates the backing data of a new volume as a copy of src, or empty. An empty
// mount volume gets its directory only when eager is set (see above). It reports whether the
// data now exists.
func createBacking(dst, accessType string, size int64, src string, eager bool) (bool, error) {
	if src != "" {
		err := copyTree(src, dst)
		switch {
		case errors.Is(err, fs.ErrNotExist) && accessType == state.AccessMount:
			// The source never had a directory: it is empty, and so is the copy.
		case err != nil:
			os.RemoveAll(dst)
			return false, fmt.Errorf("copy volume data from %s: %w", src, err)
		case accessType == state.AccessBlock:
			return true, os.Truncate(dst, size)
		default:
			return true, nil
		}
	}
	if accessType == state.AccessBlock {
		f, err := os.OpenFile(dst, os.O_CREATE|os.O_WRONLY|os.O_EXCL, 0o640)
		if err != nil {
			return false, err
		}
		// Truncate makes a sparse file: no space is used until data is written.
		if err := f.Truncate(size); err != nil {
			f.Close()
			os.Remove(dst)
			return false, err
		}
		return true, f.Close()
	}
	if !eager {
		return false, nil
	}
	if err := os.Mkdir(dst, 0o770); err != nil && !errors.Is(err, fs.ErrExist) {
		return false, err
	}
	return true, nil
}

// resizeBacking grows a block volume's file; a directory has no size to change.
func resizeBacking(p, accessType string, size int64) error {
	if accessType != state.AccessBlock {
		return nil
	}
	err := os.Truncate(p, size)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	return err
}

// copyTree copies a file or a directory tree, keeping the holes of sparse files.
func copyTree(src, dst string) error {
	fi, err := os.Lstat(src)
	if err != nil {
		return err
	}
	switch {
	case fi.Mode().IsRegular():
		return copyFile(src, dst, fi)
	case fi.IsDir():
		if err := os.Mkdir(dst, fi.Mode().Perm()); err != nil && !errors.Is(err, fs.ErrExist) {
			return err
		}
		entries, err := os.ReadDir(src)
		if err != nil {
			return err
		}
		for _, e := range entries {
			if err := copyTree(filepath.Join(src, e.Name()), filepath.Join(dst, e.Name())); err != nil {
				return err
			}
		}
		return nil
	case fi.Mode()&fs.ModeSymlink != 0:
		target, err := os.Readlink(src)
		if err != nil {
			return err
		}
		return os.Symlink(target, dst)
	default:
		return nil // sockets, fifos, devices: not volume data a test writes
	}
}

// copyFile copies the data regions of src (SEEK_DATA/SEEK_HOLE), so a 10 GiB sparse block
// volume copies in microseconds instead of writing 10 GiB of zeros.
func copyFile(src, dst string, fi fs.FileInfo) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, fi.Mode().Perm())
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

// usage returns the bytes and inodes (files and directories) used under p.
func usage(p string) (bytes, inodes int64) {
	filepath.WalkDir(p, func(_ string, e fs.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		inodes++
		if fi, err := e.Info(); err == nil {
			if st, ok := fi.Sys().(*syscall.Stat_t); ok {
				bytes += st.Blocks * 512
			} else {
				bytes += fi.Size()
			}
		}
		return nil
	})
	return bytes, inodes
}
