// Package atomicfile replaces a file's contents so that a reader, or the next start after a
// crash, finds either the old contents or the new, never half of them: the data goes to a
// temporary file in the same directory, which is synced, renamed over the file, and the
// directory synced so that the rename itself survives a power loss (rename(2) is atomic but
// not durable until the directory is; see fsync(2): "Calling fsync() does not necessarily
// ensure that the entry in the directory containing the file has also reached disk").
//
// It is what cri-fake's state directory, csi-fake's state.json, cni-fake's fault file, the
// CNI config cri-fake renders and the harness's cluster state are written with. It uses only
// the standard library, so the cni-fake plugin binary can link it.
package atomicfile

import (
	"errors"
	"os"
	"path/filepath"
)

// Write replaces path with data, mode perm (not masked by the umask). The temporary file is
// named after path with a random suffix (".NAME.tmp-123"), so concurrent writers of one path do
// not write into each other's file; the last rename wins. On error path is left as it was and the
// temporary file is removed.
func Write(path string, data []byte, perm os.FileMode) (retErr error) {
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return err
	}
	defer func() {
		if retErr != nil {
			f.Close()
			os.Remove(f.Name())
		}
	}()
	if _, err := f.Write(data); err != nil {
		return err
	}
	if err := f.Chmod(perm); err != nil {
		return err
	}
	if err := f.Sync(); err != nil {
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := os.Rename(f.Name(), path); err != nil {
		return err
	}
	return syncDir(dir)
}

// syncDir makes the directory entries of dir durable.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	return errors.Join(err, d.Close())
}
