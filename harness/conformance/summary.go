// Package conformance reads the JUnit report of a Kubernetes e2e run (e2e.test's --report-dir
// junit_01.xml, or ginkgo's own --junit-report) and sums it up: how many specs passed, failed and were
// skipped, and the failures grouped by the first line of their failure message, so that two runs
// group the same way and the groups name the gaps to close.
package conformance

import (
	"encoding/xml"
	"fmt"
	"io"
	"regexp"
	"sort"
	"strings"
)

// The subset of ginkgo's JUnit format (reporters.JUnitTestSuites) the summary needs.
type junitSuites struct {
	Suites []junitSuite `xml:"testsuite"`
}

type junitSuite struct {
	Cases []junitCase `xml:"testcase"`
}

type junitCase struct {
	Name    string        `xml:"name,attr"`
	Status  string        `xml:"status,attr"`
	Time    float64       `xml:"time,attr"`
	Skipped *junitMessage `xml:"skipped"`
	Failure *junitMessage `xml:"failure"`
	Error   *junitMessage `xml:"error"`
	// The spec's timeline and captured output: for a failed spec e2e.test dumps the namespace's
	// events there, the kubelet's "Failed to pull image" among them.
	SystemErr string `xml:"system-err"`
	SystemOut string `xml:"system-out"`
}

type junitMessage struct {
	Message     string `xml:"message,attr"`
	Type        string `xml:"type,attr"`
	Description string `xml:",chardata"`
}

// Summary is one report's totals and failure groups.
type Summary struct {
	Specs   int // test cases considered (after the name filter)
	Passed  int
	Failed  int // failed, timed out, interrupted, aborted or panicked
	Skipped int // skipped at run time (Skip, e2eskipper): a reason is given
	// NotRun counts the specs the run never started: filtered out by --ginkgo.focus/skip (ginkgo lists
	// them as skipped with no reason) or left when a suite timeout interrupted the run.
	NotRun int
	Groups []Group // failures, most frequent first
	Skips  []Group // run-time skips by reason, most frequent first
	// Pulls are the images the kubelet failed to pull in failed specs (its "Failed to pull image"
	// event in the spec's output), each with the failed specs that name it, most frequent first.
	Pulls []Group
	// PullFailed counts the failed specs that name at least one such image; Others groups the
	// rest of the failures by first line: the failures an image added to the catalog would not explain.
	PullFailed int
	Others     []Group
	// Causes are the failures by cause (causes.go): what the cluster lacked and what it waits on,
	// most frequent first. Every failure has one.
	Causes  []CauseGroup
	Seconds float64 // the specs' summed run time
}

// CauseGroup is the failed specs of one cause.
type CauseGroup struct {
	Cause   string
	WaitsOn string
	Specs   []string
}

// Group is the specs whose failure (or skip) message starts with the same line.
type Group struct {
	Message string
	Specs   []string
}

// Options filter what is summed.
type Options struct {
	// NameContains keeps only the specs whose name holds it (for example "[Conformance]"); empty keeps all.
	NameContains string
}

// Read parses a JUnit report and sums it up.
func Read(r io.Reader, o Options) (*Summary, error) {
	var doc junitSuites
	dec := xml.NewDecoder(r)
	if err := dec.Decode(&doc); err != nil {
		return nil, fmt.Errorf("not a JUnit report: %w", err)
	}
	s := &Summary{}
	fails := map[string][]string{}
	skips := map[string][]string{}
	pulls := map[string][]string{}
	others := map[string][]string{}
	byCause := map[string][]string{}
	for _, suite := range doc.Suites {
		for _, c := range suite.Cases {
			if o.NameContains != "" && !strings.Contains(c.Name, o.NameContains) {
				continue
			}
			s.Specs++
			s.Seconds += c.Time
			switch {
			case c.Failure != nil || c.Error != nil:
				m := c.Failure
				if m == nil {
					m = c.Error
				}
				s.Failed++
				key := FirstLine(m.Message, m.Description)
				fails[key] = append(fails[key], c.Name)
				seen := map[string]bool{}
				for _, out := range []string{c.SystemErr, c.SystemOut, m.Description} {
					for _, sm := range pullFailed.FindAllStringSubmatch(out, -1) {
						if !seen[sm[1]] {
							seen[sm[1]] = true
							pulls[sm[1]] = append(pulls[sm[1]], c.Name)
						}
					}
				}
				if len(seen) > 0 {
					s.PullFailed++
				} else {
					others[key] = append(others[key], c.Name)
				}
				ck := causeKey(causeOf(c.Name, m.Message+"\n"+m.Description+"\n"+c.SystemErr+"\n"+c.SystemOut))
				byCause[ck] = append(byCause[ck], c.Name)
			case c.Skipped != nil:
				// ginkgo writes "skipped" alone for a spec the run filtered out or never reached, and
				// "skipped - REASON" for one that called Skip (reporters.GenerateJUnitReportWithConfig).
				reason, ok := strings.CutPrefix(c.Skipped.Message, "skipped - ")
				if !ok || c.Status == "pending" {
					s.NotRun++
					continue
				}
				s.Skipped++
				key := FirstLine(reason, "")
				skips[key] = append(skips[key], c.Name)
			default:
				s.Passed++
			}
		}
	}
	s.Groups = groups(fails)
	s.Skips = groups(skips)
	s.Pulls = groups(pulls)
	s.Others = groups(others)
	for _, g := range groups(byCause) {
		name, waitsOn := splitCauseKey(g.Message)
		s.Causes = append(s.Causes, CauseGroup{Cause: name, WaitsOn: waitsOn, Specs: g.Specs})
	}
	return s, nil
}

