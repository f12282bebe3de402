package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"syscall"

	"github.com/plugsim/plugsim/harness/ui"
	"github.com/plugsim/plugsim/harness/wiring"
)

// uiListenerEnv names the descriptor of the view's listener that `harness up` hands to itself when
// it re-executes in a network namespace of its own (see inOwnNetns): the page must be reachable
// from the host's loopback, not the private namespace's.
const uiListenerEnv = "PLUGSIM_UI_LISTENER_FD"

func cmdUI(args []string) error {
	fs := newFlags("ui", "--addr 127.0.0.1:PORT [--dir DIR | --cluster DIR]", `Serves the live boundary view: a page (embedded in the binary, nothing fetched from the network)
that draws every call crossing CRI, CNI and CSI as it happens, in the lanes 'harness trace --svg'
draws. Click a call for its request and response; filter by interface, pod, volume or method;
follow one pod across the three interfaces; add fault rules to the fakes; export what is shown as
SVG or as the JSON-lines trace.

Open the URL it prints: it ends in #token=…, a random token without which the view's API answers
403, so other users of the machine, who can reach any loopback port, cannot use it.

--dir follows the node 'harness up --dir DIR' keeps (its admin sockets and cni-fake's log);
--cluster follows every fake of 'harness cluster up --dir DIR'. 'harness up --ui ADDR' and
'harness cluster up --ui ADDR' serve the same page.
`)
	addr := fs.String("addr", "127.0.0.1:8088", "where to serve the page (loopback unless --allow-remote)")
	dir := fs.String("dir", "", "the directory of a node 'harness up' keeps")
	clusterDir := fs.String("cluster", "", "the directory of a cluster 'harness cluster up' started")
	allowRemote := fs.Bool("allow-remote", false, "allow a non-loopback --addr (whoever reaches it can read every call and add fault rules)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	var o ui.Options
	var err error
	switch {
	case (*dir == "") == (*clusterDir == ""):
		fs.Usage()
		return exitError(2)
	case *dir != "":
		var st *wiring.State
		if st, err = wiring.ReadState(*dir); err != nil {
			return err
		}
		o, err = ui.ForNode(*st)
	default:
		abs, aerr := filepath.Abs(*clusterDir)
		if aerr != nil {
			return aerr
		}
		o, err = ui.ForCluster(abs)
	}
	if err != nil {
		return err
	}
	l, err := listenUI(*addr, *allowRemote)
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return serveUI(ctx, l, o)
}

// uiFlags adds --ui and --allow-remote to `up` and `cluster up`.
func uiFlags(fs *flag.FlagSet) (addr *string, allowRemote *bool) {
	return fs.String("ui", "", "also serve the live boundary view here (127.0.0.1:PORT; see harness ui --help)"),
		fs.Bool("allow-remote", false, "allow a non-loopback --ui address (whoever reaches it can read every call and add fault rules)")
}

// listenUI opens the view's listener, or takes the one the parent process opened before it
// re-executed this one in a network namespace of its own.
func listenUI(addr string, allowRemote bool) (net.Listener, error) {
	if fd := os.Getenv(uiListenerEnv); fd != "" {
		n, err := strconv.Atoi(fd)
		if err != nil {
			return nil, fmt.Errorf("%s=%q: %w", uiListenerEnv, fd, err)
		}
		return net.FileListener(os.NewFile(uintptr(n), "ui listener"))
	}
	l, warning, err := ui.Listen(addr, allowRemote)
	if err != nil {
		return nil, err
	}
	if warning != "" {
		fmt.Fprintln(os.Stderr, warning)
	}
	return l, nil
}

// uiListenerFile is the listener as a file to hand to a child process.
func uiListenerFile(l net.Listener) (*os.File, error) {
	tl, ok := l.(*net.TCPListener)
	if !ok {
		return nil, errors.New("the view's listener is not TCP")
	}
	return tl.File()
}

func serveUI(ctx context.Context, l net.Listener, o ui.Options) error {
	o.Logf = func(format string, args ...any) { fmt.Fprintf(os.Stderr, format+"\n", args...) }
	s := ui.New(o)
	// The URL carries the view's token: only whoever reads it here may use the view (see harness/ui).
	fmt.Printf("live boundary view on %s (following %d trace sources; %d fakes take fault rules; the #token part lets only you in)\n", s.URL(l.Addr().String()), len(o.Feeds), len(o.Faults))
	return s.Serve(ctx, l)
}
