package oci

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	specs "github.com/opencontainers/runtime-spec/specs-go"
)

// Call is one invocation of the runc binary, as Runc.Observe is told of it: the OCI boundary
// crossing cri-fake's trace records (interface OCI, cri-fake → runc).
type Call struct {
	// Method is runc's command: create, start, exec, kill, delete, state, list, update.
	Method      string
	ContainerID string
	// Args are runc's arguments after its global flags.
	Args []string
	// Request is what the call was given besides its arguments (the process of an exec, the
	// resources of an update), Response what runc printed (state's JSON); either may be nil.
	Request, Response any
	Start             time.Time
	Took              time.Duration
	Err               error
}

// Runc drives the runc binary the way containerd's go-runc does: one process per command, the
// state under Root, runc's own log in JSON, and its last error message as the call's error.
type Runc struct {
	// Binary is the runc executable.
	Binary string
	// Root is runc's state directory (--root): one directory per container.
	Root string
	// LogDir holds the log file of each create and exec while it runs (their standard streams
	// belong to the container, so runc's error is read from its log).
	LogDir string
	// Observe, when set, is told of every call after it returned.
	Observe func(Call)
}

// State is `runc state`'s answer (runc's containerState).
type State struct {
	ID      string    `json:"id"`
	Pid     int       `json:"pid"`
	Status  string    `json:"status"`
	Bundle  string    `json:"bundle"`
	Created time.Time `json:"created"`
}

// Stdio are the files a created container's or an exec's process gets as its standard streams
// (nil: /dev/null), or a console socket for a terminal.
type Stdio struct {
	Stdin, Stdout, Stderr *os.File
	ConsoleSocket         string
}

// Error is runc's failure: its exit status and the message it logged.
type Error struct {
	Command string
	Message string
	Status  int
}

func (e *Error) Error() string { return e.Message }

// NotFound tells whether runc said the container does not exist.
func NotFound(err error) bool {
	var re *Error
	return errors.As(err, &re) && strings.Contains(re.Message, "does not exist")
}

// NotRunning tells whether runc refused a signal because the container is not running.
func NotRunning(err error) bool {
	var re *Error
	return errors.As(err, &re) && (strings.Contains(re.Message, "not running") || strings.Contains(re.Message, "process already finished"))
}

// Create is `runc create --bundle B --pid-file P ID`: the container's namespaces, mounts and
// cgroup made, its init waiting for start; it returns the init's pid.
func (r *Runc) Create(ctx context.Context, id, bundleDir string, io Stdio) (int, error) {
	pidFile := filepath.Join(bundleDir, "init.pid")
	args := []string{"create", "--bundle", bundleDir, "--pid-file", pidFile}
	if io.ConsoleSocket != "" {
		args = append(args, "--console-socket", io.ConsoleSocket)
	}
	args = append(args, id)
	err := r.runWithStdio(ctx, id, "create", args, io, nil)
	if err != nil {
		return 0, err
	}
	return readPid(pidFile)
}

// Start is `runc start ID`: the container's init execs its process.
func (r *Runc) Start(ctx context.Context, id string) error {
	_, err := r.run(ctx, id, "start", []string{"start", id}, nil, nil)
	return err
}

// Exec is `runc exec --detach --process F --pid-file P ID`: process runs in the container
// (detached: runc returns once it has started) and Exec returns its pid.
func (r *Runc) Exec(ctx context.Context, id, execID, dir string, process *specs.Process, io Stdio) (int, error) {
	data, err := json.Marshal(process)
	if err != nil {
		return 0, err
	}
	procFile := filepath.Join(dir, "exec-"+execID+".json")
	pidFile := filepath.Join(dir, "exec-"+execID+".pid")
	if err := os.WriteFile(procFile, data, 0o600); err != nil {
		return 0, err
	}
	defer os.Remove(procFile)
	defer os.Remove(pidFile)
	args := []string{"exec", "--detach", "--process", procFile, "--pid-file", pidFile}
	if io.ConsoleSocket != "" {
		args = append(args, "--console-socket", io.ConsoleSocket)
	}
	args = append(args, id)
	if err := r.runWithStdio(ctx, id, "exec", args, io, process); err != nil {
		return 0, err
	}
	return readPid(pidFile)
}

// Kill is `runc kill ID SIGNAL`.
func (r *Runc) Kill(ctx context.Context, id string, sig syscall.Signal) error {
	_, err := r.run(ctx, id, "kill", []string{"kill", id, strconv.Itoa(int(sig))}, nil, nil)
	return err
}

// Delete is `runc delete [--force] ID`: the container's state, cgroup and (with force) its
// processes gone.
func (r *Runc) Delete(ctx context.Context, id string, force bool) error {
	args := []string{"delete"}
	if force {
		args = append(args, "--force")
	}
	_, err := r.run(ctx, id, "delete", append(args, id), nil, nil)
	return err
}

// State is `runc state ID`.
func (r *Runc) State(ctx context.Context, id string) (State, error) {
	var st State
	out, err := r.run(ctx, id, "state", []string{"state", id}, nil, func(out []byte) any { return json.RawMessage(out) })
	if err != nil {
		return st, err
	}
	err = json.Unmarshal(out, &st)
	return st, err
}

