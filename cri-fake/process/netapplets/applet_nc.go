package netapplets

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/plugsim/plugsim/cri-fake/process/kernel"
	"github.com/plugsim/plugsim/cri-fake/process/libbb"
	"github.com/plugsim/plugsim/cri-fake/process/resolv"
	"github.com/plugsim/plugsim/cri-fake/process/vfs"
)

// ncServices names the ports nc -v prints ("[tcp/http-alt]"), from the image's /etc/services;
// others print "*".
var ncServices = map[string]string{
	"tcp/22": "ssh", "tcp/53": "domain", "udp/53": "domain", "tcp/80": "http", "tcp/443": "https",
	"tcp/2379": "etcd-client", "tcp/6379": "redis", "tcp/8080": "http-alt", "udp/8080": "http-alt",
}

type ncOpts struct {
	udp, verbose, zero, listen, keep, shutdown, numeric bool
	timeout, quit                                       time.Duration
	source                                              string
	sourcePort                                          int
	args                                                []string
}

// ncUsage is netcat-openbsd's usage line.
const ncUsage = "usage: nc [-46CDdFhklNnrStUuvZz] [-I length] [-i interval] [-M ttl]\n\t  [-m minttl] [-O length] [-P proxy_username] [-p source_port]\n\t  [-q seconds] [-s sourceaddr] [-T keyword] [-V rtable] [-W recvlimit]\n\t  [-w timeout] [-X proxy_protocol] [-x proxy_address[:port]]\n\t  [destination] [port]\n"

func parseNcArgs(args []string) (ncOpts, error) {
	o := ncOpts{quit: -1}
	opts, rest, err := libbb.Flags(args, "wqspIiMmOPTVWXx")
	if err != nil {
		return o, err
	}
	for k, v := range opts {
		switch k {
		case 'u':
			o.udp = true
		case 'v':
			o.verbose = true
		case 'z':
			o.zero = true
		case 'l':
			o.listen = true
		case 'k':
			o.keep = true
		case 'N':
			o.shutdown = true
		case 'n':
			o.numeric = true
		case 't', '4', '6', 'C', 'D', 'd', 'F', 'r', 'S', 'U', 'Z':
			// -t answers telnet negotiation, -d ignores stdin: nothing the simulated peers need.
			if k == 'd' {
				o.quit = 0
			}
		case 'w', 'q':
			n, err := strconv.Atoi(v)
			if err != nil || (k == 'w' && n < 0) {
				return o, fmt.Errorf("timeout %s: invalid", v)
			}
			d := time.Duration(n) * time.Second
			if k == 'w' {
				o.timeout = d
			} else {
				o.quit = d
				if n < 0 {
					o.quit = -1
				}
			}
		case 's':
			o.source = v
		case 'p':
			n, err := strconv.Atoi(v)
			if err != nil || n < 0 || n > 65535 {
				return o, fmt.Errorf("port number invalid: %s", v)
			}
			o.sourcePort = n
		default:
			return o, fmt.Errorf("option -%c is not simulated", k)
		}
	}
	o.args = rest
	return o, nil
}

// Nc is netcat-openbsd (the agnhost image's nc, Debian's patches included): `nc [-u] [-v] [-z]
// [-w SEC] [-q SEC] [-N] [-s ADDR] HOST PORT` connects from the container's network namespace
// and copies stdin to the connection and the connection to stdout until the peer closes, -w
// seconds pass without traffic, or -q seconds after stdin ends; -l [-p] PORT listens (one peer;
// -k for more). -v prints "Connection to HOST PORT port [tcp/SERVICE] succeeded!" and the
// failures as nc does ("nc: connect to HOST port PORT (tcp) failed: Connection refused"); exit 1
// on failure.
func Nc(p *kernel.Proc) int {
	o, err := parseNcArgs(p.Args[1:])
	if err != nil {
		fmt.Fprintf(p.Stderr, "nc: %v\n", err)
		fmt.Fprint(p.Stderr, ncUsage)
		return 1
	}
	if o.listen {
		return ncListen(p, o)
	}
	if len(o.args) != 2 {
		fmt.Fprint(p.Stderr, ncUsage)
		return 1
	}
	host, port := o.args[0], o.args[1]
	if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
		fmt.Fprintf(p.Stderr, "nc: port number invalid: %s\n", port)
		return 1
	}
	proto := "tcp"
	if o.udp {
		proto = "udp"
	}
	ctx := p.Ctx()
	ips, err := resolv.LookupHost(ctx, p, host)
	if err != nil || len(ips) == 0 {
		fmt.Fprintf(p.Stderr, "nc: getaddrinfo for host \"%s\" port %s: Name does not resolve\n", host, port)
		return 1
	}
	var conn net.Conn
	for _, ip := range ips {
		dctx, cancel := ctx, context.CancelFunc(func() {})
		if o.timeout > 0 {
			dctx, cancel = context.WithTimeout(ctx, o.timeout)
		}
		laddr := o.source
		conn, err = p.DialFrom(dctx, proto, laddr, net.JoinHostPort(ip.String(), port))
		timedOut := dctx.Err() != nil
		cancel()
		if err == nil {
			break
		}
		if code, killed := kernel.ExitCause(ctx); killed {
			return code
		}
		if timedOut {
			fmt.Fprintf(p.Stderr, "nc: connect to %s port %s (%s) timed out: Operation now in progress\n", host, port, proto)
		} else {
			fmt.Fprintf(p.Stderr, "nc: connect to %s port %s (%s) failed: %s\n", host, port, proto, ncStrerror(err))
		}
	}
	if conn == nil {
		return 1
	}
	defer conn.Close()
	if o.verbose {
		svc := ncServices[proto+"/"+port]
		if svc == "" {
			svc = "*"
		}
		fmt.Fprintf(p.Stderr, "Connection to %s %s port [%s/%s] succeeded!\n", host, port, proto, svc)
	}
	if o.zero {
		if o.udp {
			// -z over UDP sends probes ("X") to see the port answer.
			conn.Write([]byte("X"))
		}
		return 0
	}
	ncReadWrite(p, o, conn)
	if code, killed := kernel.ExitCause(ctx); killed {
		return code
	}
	return 0
}