func groups(m map[string][]string) []Group {
	var gs []Group
	for msg, specs := range m {
		sort.Strings(specs)
		gs = append(gs, Group{Message: msg, Specs: specs})
	}
	sort.Slice(gs, func(i, j int) bool {
		if len(gs[i].Specs) != len(gs[j].Specs) {
			return len(gs[i].Specs) > len(gs[j].Specs)
		}
		return gs[i].Message < gs[j].Message
	})
	return gs
}

var (
	// ginkgo's failure text starts with the state in brackets ("[FAILED] msg", "[TIMEDOUT] msg").
	stateTag = regexp.MustCompile(`^\[(FAILED|TIMEDOUT|INTERRUPTED|ABORTED|PANICKED)\]\s*`)
	uid      = regexp.MustCompile(`[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}`)
	// A digit run not glued to a letter before it: "pods-1234" and "300.003s" vary, "k8s", "e2e" and
	// "v1" are names.
	digits = regexp.MustCompile(`(^|[^A-Za-z0-9])[0-9]+`)
	// The kubelet's event when PullImage fails (kubelet/images: "Failed to pull image %q: %v"); in a
	// JUnit report the quotes may be escaped.
	pullFailed = regexp.MustCompile(`Failed to pull image \\?"([^"\\\s]+)\\?"`)
)

// maxLine bounds a group's key: some first lines are a whole object dump.
const maxLine = 240

// FirstLine is the grouping key of a failure: the first non-empty line of its message (or, when the
// report omits the message attribute, as e2e.test's junit_01.xml does, of its description), without
// ginkgo's state tag, with UIDs and digit runs (not those inside a name such as k8s) replaced (test namespaces are "pods-1234", pod names
// carry random numbers) so the same cause in two specs gives the same key.
func FirstLine(message, description string) string {
	text := message
	if strings.TrimSpace(text) == "" {
		text = description
	}
	line := ""
	for l := range strings.SplitSeq(text, "\n") {
		if l = strings.TrimSpace(l); l != "" {
			line = l
			break
		}
	}
	line = stateTag.ReplaceAllString(line, "")
	line = uid.ReplaceAllString(line, "UID")
	line = digits.ReplaceAllString(line, "${1}N")
	if len(line) > maxLine {
		line = line[:maxLine] + "…"
	}
	if line == "" {
		line = "(no message)"
	}
	return line
}

// Write prints the summary as text: the totals, then the failures by cause, each failed spec named,
// then each failure group (by first line) with its count and specs (at most maxSpecs listed per group;
// 0 lists all), then the run-time skips by reason.
func (s *Summary) Write(w io.Writer, maxSpecs int) error {
	var b strings.Builder
	fmt.Fprintf(&b, "specs %d: passed %d, failed %d, skipped %d, not run %d (spec time %.0fs)\n",
		s.Specs, s.Passed, s.Failed, s.Skipped, s.NotRun, s.Seconds)
	if len(s.Causes) > 0 {
		fmt.Fprintf(&b, "\nfailures by cause (%d causes):\n", len(s.Causes))
		for _, g := range s.Causes {
			fmt.Fprintf(&b, "%4d  %s; waits on: %s\n", len(g.Specs), g.Cause, g.WaitsOn)
			for _, spec := range g.Specs { // every one: each failure is named with its cause
				fmt.Fprintf(&b, "        %s\n", spec)
			}
		}
	}
	writeGroups(&b, "failures", s.Groups, maxSpecs)
	writeGroups(&b, "skips", s.Skips, maxSpecs)
	if len(s.Pulls) > 0 {
		fmt.Fprintf(&b, "\nimages the kubelet failed to pull, by the failed specs naming them (%d images, %d specs):\n", len(s.Pulls), s.PullFailed)
		for _, g := range s.Pulls {
			fmt.Fprintf(&b, "%4d  %s\n", len(g.Specs), g.Message)
		}
		writeGroups(&b, fmt.Sprintf("the %d failures with no failed pull", s.Failed-s.PullFailed), s.Others, maxSpecs)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func writeGroups(b *strings.Builder, title string, gs []Group, maxSpecs int) {
	if len(gs) == 0 {
		return
	}
	fmt.Fprintf(b, "\n%s by first line of the message (%d groups):\n", title, len(gs))
	for _, g := range gs {
		fmt.Fprintf(b, "%4d  %s\n", len(g.Specs), g.Message)
		for i, spec := range g.Specs {
			if maxSpecs > 0 && i == maxSpecs {
				fmt.Fprintf(b, "        … and %d more\n", len(g.Specs)-maxSpecs)
				break
			}
			fmt.Fprintf(b, "        %s\n", spec)
		}
	}
}
