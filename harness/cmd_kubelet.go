package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"google.golang.org/grpc"

	"github.com/plugsim/plugsim/harness/collect"
	"github.com/plugsim/plugsim/harness/diagram"
	"github.com/plugsim/plugsim/harness/kubeletsim"
	"github.com/plugsim/plugsim/harness/wiring"
)

func cmdKubelet(args []string) error {
	fs := newFlags("kubelet", "[--pods N] [--concurrency C] [flags]", `Plays the kubelet against a CRI endpoint (and, with --csi, the CSI sidecars and the kubelet against
a CSI driver) as load: each of N pods goes through the kubelet's real sequence — RunPodSandbox,
PodSandboxStatus, per container ImageStatus/PullImage/ImageStatus, CreateContainer, StartContainer
(init containers first, one at a time, each waited for until it exits), GetPodStatus, StopContainer,
StopPodSandbox, ContainerStatus, RemoveContainer, RemovePodSandbox — with C pods in flight at once
and a PLEG relist (ListPodSandbox + ListContainers) every --relist. It shows progress, then prints
throughput and latency percentiles per call. Exit status 1 when any pod failed.

Without --cri-endpoint or --dir it starts a fresh cri-fake (and csi-fake) with the cni-fake chain.
`)
	var t target
	t.flags(fs)
	pods := fs.Int("pods", 100, "number of pods to run through their whole lifecycle")
	conc := fs.Int("concurrency", 8, "pods in flight at once (the kubelet's pod workers run in parallel)")
	inits := fs.Int("init-containers", 0, "init containers per pod (each must exit 0 before the next starts)")
	containers := fs.Int("containers", 1, "app containers per pod")
	image := fs.String("image", "busybox", "image of every container")
	relist := fs.Duration("relist", time.Second, "PLEG relist period (0: off)")
	withCSI := fs.Bool("csi", false, "also run a PVC volume lifecycle per pod (CreateVolume … DeleteVolume)")
	diagramOut := fs.String("diagram", "", "write the calls of the run as an SVG sequence diagram here (for a few pods: --pods 1)")
	showTrace := fs.Bool("show-trace", false, "print every boundary crossing of the run (for a few pods)")
	cni := fs.String("cni", "default", "for a fresh cri-fake: default (the cni-fake chain, exec'd per pod) or off (no CNI: cri-fake's built-in addresses, to measure the CRI alone)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *cni != "default" && *cni != "off" {
		return fmt.Errorf("--cni %q: want default or off", *cni)
	}
	if err := t.prepare(); err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	var criConn, csiNode, csiCtrl grpc.ClientConnInterface
	var col *collect.Collector
	traced := *diagramOut != "" || *showTrace
	kubeletDir := ""
	target := ""
	if t.remote() {
		st := wiring.State{CRIEndpoint: t.criEP, CSIEndpoint: t.csiEP, CSIControllerEndpoint: t.csiCtrlEP}
		if t.dir != "" {
			s, err := wiring.ReadState(t.dir)
			if err != nil {
				return err
			}
			st = *s
			kubeletDir = s.Vars["kubeletDir"]
		}
		if st.CSIControllerEndpoint == "" {
			st.CSIControllerEndpoint = st.CSIEndpoint
		}
		r, err := wiring.Attach(st)
		if err != nil {
			return err
		}
		defer r.Close()
		criConn, csiNode, csiCtrl = r.Env.CRI, r.Env.CSINode, r.Env.CSIController
		col = r.Env.Trace
		target = st.CRIEndpoint
	} else {
		capacity := -1 // a load run keeps no trace in memory
		if traced {
			capacity = 0 // the default ring
		}
		n, err := wiring.StartNode(wiring.Options{CNI: *cni, ExecCNI: true, Portmap: t.portmapOK, BinDir: t.binDir, NoCSI: !*withCSI, TraceCapacity: capacity})
		if err != nil {
			return err
		}
		defer n.Close()
		if traced {
			col = n.Collector()
		}
		criConn, csiNode, csiCtrl = n.CRIConn, n.CSIConn, n.CSIControllerConn
		kubeletDir = n.KubeletDir
		chain := "CNI off"
		if *cni == "default" {
			chain = "CNI chain cni-fake"
			if n.Portmap {
				chain += " → portmap"
			}
		}
		target = fmt.Sprintf("a fresh cri-fake (%s)", chain)
		if *withCSI {
			target += " and csi-fake"
		}
	}
	if criConn == nil {
		return fmt.Errorf("no CRI endpoint")
	}
	if kubeletDir == "" {
		d, err := os.MkdirTemp("", "harness-kubelet-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(d)
		kubeletDir = d
	}
	k := kubeletsim.New(criConn)
	k.LogRoot = filepath.Join(kubeletDir, "..", "..", "log", "pods")
	st, err := k.Startup(ctx)
	if err != nil {
		return fmt.Errorf("kubelet start-up against %s: %w", target, err)
	}
	for _, c := range st.GetStatus().GetConditions() {
		if !c.Status {
			fmt.Printf("note: runtime condition %s is false (%s: %s)\n", c.Type, c.Reason, c.Message)
		}
	}
	opts := kubeletsim.LoadOptions{
		Pods: *pods, Concurrency: *conc, InitContainers: *inits, Containers: *containers, Image: *image,
		RelistEvery: *relist, Progress: os.Stderr, TTY: isTTY(os.Stderr),
	}
	if *withCSI {
		if csiNode == nil {
			return fmt.Errorf("--csi: no CSI endpoint (give --csi-endpoint)")
		}
		s := kubeletsim.NewStorage(csiCtrl, csiNode, kubeletDir)
		if err := s.Discover(ctx); err != nil {
			return fmt.Errorf("CSI discovery: %w", err)
		}
		fmt.Printf("CSI: %s\n", s)
		opts.Storage = s
	}
	fmt.Printf("kubelet sequences: %d pods, %d at a time, %d init + %d app containers each, against %s\n",
		*pods, *conc, *inits, *containers, target)
	rep := kubeletsim.RunLoad(ctx, k, opts)
	if traced {
		if col == nil {
			return fmt.Errorf("--diagram/--show-trace: no trace to read from %s (use a fresh node or --dir)", target)
		}
		evs, err := col.Next()
		if err != nil {
			fmt.Fprintf(os.Stderr, "trace: %v\n", err)
		}
		evs = diagram.FoldCNI(evs)
		if *showTrace {
			diagram.Text(os.Stdout, "  ", evs)
		}
		if *diagramOut != "" {
			title := fmt.Sprintf("the kubelet's calls for %d pod(s)", *pods)
			sub := fmt.Sprintf("harness kubelet against %s · %d boundary crossings", target, len(evs))
			if err := os.WriteFile(*diagramOut, diagram.SVG(title, sub, []diagram.Section{{Events: evs}}), 0o644); err != nil {
				return err
			}
			fmt.Printf("diagram: %s\n", *diagramOut)
		}
	}
	rep.Write(os.Stdout)
	if rep.Failed > 0 {
		return exitError(1)
	}
	return nil
}

// isTTY reports whether f is a terminal (progress is then redrawn in place).
func isTTY(f *os.File) bool {
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}
