package main

import (
	"errors"
	"fmt"
	"os"

	"github.com/plugsim/plugsim/harness/conformance"
)

func cmdConformance(args []string) error {
	if len(args) == 0 || args[0] != "summary" {
		return errors.New("usage: harness conformance summary [flags] JUNIT.xml (harness conformance summary --help)")
	}
	fs := newFlags("conformance summary", "[--name-contains S] [--max-specs N] JUNIT.xml", `Sums up the JUnit report of a Kubernetes e2e run (e2e.test's --report-dir DIR/junit_01.xml, as
'make conformance' writes it): how many specs passed, failed, were skipped at run time (with a
reason) or never ran (filtered out by the focus, or left by a suite timeout), then the failures
grouped by the first line of their failure message, digit runs and UIDs replaced so random names
do not split a group, most frequent first, then the skips by reason.
`)
	contains := fs.String("name-contains", "[Conformance]", "count only the specs whose name holds this (empty: all)")
	maxSpecs := fs.Int("max-specs", 0, "list at most this many spec names under each group (0: all)")
	if err := fs.Parse(args[1:]); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return errors.New("give one JUnit file")
	}
	f, err := os.Open(fs.Arg(0))
	if err != nil {
		return err
	}
	defer f.Close()
	s, err := conformance.Read(f, conformance.Options{NameContains: *contains})
	if err != nil {
		return fmt.Errorf("%s: %w", fs.Arg(0), err)
	}
	return s.Write(os.Stdout, *maxSpecs)
}
