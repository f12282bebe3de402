package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/plugsim/plugsim/harness/diagram"
	"github.com/plugsim/plugsim/harness/ui"
	"github.com/plugsim/plugsim/harness/wiring"
	"github.com/plugsim/plugsim/internal/statedir"
)

func cmdUp(args []string) error {
	fs := newFlags("up", "[--dir DIR] [flags]", `Starts cri-fake (CNI conf dir with the cni-fake → portmap conflist, bin dir with both plugins) and
csi-fake (node plugin and controller plugin sockets) under DIR, writes DIR/crictl.yaml and
DIR/harness.json, prints the endpoints, and stays up until interrupted or 'harness down --dir DIR'.
With --follow it prints every boundary crossing as it happens: point crictl or a kubelet at the
CRI endpoint and watch. With --ui 127.0.0.1:PORT it also serves the live boundary view (see
'harness ui --help') for as long as the node is up.
`)
	dir := fs.String("dir", defaultDir("node"), "directory for the sockets, configuration and traces: one only root (or you) can write, made 0700 when new")
	follow := fs.Bool("follow", true, "print each call as it crosses a boundary")
	noPortmap := fs.Bool("no-portmap", false, "leave portmap out of the CNI chain")
	binDir := fs.String("bin-dir", "", "directory holding cni-fake and portmap (default $PLUGSIM_BIN, or beside the harness binary)")
	cni := fs.String("cni", "default", "default (the cni-fake → portmap conflist) or none (an empty conf dir: NetworkReady=false)")
	uiAddr, allowRemote := uiFlags(fs)
	if err := fs.Parse(args); err != nil {
		return err
	}
	abs, err := stateDir(*dir, "node")
	if err != nil {
		return err
	}
	// Checked (and made, 0700) before anything runs, in the process the user started: a directory
	// another local user made or could change is refused, naming its owner and mode.
	if err := wiring.PrepareDir(abs); err != nil {
		return err
	}
	if *binDir != "" {
		if *binDir, err = filepath.Abs(*binDir); err != nil {
			return err
		}
	}
	t := target{noPortmap: *noPortmap, binDir: *binDir}
	var uiListener net.Listener
	if *uiAddr != "" {
		// Opened here, before prepare may re-execute the harness in a network namespace of its
		// own: the re-executed one inherits it, so the page is on the host's loopback.
		l, err := listenUI(*uiAddr, *allowRemote)
		if err != nil {
			return err
		}
		defer l.Close()
		uiListener = l
		if os.Getenv(uiListenerEnv) == "" {
			f, err := uiListenerFile(l)
			if err != nil {
				return err
			}
			t.inherit, t.inheritEnv = []*os.File{f}, []string{uiListenerEnv + "=3"}
		}
	}
	if err := t.prepare(); err != nil {
		return err
	}
	if st, err := wiring.ReadState(abs); err == nil && st.Running(abs) == nil {
		return fmt.Errorf("a node is already up in %s (pid %d): stop it with `harness down --dir %s`", abs, st.PID, abs)
	}
	// The node's process works in its directory: with its pid and start time in harness.json, that
	// is what `harness down` checks before it signals anything (State.Running).
	if err := os.Chdir(abs); err != nil {
		return err
	}
	n, err := wiring.StartNode(wiring.Options{Dir: abs, CNI: *cni, ExecCNI: true, Portmap: t.portmapOK, BinDir: *binDir, Admin: true})
	if err != nil {
		return err
	}
	defer n.Close()
	if err := n.WriteState(); err != nil {
		return err
	}
	defer os.Remove(filepath.Join(abs, wiring.StateFile))
	chain := "cni-fake → portmap"
	if !n.Portmap {
		chain = "cni-fake (portmap left out: " + t.portmapWhy + ")"
	}
	if *cni == "none" {
		chain = "none: the conf dir is empty, so the runtime reports NetworkReady=false"
	}
	fmt.Printf(`plugsim node up in %s (pid %d)
  CRI endpoint         %s
  CSI node plugin      %s
  CSI controller       %s
  CNI conf dir         %s
  CNI bin dir          %s
  CNI chain            %s
  admin sockets        %s  %s
  traces               %s/var/log/plugsim/{cri,csi,cni}.jsonl
  crictl               crictl --config %s/crictl.yaml pods
Stop with Ctrl-C or 'harness down --dir %s'.
`, abs, os.Getpid(), n.CRIEndpoint, n.CSIEndpoint, n.CSIControllerEndpoint, n.CNIConfDir, n.CNIBinDir, chain,
		n.CRIAdmin, n.CSIAdmin, abs, abs, abs)
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
	if uiListener != nil {
		o, err := ui.ForNode(n.State())
		if err != nil {
			return err
		}
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		go func() {
			if err := serveUI(ctx, uiListener, o); err != nil {
				fmt.Fprintf(os.Stderr, "harness up: the view: %v\n", err)
			}
		}()
	}
	col := n.Collector()
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case s := <-sig:
			fmt.Printf("%s: stopping the fakes\n", s)
			return nil
		case <-tick.C:
			if !*follow {
				continue
			}
			evs, _ := col.Next()
			for _, ev := range diagram.FoldCNI(evs) {
				fmt.Printf("%s  %s\n", ev.Time.Format("15:04:05.000"), diagram.Line(ev))
			}
		}
	}
}

func cmdDown(args []string) error {
	fs := newFlags("down", "[--dir DIR]", `Stops the node 'harness up --dir DIR' started and waits until it has gone. It signals only the
process DIR/harness.json names when that process is still the node's: the same pid and start time,
working in DIR; a directory another local user could have written is refused.
`)
	dir := fs.String("dir", defaultDir("node"), "the directory given to 'harness up'")
	if err := fs.Parse(args); err != nil {
		return err
	}
	abs, err := stateDir(*dir, "node")
	if err != nil {
		return err
	}
	st, err := wiring.ReadState(abs)
	if err != nil {
		return err
	}
	if err := st.Running(abs); err != nil {
		os.Remove(filepath.Join(abs, wiring.StateFile))
		if errors.Is(err, os.ErrNotExist) {
			fmt.Printf("the node in %s was not running any more (pid %d); cleaned up its state file\n", abs, st.PID)
			return nil
		}
		return fmt.Errorf("%s names a process that is not the node's (%v): not signalling it; removed the state file", filepath.Join(abs, wiring.StateFile), err)
	}
	p, err := os.FindProcess(st.PID)
	if err != nil {
		return err
	}
	if err := p.Signal(syscall.SIGTERM); err != nil {
		return err
	}
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if st.Running(abs) != nil {
			fmt.Printf("stopped the node in %s (pid %d)\n", abs, st.PID)
			return nil
		}
	}
	return errors.New("the node did not stop within 10s")
}

// defaultDir is the --dir default shown in --help: statedir.Default(name), or "" when there is none
// (not root, no $XDG_RUNTIME_DIR); stateDir then says to give one.
func defaultDir(name string) string {
	d, _ := statedir.Default(name)
	return d
}

// stateDir is the absolute form of a --dir flag, or the error of statedir.Default when it is empty.
func stateDir(dir, name string) (string, error) {
	if dir == "" {
		if _, err := statedir.Default(name); err != nil {
			return "", err
		}
	}
	return filepath.Abs(dir)
}