// ncReadWrite is netcat's readwrite loop: stdin to the connection, the connection to stdout.
// It ends when the peer closes (TCP), when -w passes with nothing read or written, or -q after
// stdin's end (-q 0: at once; without -q nc waits for the peer).
func ncReadWrite(p *kernel.Proc, o ncOpts, conn net.Conn) {
	activity := make(chan struct{}, 1)
	touch := func() {
		select {
		case activity <- struct{}{}:
		default:
		}
	}
	done := make(chan struct{})
	var once sync.Once
	finish := func() { once.Do(func() { close(done) }) }
	stdinDone := make(chan struct{})
	go func() {
		defer close(stdinDone)
		if o.quit == 0 && p.Stdin == nil {
			return
		}
		buf := make([]byte, 16*1024)
		for {
			if p.Stdin == nil {
				return
			}
			n, err := p.Stdin.Read(buf)
			if n > 0 {
				touch()
				if _, werr := conn.Write(buf[:n]); werr != nil {
					finish()
					return
				}
			}
			if err != nil {
				if o.shutdown {
					if tc, ok := conn.(interface{ CloseWrite() error }); ok {
						tc.CloseWrite()
					}
				}
				return
			}
		}
	}()
	go func() {
		buf := make([]byte, 16*1024)
		for {
			n, err := conn.Read(buf)
			if n > 0 {
				touch()
				if _, werr := p.Stdout.Write(buf[:n]); werr != nil {
					finish()
					return
				}
			}
			if err != nil {
				if o.udp && !errors.Is(err, net.ErrClosed) && !errors.Is(err, os.ErrDeadlineExceeded) {
					continue // an ICMP error on a connected UDP socket: nc reads on
				}
				finish()
				return
			}
		}
	}()
	var idle <-chan time.Time
	var idleTimer *time.Timer
	if o.timeout > 0 {
		idleTimer = time.NewTimer(o.timeout)
		defer idleTimer.Stop()
		idle = idleTimer.C
	}
	var quit <-chan time.Time
	stdinEnded := stdinDone
	for {
		select {
		case <-done:
			return
		case <-p.Ctx().Done():
			return
		case <-activity:
			if idleTimer != nil {
				idleTimer.Reset(o.timeout)
			}
		case <-idle:
			return
		case <-stdinEnded:
			stdinEnded = nil
			if o.quit >= 0 {
				quit = time.After(o.quit)
			}
		case <-quit:
			return
		}
	}
}

// ncListen is nc -l: it waits for a peer on the port (TCP, or the first UDP datagram) and then
// runs the readwrite loop with it.
func ncListen(p *kernel.Proc, o ncOpts) int {
	port := o.sourcePort
	if len(o.args) > 0 {
		n, err := strconv.Atoi(o.args[len(o.args)-1])
		if err != nil || n < 0 || n > 65535 {
			fmt.Fprintf(p.Stderr, "nc: port number invalid: %s\n", o.args[len(o.args)-1])
			return 1
		}
		port = n
	}
	if o.udp {
		pc, err := p.ListenPacket(port)
		if err != nil {
			fmt.Fprintf(p.Stderr, "nc: %s\n", ncStrerror(err))
			return 1
		}
		defer pc.Close()
		stop := context.AfterFunc(p.Ctx(), func() { pc.Close() })
		defer stop()
		buf := make([]byte, 64*1024)
		for {
			n, _, err := pc.ReadFrom(buf)
			if err != nil {
				code, _ := kernel.ExitCause(p.Ctx())
				return code
			}
			p.Stdout.Write(buf[:n])
		}
	}
	ln, err := p.Listen(port)
	if err != nil {
		fmt.Fprintf(p.Stderr, "nc: %s\n", ncStrerror(err))
		return 1
	}
	defer ln.Close()
	stop := context.AfterFunc(p.Ctx(), func() { ln.Close() })
	defer stop()
	for {
		conn, err := ln.Accept()
		if err != nil {
			code, _ := kernel.ExitCause(p.Ctx())
			return code
		}
		if o.verbose {
			fmt.Fprintf(p.Stderr, "Connection received on %s\n", conn.RemoteAddr())
		}
		ncReadWrite(p, o, conn)
		conn.Close()
		if !o.keep || p.Ctx().Err() != nil {
			code, _ := kernel.ExitCause(p.Ctx())
			return code
		}
	}
}

// ncStrerror is strerror of a failed connect or bind.
func ncStrerror(err error) string {
	var errno syscall.Errno
	if errors.As(err, &errno) {
		return wgetStrerror(errno)
	}
	return vfs.Strerror(err)
}
