package store

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/plugsim/plugsim/internal/atomicfile"
)

// FileState persists sandboxes, containers and images under a state directory, one JSON file per
// object, each written atomically (write to a temporary file, fsync, rename), so a crash leaves
// either the old or the new version and a restarted cri-fake knows what a kubelet expects it to.
type FileState struct {
	Dir string
}

type sandboxRecord struct {
	ID             string          `json:"id"`
	Name           string          `json:"name"`
	Config         json.RawMessage `json:"config"`
	RuntimeHandler string          `json:"runtimeHandler,omitempty"`
	CreatedAt      int64           `json:"createdAt"`
	NetNS          string          `json:"netns,omitempty"`
	IPs            []string        `json:"ips,omitempty"`
	CNIResult      json.RawMessage `json:"cniResult,omitempty"`
	LogDirectory   string          `json:"logDirectory,omitempty"`
	State          string          `json:"state"`
	NetworkDown    bool            `json:"networkDown,omitempty"`
	Resources      json.RawMessage `json:"resources,omitempty"`
}

type containerRecord struct {
	ID         string          `json:"id"`
	Name       string          `json:"name"`
	SandboxID  string          `json:"sandboxId"`
	Config     json.RawMessage `json:"config"`
	ImageID    string          `json:"imageId"`
	ImageRef   string          `json:"imageRef"`
	ImageName  string          `json:"imageName"`
	LogPath    string          `json:"logPath,omitempty"`
	CreatedAt  int64           `json:"createdAt"`
	StopSignal string          `json:"stopSignal,omitempty"`
	State      string          `json:"state"`
	StartedAt  int64           `json:"startedAt,omitempty"`
	FinishedAt int64           `json:"finishedAt,omitempty"`
	ExitCode   int32           `json:"exitCode,omitempty"`
	Reason     string          `json:"reason,omitempty"`
	Message    string          `json:"message,omitempty"`
	Resources  json.RawMessage `json:"resources,omitempty"`
}

// ImageRecord is a pulled image as persisted: the catalog entry is found again by ID. An image
// the catalog does not have (a fixture's) carries its config, the catalog entry's JSON.
type ImageRecord struct {
	ID          string          `json:"id"`
	RepoTags    []string        `json:"repoTags,omitempty"`
	RepoDigests []string        `json:"repoDigests,omitempty"`
	Pinned      bool            `json:"pinned,omitempty"`
	Config      json.RawMessage `json:"config,omitempty"`
}

// path is the record of id under the kind directory (sandboxes/, containers/), refused when that
// directory is a symlink or not a directory: a link planted there would take every save and
// every delete out of the state directory.
func (f FileState) path(kind, id string) (string, error) {
	d, err := f.kindDir(kind)
	if err != nil {
		return "", err
	}
	return filepath.Join(d, id+".json"), nil
}

// kindDir is f.Dir/kind if it is a directory or does not exist yet (it is made on first save).
func (f FileState) kindDir(kind string) (string, error) {
	d := filepath.Join(f.Dir, kind)
	fi, err := os.Lstat(d)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return d, nil
	case err != nil:
		return "", err
	case !fi.IsDir():
		return "", fmt.Errorf("state directory %s is %s, not a directory; refusing to follow it out of %s", d, describeType(fi.Mode()), f.Dir)
	}
	return d, nil
}

// readRegular reads the state file p, refusing one that is a symlink (which could read a file
// outside the state directory back as state) or not a regular file.
func readRegular(p string) ([]byte, error) {
	fi, err := os.Lstat(p)
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("state file %s is %s, not a regular file; refusing to read it", p, describeType(fi.Mode()))
	}
	return os.ReadFile(p)
}

func describeType(m os.FileMode) string {
	if m&os.ModeSymlink != 0 {
		return "a symlink"
	}
	return fmt.Sprintf("of type %v", m.Type())
}

