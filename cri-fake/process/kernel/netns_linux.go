package kernel

import (
	"context"
	"net"
	"os"

	"github.com/containernetworking/plugins/pkg/ns"
)

// ListenInNetNS listens inside the network namespace at nsPath: the calling
// goroutine's OS thread is locked, moved into the namespace for the socket(2)
// and bind(2), and moved back (containernetworking/plugins pkg/ns does the
// lock/setns/restore). The socket stays in that namespace afterwards.
func ListenInNetNS(nsPath, network, address string) (net.Listener, error) {
	var l net.Listener
	err := ns.WithNetNSPath(nsPath, func(ns.NetNS) error {
		var err error
		l, err = net.Listen(network, address)
		return err
	})
	if err != nil {
		return nil, err
	}
	return l, nil
}

// DialInNetNS connects to address from inside the network namespace at nsPath
// (for PortForward into a pod whose servers listen in its namespace). The
// connect happens on the locked thread; the connection keeps working after.
func DialInNetNS(ctx context.Context, nsPath, network, address string) (net.Conn, error) {
	var c net.Conn
	err := ns.WithNetNSPath(nsPath, func(ns.NetNS) error {
		var d net.Dialer
		var err error
		c, err = d.DialContext(ctx, network, address)
		return err
	})
	if err != nil {
		return nil, err
	}
	return c, nil
}

// readProcNet reads /proc/net/<file> as seen from the container's network
// namespace.
func (c *container) readProcNet(file string) ([]byte, error) {
	if c.spec.NetNS == "" {
		return os.ReadFile("/proc/net/" + file)
	}
	var data []byte
	err := ns.WithNetNSPath(c.spec.NetNS, func(ns.NetNS) error {
		var err error
		data, err = os.ReadFile("/proc/thread-self/net/" + file)
		return err
	})
	return data, err
}