// List is `runc list --format json`: every container under Root.
func (r *Runc) List(ctx context.Context) ([]State, error) {
	out, err := r.run(ctx, "", "list", []string{"list", "--format", "json"}, nil, func(out []byte) any { return json.RawMessage(out) })
	if err != nil {
		return nil, err
	}
	var list []State
	if len(bytes.TrimSpace(out)) == 0 || bytes.Equal(bytes.TrimSpace(out), []byte("null")) {
		return nil, nil
	}
	err = json.Unmarshal(out, &list)
	return list, err
}

// Update is `runc update --resources - ID` with the new resources on its input.
func (r *Runc) Update(ctx context.Context, id string, res *specs.LinuxResources) error {
	data, err := json.Marshal(res)
	if err != nil {
		return err
	}
	_, err = r.runInput(ctx, id, "update", []string{"update", "--resources", "-", id}, res, data)
	return err
}

func (r *Runc) global() []string { return []string{"--root", r.Root} }

// run runs a runc command whose standard streams are runc's own: its output is the answer, its
// error output the error.
func (r *Runc) run(ctx context.Context, id, method string, args []string, req any, resp func([]byte) any) ([]byte, error) {
	start := time.Now()
	cmd := exec.CommandContext(ctx, r.Binary, append(r.global(), args...)...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	err = r.failure(method, err, lastLine(stderr.Bytes()))
	call := Call{Method: method, ContainerID: id, Args: args, Request: req, Start: start, Took: time.Since(start), Err: err}
	if resp != nil && err == nil {
		call.Response = resp(stdout.Bytes())
	}
	r.observe(call)
	return stdout.Bytes(), err
}

func (r *Runc) runInput(ctx context.Context, id, method string, args []string, req any, input []byte) ([]byte, error) {
	start := time.Now()
	cmd := exec.CommandContext(ctx, r.Binary, append(r.global(), args...)...)
	var stdout, stderr bytes.Buffer
	cmd.Stdin, cmd.Stdout, cmd.Stderr = bytes.NewReader(input), &stdout, &stderr
	err := r.failure(method, cmd.Run(), lastLine(stderr.Bytes()))
	r.observe(Call{Method: method, ContainerID: id, Args: args, Request: req, Start: start, Took: time.Since(start), Err: err})
	return stdout.Bytes(), err
}

// runWithStdio runs create or exec, whose standard streams are the container process's: runc's
// error is read from its JSON log (--log), as go-runc does.
func (r *Runc) runWithStdio(ctx context.Context, id, method string, args []string, io Stdio, req any) error {
	start := time.Now()
	logf, err := os.CreateTemp(r.LogDir, method+"-*.json")
	if err != nil {
		return err
	}
	logPath := logf.Name()
	logf.Close()
	defer os.Remove(logPath)
	cmd := exec.CommandContext(ctx, r.Binary, append(r.global(), append([]string{"--log", logPath, "--log-format", "json"}, args...)...)...)
	if io.Stdin != nil {
		cmd.Stdin = io.Stdin
	}
	if io.Stdout != nil {
		cmd.Stdout = io.Stdout
	}
	if io.Stderr != nil {
		cmd.Stderr = io.Stderr
	}
	err = cmd.Run()
	if err != nil {
		err = r.failure(method, err, lastLogError(logPath))
	}
	r.observe(Call{Method: method, ContainerID: id, Args: args, Request: req, Start: start, Took: time.Since(start), Err: err})
	return err
}

func (r *Runc) observe(c Call) {
	if r.Observe != nil {
		r.Observe(c)
	}
}

// failure words a failed command: runc's message, else how the process ended.
func (r *Runc) failure(method string, err error, msg string) error {
	if err == nil {
		return nil
	}
	status := -1
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		status = ee.ExitCode()
	} else {
		return fmt.Errorf("runc %s: %w", method, err)
	}
	if msg == "" {
		msg = fmt.Sprintf("runc %s: %v", method, err)
	}
	return &Error{Command: method, Message: msg, Status: status}
}

func lastLine(b []byte) string {
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	return strings.TrimSpace(lines[len(lines)-1])
}

// lastLogError is the message of the last error runc logged (logrus's JSON: {"level":"error",
// "msg":"..."}).
func lastLogError(path string) string {
	data, err := readBounded(path, 1<<20)
	if err != nil {
		return ""
	}
	var msg string
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		var entry struct{ Level, Msg string }
		if json.Unmarshal(sc.Bytes(), &entry) == nil && entry.Level == "error" {
			msg = entry.Msg
		}
	}
	return msg
}

func readPid(file string) (int, error) {
	data, err := readBounded(file, 64)
	if err != nil {
		return 0, fmt.Errorf("runc's pid file: %w", err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(data)))
	if err != nil || pid <= 0 {
		return 0, fmt.Errorf("runc's pid file %s: %q is not a pid", file, data)
	}
	return pid, nil
}