// writeAtomic writes data to path (mode 0600) through package atomicfile, making its directory
// (sandboxes/, containers/) on first use.
func writeAtomic(path string, data []byte) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	return atomicfile.Write(path, data, 0o600)
}

func pj(m proto.Message) (json.RawMessage, error) {
	return protojson.Marshal(m)
}

// SaveSandbox writes a sandbox's record.
func (f FileState) SaveSandbox(sb *Sandbox) error {
	st := sb.Status()
	cfg, err := pj(sb.Config.Unpack())
	if err != nil {
		return err
	}
	rec := sandboxRecord{ID: sb.ID, Name: sb.Name, Config: cfg, RuntimeHandler: sb.RuntimeHandler, CreatedAt: sb.CreatedAt,
		NetNS: sb.NetNS, IPs: sb.IPs, CNIResult: sb.CNIResult, LogDirectory: sb.LogDirectory, State: st.State.String(),
		NetworkDown: st.NetworkDown}
	if st.Resources != nil {
		if rec.Resources, err = pj(st.Resources); err != nil {
			return err
		}
	}
	b, err := json.Marshal(rec)
	if err != nil {
		return err
	}
	p, err := f.path("sandboxes", sb.ID)
	if err != nil {
		return err
	}
	return writeAtomic(p, b)
}

// DeleteSandbox removes a sandbox's record.
func (f FileState) DeleteSandbox(id string) error { return f.remove("sandboxes", id) }

// SaveContainer writes a container's record.
func (f FileState) SaveContainer(c *Container) error {
	st := c.Status()
	cfg, err := pj(c.Config.Unpack())
	if err != nil {
		return err
	}
	rec := containerRecord{ID: c.ID, Name: c.Name, SandboxID: c.SandboxID, Config: cfg, ImageID: c.ImageID, ImageRef: c.ImageRef,
		ImageName: c.ImageName, LogPath: c.LogPath, CreatedAt: c.CreatedAt, StopSignal: c.StopSignal.String(),
		State: st.State.String(), StartedAt: st.StartedAt, FinishedAt: st.FinishedAt, ExitCode: st.ExitCode,
		Reason: st.Reason, Message: st.Message}
	if st.Resources != nil {
		if rec.Resources, err = pj(st.Resources); err != nil {
			return err
		}
	}
	b, err := json.Marshal(rec)
	if err != nil {
		return err
	}
	p, err := f.path("containers", c.ID)
	if err != nil {
		return err
	}
	return writeAtomic(p, b)
}

// DeleteContainer removes a container's record.
func (f FileState) DeleteContainer(id string) error { return f.remove("containers", id) }

// SaveImages writes the list of pulled images.
func (f FileState) SaveImages(imgs []ImageRecord) error {
	b, err := json.Marshal(imgs)
	if err != nil {
		return err
	}
	return writeAtomic(filepath.Join(f.Dir, "images.json"), b)
}

// seededFile records that fixtures were applied to the state directory, so a restart with the
// same --fixtures goes on with the state they left, even once every object they made is gone.
const seededFile = "fixtures-applied.json"

// SaveSeeded records that the fixtures from source were applied.
func (f FileState) SaveSeeded(source string) error {
	b, err := json.Marshal(map[string]string{"source": source})
	if err != nil {
		return err
	}
	return writeAtomic(filepath.Join(f.Dir, seededFile), b)
}

// Seeded reports whether fixtures were applied to the directory, and from where.
func (f FileState) Seeded() (string, bool) {
	b, err := os.ReadFile(filepath.Join(f.Dir, seededFile))
	if err != nil {
		return "", false
	}
	var rec struct {
		Source string `json:"source"`
	}
	json.Unmarshal(b, &rec)
	return rec.Source, true
}

func (f FileState) remove(kind, id string) error {
	p, err := f.path(kind, id)
	if err != nil {
		return err
	}
	if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return nil
}

// Loaded is the state read back from the directory.
type Loaded struct {
	Sandboxes  []*Sandbox
	Containers []*Container
	Images     []ImageRecord
}

