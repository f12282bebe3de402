package runtime

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/cri-streaming/pkg/streaming"
	"k8s.io/cri-streaming/pkg/streaming/remotecommand"
	utilexec "k8s.io/utils/exec"

	"github.com/plugsim/plugsim/cri-fake/task"
)

// SessionRuntime is what k8s.io/cri-streaming's server runs once a client has connected to the
// URL that Exec, Attach or PortForward handed out (its streaming.Runtime): the session is served
// by the container's task (Exec, Attach) and the launcher's network (DialPort).
func (s *Service) SessionRuntime() streaming.Runtime { return sessionRuntime{s} }

type sessionRuntime struct{ s *Service }

var _ streaming.Runtime = sessionRuntime{}

func resizes(in <-chan remotecommand.TerminalSize, done <-chan struct{}) <-chan task.TerminalSize {
	if in == nil {
		return nil
	}
	out := make(chan task.TerminalSize)
	go func() {
		defer close(out)
		for {
			select {
			case sz, ok := <-in:
				if !ok {
					return
				}
				select {
				case out <- task.TerminalSize{Width: sz.Width, Height: sz.Height}:
				case <-done:
					return
				}
			case <-done:
				return
			}
		}
	}()
	return out
}

// Exec runs cmd in the container with the session's streams. A non-zero exit code is reported
// as utilexec.CodeExitError, which the streaming server turns into the "command terminated with
// non-zero exit code" status crictl and kubectl print and exit with.
func (r sessionRuntime) Exec(ctx context.Context, containerID string, cmd []string, in io.Reader, out, errw io.WriteCloser, tty bool, resize <-chan remotecommand.TerminalSize) error {
	_, t, err := r.s.runningTask(containerID)
	if err != nil {
		return err
	}
	done := make(chan struct{})
	defer close(done)
	code, err := t.Exec(ctx, cmd, in, writerOrNil(out), writerOrNil(errw), tty, resizes(resize, done))
	if errors.Is(err, errors.ErrUnsupported) {
		return errors.New("exec: " + noProcesses)
	}
	if err != nil {
		return err
	}
	if code != 0 {
		return utilexec.CodeExitError{Err: fmt.Errorf("command '%s' exited with %d", strings.Join(cmd, " "), code), Code: code}
	}
	return nil
}

// writerOrNil keeps a missing stream a nil io.Writer (not a typed nil).
func writerOrNil(w io.WriteCloser) io.Writer {
	if w == nil {
		return nil
	}
	return w
}

// Attach connects the session to the container's main process.
func (r sessionRuntime) Attach(ctx context.Context, containerID string, in io.Reader, out, errw io.WriteCloser, tty bool, resize <-chan remotecommand.TerminalSize) error {
	_, t, err := r.s.runningTask(containerID)
	if err != nil {
		return err
	}
	done := make(chan struct{})
	defer close(done)
	err = t.Attach(ctx, in, out, errw, tty, resizes(resize, done))
	if errors.Is(err, errors.ErrUnsupported) {
		return errors.New("attach: " + noProcesses)
	}
	return err
}

// PortForward copies between the session's stream and a connection to port inside the pod,
// until the pod side closes or the session ends (containerd's portForward).
func (r sessionRuntime) PortForward(ctx context.Context, podSandboxID string, port int32, stream io.ReadWriteCloser) error {
	sb, err := r.s.sandboxes.Get(podSandboxID)
	if err != nil {
		return fmt.Errorf("sandbox %s: %w", podSandboxID, err)
	}
	if sb.Status().State != runtimeapi.PodSandboxState_SANDBOX_READY {
		return fmt.Errorf("sandbox %s is not ready", sb.ID)
	}
	netns := sb.NetNS
	if sb.IsHostNetwork() {
		netns = "" // the node's namespace
	}
	conn, err := r.s.launcher.DialPort(ctx, sb.ID, netns, r.s.realNetNS(), port)
	if errors.Is(err, errors.ErrUnsupported) {
		return errors.New("port-forward: " + noProcesses)
	}
	if err != nil {
		return fmt.Errorf("failed to connect to port %d in sandbox %s: %w", port, sb.ID, err)
	}
	defer conn.Close()
	errc := make(chan error, 1)
	go func() {
		_, err := io.Copy(conn, stream)
		if cw, ok := conn.(interface{ CloseWrite() error }); ok {
			cw.CloseWrite()
		}
		_ = err
	}()
	go func() {
		_, err := io.Copy(stream, conn)
		errc <- err
	}()
	select {
	case err := <-errc:
		if err != nil && !errors.Is(err, net.ErrClosed) {
			return fmt.Errorf("port-forward to port %d: %w", port, err)
		}
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
