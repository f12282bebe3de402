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

func cmdMethods(args []string) error {
	if len(args) != 1 || (args[0] != "cri" && args[0] != "csi") {
		return errors.New("usage: harness methods cri|csi")
	}
	for _, m := range call.Methods(args[0]) {
		fmt.Println(m)
	}
	return nil
}
