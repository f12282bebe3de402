package trace

import (
	"context"
	"net"
	"os"
	"strconv"
	"strings"
	"unicode"

	"google.golang.org/grpc/peer"
)

// The trace names the process at the other end of a unix socket, because nothing in the calls
// does: the kubelet's CRI and CSI clients (k8s.io/cri-client, pkg/volume/csi/csi_client.go) and the
// sidecars' csi-lib-utils connection.Connect set no user agent, so every one of them sends
// grpc-go's default "grpc-go/1.x", and none sends metadata naming itself. The kernel does know
// the peer: SO_PEERCRED gives its pid, and /proc/<pid>/comm its executable's name.

// PeerListener wraps a unix-socket listener so that every accepted connection carries the name of
// the process that connected (see PeerAddr), looked up once per connection. A connection from
// this very process (an in-process harness or test playing the kubelet) and one whose peer cannot
// be looked up are passed through unchanged: their calls keep the Boundary's caller.
func PeerListener(l net.Listener) net.Listener {
	return &peerListener{Listener: l, self: os.Getpid()}
}

type peerListener struct {
	net.Listener
	self int
}

func (l *peerListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return c, err
	}
	uc, ok := c.(*net.UnixConn)
	if !ok {
		return c, nil
	}
	pid, ok := peerPID(uc)
	if !ok || pid == l.self {
		return c, nil
	}
	name := CallerName(processName(pid))
	if name == "" {
		return c, nil
	}
	ra := uc.RemoteAddr()
	if ra == nil {
		ra = &net.UnixAddr{Net: "unix"}
	}
	return &peerConn{UnixConn: uc, addr: PeerAddr{Addr: ra, PID: pid, Caller: name}}, nil
}

// peerConn is the accepted connection with a RemoteAddr that names the peer; gRPC puts
// RemoteAddr into the peer.Peer of every call on the connection. Embedding *net.UnixConn keeps
// its other methods (SyscallConn, CloseWrite) visible.
type peerConn struct {
	*net.UnixConn
	addr PeerAddr
}

func (c *peerConn) RemoteAddr() net.Addr { return c.addr }

// PeerAddr is the remote address of a connection accepted by PeerListener.
type PeerAddr struct {
	net.Addr
	PID    int    // the peer's pid when it connected (SO_PEERCRED)
	Caller string // its trace name (CallerName of its process name)
}

// String names who is behind the address (gRPC logs the peer address with it).
func (a PeerAddr) String() string {
	return a.Caller + "@pid " + strconv.Itoa(a.PID)
}

// sidecarNames maps the CSI sidecars' executables (their images' entrypoints, /csi-provisioner and
// so on) to the components' names, the ones the diagrams and the harness's own roles use.
var sidecarNames = map[string]string{
	"csi-provisioner": "external-provisioner",
	"csi-attacher":    "external-attacher",
	"csi-resizer":     "external-resizer",
	"csi-snapshotter": "external-snapshotter",
}

// CallerName is the trace name of a process called name: the CSI sidecars by their component's
// name ("csi-provisioner" is "external-provisioner"), any other process by its own name
// ("kubelet", "crictl", "csi-sanity"), with non-printable characters dropped (a process may name
// itself anything, prctl(PR_SET_NAME)).
func CallerName(name string) string {
	name = strings.Map(func(r rune) rune {
		if unicode.IsPrint(r) && r != ' ' {
			return r
		}
		return -1
	}, name)
	if n, ok := sidecarNames[name]; ok {
		return n
	}
	return name
}

// peerCaller is the caller name PeerListener attached to the call's connection, or "".
func peerCaller(ctx context.Context) string {
	if p, ok := peer.FromContext(ctx); ok {
		if a, ok := p.Addr.(PeerAddr); ok {
			return a.Caller
		}
	}
	return ""
}