// Empty reports whether nothing was loaded.
func (l Loaded) Empty() bool { return len(l.Sandboxes)+len(l.Containers)+len(l.Images) == 0 }

// Load reads every record. A record that cannot be read is an error naming the file: silently
// dropping a sandbox would make the kubelet lose track of a pod.
func (f FileState) Load() (Loaded, error) {
	var out Loaded
	err := f.readDir("sandboxes", func(name string, b []byte) error {
		var r sandboxRecord
		if err := json.Unmarshal(b, &r); err != nil {
			return err
		}
		cfg := &runtimeapi.PodSandboxConfig{}
		if err := protojson.Unmarshal(r.Config, cfg); err != nil {
			return err
		}
		sb := &Sandbox{ID: r.ID, Name: r.Name, Config: PackSandbox(cfg), RuntimeHandler: r.RuntimeHandler, CreatedAt: r.CreatedAt,
			NetNS: r.NetNS, IPs: r.IPs, CNIResult: r.CNIResult, LogDirectory: r.LogDirectory}
		st := SandboxStatus{State: runtimeapi.PodSandboxState(runtimeapi.PodSandboxState_value[r.State]), NetworkDown: r.NetworkDown}
		if len(r.Resources) > 0 {
			st.Resources = &runtimeapi.LinuxContainerResources{}
			if err := protojson.Unmarshal(r.Resources, st.Resources); err != nil {
				return err
			}
		}
		sb.RestoreStatus(st)
		out.Sandboxes = append(out.Sandboxes, sb)
		return nil
	})
	if err != nil {
		return out, err
	}
	err = f.readDir("containers", func(name string, b []byte) error {
		var r containerRecord
		if err := json.Unmarshal(b, &r); err != nil {
			return err
		}
		cfg := &runtimeapi.ContainerConfig{}
		if err := protojson.Unmarshal(r.Config, cfg); err != nil {
			return err
		}
		c := NewContainer(ContainerSpec{ID: r.ID, Name: r.Name, SandboxID: r.SandboxID, Config: Pack(cfg), ImageID: r.ImageID,
			ImageRef: r.ImageRef, ImageName: r.ImageName, LogPath: r.LogPath, CreatedAt: r.CreatedAt,
			StopSignal: runtimeapi.Signal(runtimeapi.Signal_value[r.StopSignal])})
		st := ContainerStatus{State: runtimeapi.ContainerState(runtimeapi.ContainerState_value[r.State]), StartedAt: r.StartedAt,
			FinishedAt: r.FinishedAt, ExitCode: r.ExitCode, Reason: r.Reason, Message: r.Message}
		if len(r.Resources) > 0 {
			st.Resources = &runtimeapi.LinuxContainerResources{}
			if err := protojson.Unmarshal(r.Resources, st.Resources); err != nil {
				return err
			}
		}
		c.RestoreStatus(st)
		out.Containers = append(out.Containers, c)
		return nil
	})
	if err != nil {
		return out, err
	}
	b, err := readRegular(filepath.Join(f.Dir, "images.json"))
	if err == nil {
		if err := json.Unmarshal(b, &out.Images); err != nil {
			return out, fmt.Errorf("%s: %w", filepath.Join(f.Dir, "images.json"), err)
		}
	} else if !errors.Is(err, os.ErrNotExist) {
		return out, err
	}
	return out, nil
}

// readDir calls fn with every record under the kind directory.
func (f FileState) readDir(kind string, fn func(name string, b []byte) error) error {
	dir, err := f.kindDir(kind)
	if err != nil {
		return err
	}
	entries, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), ".json") || strings.HasPrefix(e.Name(), ".") {
			continue
		}
		p := filepath.Join(dir, e.Name())
		b, err := readRegular(p)
		if err != nil {
			return err
		}
		if err := fn(e.Name(), b); err != nil {
			return fmt.Errorf("state file %s: %w", p, err)
		}
	}
	return nil
}
