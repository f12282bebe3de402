package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"sort"
	"strings"
	"syscall"

	"github.com/plugsim/plugsim/harness/call"
	"github.com/plugsim/plugsim/harness/collect"
	"github.com/plugsim/plugsim/harness/diagram"
	"github.com/plugsim/plugsim/harness/replay"
	"github.com/plugsim/plugsim/harness/scenario"
	"github.com/plugsim/plugsim/harness/trace"
)

// readTraces reads and merges JSON-lines trace files.
func readTraces(files []string) ([]trace.Event, error) {
	var lists [][]trace.Event
	for _, f := range files {
		evs, err := trace.ReadFile(f)
		if err != nil {
			return nil, err
		}
		lists = append(lists, evs)
	}
	return collect.Merge(lists...), nil
}

func cmdReplay(args []string) error {
	fs := newFlags("replay", "[-o SCENARIO.yaml] [--run] TRACE.jsonl...", `Converts a recorded boundary trace (cri-fake's or csi-fake's --trace file, for example while a real
kubelet drove them) into a scenario: one step per CRI/CSI call, expecting the code that was
recorded. IDs that answers handed out (podSandboxId, containerId, imageRef, volume.volumeId ...)
are captured, and later requests refer to them as ${variables}, so the scenario replays against
any endpoint, which will hand out IDs of its own.

With --run the scenario is replayed at once, against fresh fakes or the endpoints given, running
every step; each step whose code differs from the recorded one is a mismatch (exit status 1).
`)
	var t target
	t.flags(fs)
	out := fs.String("o", "", "write the scenario here (default: stdout, unless --run)")
	run := fs.Bool("run", false, "replay the scenario now and count mismatches")
	name := fs.String("name", "", "scenario name (default: from the first trace file)")
	ifaces := fs.String("interfaces", "CRI,CSI", "which interfaces' calls to replay")
	diagramOut := fs.String("diagram", "", "with --run: write the replay's SVG diagram here")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() == 0 {
		fs.Usage()
		return exitError(2)
	}
	if *run {
		// First, since it may re-execute the harness in a network namespace of its own.
		if err := t.prepare(); err != nil {
			return err
		}
	}
	events, err := readTraces(fs.Args())
	if err != nil {
		return err
	}
	if *name == "" {
		*name = "replay of " + filepath.Base(fs.Arg(0))
	}
	y, st, err := replay.Scenario(events, replay.Options{Name: *name, Interfaces: strings.Split(*ifaces, ",")})
	if err != nil {
		return err
	}
	var why []string
	for k, n := range st.Skipped {
		why = append(why, fmt.Sprintf("%d × %s", n, k))
	}
	sort.Strings(why)
	fmt.Fprintf(os.Stderr, "replay: %d events → %d steps, %d IDs captured, %d request values substituted\n", len(events), st.Steps, st.Captures, st.Substituted)
	for _, w := range why {
		fmt.Fprintf(os.Stderr, "  skipped %s\n", w)
	}
	if *out != "" {
		if err := os.WriteFile(*out, y, 0o644); err != nil {
			return err
		}
		fmt.Fprintf(os.Stderr, "replay: wrote %s\n", *out)
	} else if !*run {
		os.Stdout.Write(y)
	}
	if !*run {
		return nil
	}
	file := *out
	if file == "" {
		file = "replay.yaml"
	}
	sc, err := scenario.Parse(y, file)
	if err != nil {
		return err
	}
	env, _, closeNode, err := t.node(sc, "")
	if err != nil {
		return err
	}
	defer closeNode()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	env.Out, env.Quiet, env.KeepGoing = os.Stdout, true, true
	res := scenario.Run(ctx, sc, env)
	if *diagramOut != "" {
		if _, _, err := writeDiagrams(res, "", *diagramOut); err != nil {
			return err
		}
	}
	fmt.Printf("replay: %d steps, %d mismatches\n", len(res.Steps), res.Failed)
	if res.Failed > 0 {
		return exitError(1)
	}
	return nil
}

func cmdTrace(args []string) error {
	fs := newFlags("trace", "[--svg FILE] [--mermaid FILE] TRACE.jsonl...", `Draws recorded trace files (cri-fake's, csi-fake's, cni-fake's logFile; several are merged by time)
as the boundary trace: one line per call, and optionally a Mermaid or SVG sequence diagram. Use it
on what a real kubelet did against the fakes.
`)
	svg := fs.String("svg", "", "write an SVG sequence diagram here")
	mermaid := fs.String("mermaid", "", "write a Mermaid sequence diagram here")
	title := fs.String("title", "boundary trace", "diagram title")
	iface := fs.String("interface", "", "only this interface (CRI, CNI, CSI, REG)")
	method := fs.String("method", "", "only calls whose method contains this text (PLEG relists drown the rest: --method Sandbox)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() == 0 {
		fs.Usage()
		return exitError(2)
	}
	events, err := readTraces(fs.Args())
	if err != nil {
		return err
	}
	var kept []trace.Event
	for _, ev := range diagram.FoldCNI(events) {
		if *iface != "" && !strings.EqualFold(ev.Interface, *iface) {
			continue
		}
		if *method != "" && !strings.Contains(ev.Method, *method) {
			continue
		}
		kept = append(kept, ev)
	}
	for _, ev := range kept {
		fmt.Printf("%s  %s\n", ev.Time.Format("15:04:05.000"), diagram.Line(ev))
	}
	sections := []diagram.Section{{Events: kept}}
	sub := fmt.Sprintf("%d calls from %s", len(kept), strings.Join(fs.Args(), ", "))
	if *svg != "" {
		if err := os.WriteFile(*svg, diagram.SVG(*title, sub, sections), 0o644); err != nil {
			return err
		}
	}
	if *mermaid != "" {
		if err := os.WriteFile(*mermaid, []byte(diagram.Mermaid(*title, sections)), 0o644); err != nil {
			return err
		}
	}
	return nil
}

func cmdMethods(args []string) error {
	if len(args) != 1 || (args[0] != "cri" && args[0] != "csi") {
		return errors.New("usage: harness methods cri|csi")
	}
	for _, m := range call.Methods(args[0]) {
		fmt.Println(m)
	}
	return nil
}
