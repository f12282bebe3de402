package seccomp

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"syscall"

	specs "github.com/opencontainers/runtime-spec/specs-go"
)

// MaxProfileBytes is the largest profile file Load reads. containerd reads any size; the
// profile path comes from the client, so cri-fake bounds it (containerd's own default profile
// is about 20 KB as JSON).
const MaxProfileBytes = 4 << 20

// Parse decodes a profile as containerd does (contrib/seccomp.WithProfile: json.Unmarshal
// into runtime-spec's LinuxSeccomp, unknown fields ignored). It only decodes: whether runc can
// load the profile is Compile's question.
func Parse(data []byte) (*specs.LinuxSeccomp, error) {
	p := &specs.LinuxSeccomp{}
	if err := json.Unmarshal(data, p); err != nil {
		return nil, err
	}
	return p, nil
}

// Load reads and parses the profile at path (a Localhost profile's localhost_ref) with
// containerd's words for each failure: "cannot load seccomp profile" when it cannot be read,
// "decoding seccomp profile failed" when it is no profile. Only a regular file is read, at most
// MaxProfileBytes of it: a FIFO or a device at the path would otherwise block or never end.
func Load(path string) (*specs.LinuxSeccomp, error) {
	data, err := readProfile(path)
	if err != nil {
		return nil, fmt.Errorf("cannot load seccomp profile %q: %v", path, err)
	}
	p, err := Parse(data)
	if err != nil {
		return nil, fmt.Errorf("decoding seccomp profile failed %q: %v", path, err)
	}
	return p, nil
}

func readProfile(path string) ([]byte, error) {
	// O_NONBLOCK: opening a FIFO for reading does not wait for a writer.
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK|syscall.O_NOCTTY, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !st.Mode().IsRegular() {
		return nil, &os.PathError{Op: "read", Path: path, Err: errors.New("not a regular file")}
	}
	data, err := io.ReadAll(io.LimitReader(f, MaxProfileBytes+1))
	if err != nil {
		return nil, err
	}
	if len(data) > MaxProfileBytes {
		return nil, &os.PathError{Op: "read", Path: path, Err: fmt.Errorf("larger than %d bytes", MaxProfileBytes)}
	}
	return data, nil
}
