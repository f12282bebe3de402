package cluster

import (
	"context"
	"io"
	"log"
	"net"
	"sync"
	"time"
)

// Relay accepts connections on ln (in the host's network namespace) and joins each to a connection it
// dials to target from inside the network namespace at netnsPath, or from its own when netnsPath is empty
// (a joining machine's relay: ln is in a node's namespace, target the API server the host reaches). Bytes
// pass through untouched: TLS runs end to end between kubectl and the API server. It returns when ln is
// closed.
func Relay(ln net.Listener, netnsPath, target string, logger *log.Logger) error {
	for {
		conn, err := ln.Accept()
		if err != nil {
			return err
		}
		go func() {
			defer conn.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			var up net.Conn
			var err error
			if netnsPath == "" {
				var d net.Dialer
				up, err = d.DialContext(ctx, "tcp", target)
			} else {
				up, err = dialIn(ctx, netnsPath, target)
			}
			cancel()
			if err != nil {
				logger.Printf("relay %s: dial %s in %s: %v", conn.RemoteAddr(), target, netnsPath, err)
				return
			}
			defer up.Close()
			pipe(conn, up)
		}()
	}
}

// pipe copies both ways until both directions have ended, passing on each half-close (kubectl's
// port-forward and exec streams end one way before the other).
func pipe(a, b net.Conn) {
	var wg sync.WaitGroup
	half := func(dst, src net.Conn) {
		defer wg.Done()
		io.Copy(dst, src)
		if cw, ok := dst.(interface{ CloseWrite() error }); ok {
			cw.CloseWrite()
		} else {
			dst.Close()
		}
	}
	wg.Add(2)
	go half(a, b)
	go half(b, a)
	wg.Wait()
}
