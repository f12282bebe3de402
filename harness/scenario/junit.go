package scenario

import (
	"encoding/xml"
	"fmt"
	"io"
	"strings"

	"github.com/plugsim/plugsim/harness/diagram"
)

// JUnit XML in the shape CI systems (Jenkins, GitLab, GitHub reporters) read: one testsuite per
// scenario file, one testcase per step.
type junitSuites struct {
	XMLName  xml.Name     `xml:"testsuites"`
	Tests    int          `xml:"tests,attr"`
	Failures int          `xml:"failures,attr"`
	Skipped  int          `xml:"skipped,attr"`
	Time     string       `xml:"time,attr"`
	Suites   []junitSuite `xml:"testsuite"`
}

type junitSuite struct {
	Name     string      `xml:"name,attr"`
	File     string      `xml:"file,attr"`
	Tests    int         `xml:"tests,attr"`
	Failures int         `xml:"failures,attr"`
	Skipped  int         `xml:"skipped,attr"`
	Time     string      `xml:"time,attr"`
	Cases    []junitCase `xml:"testcase"`
}

type junitCase struct {
	Name      string        `xml:"name,attr"`
	Classname string        `xml:"classname,attr"`
	File      string        `xml:"file,attr"`
	Line      int           `xml:"line,attr"`
	Time      string        `xml:"time,attr"`
	Failure   *junitFailure `xml:"failure,omitempty"`
	Skipped   *struct{}     `xml:"skipped,omitempty"`
	SystemOut string        `xml:"system-out,omitempty"`
}

type junitFailure struct {
	Message string `xml:"message,attr"`
	Body    string `xml:",chardata"`
}

// WriteJUnit writes the results as JUnit XML; each test case carries its boundary trace.
func WriteJUnit(w io.Writer, results []*Result) error {
	var all junitSuites
	var total float64
	for _, r := range results {
		s := junitSuite{Name: r.Scenario.Name, File: r.Scenario.File, Time: secs(r.Duration.Seconds())}
		for _, sr := range r.Steps {
			c := junitCase{
				Name:      fmt.Sprintf("%d. %s", sr.Step.Index, sr.Step.Title()),
				Classname: r.Scenario.Name,
				File:      r.Scenario.File,
				Line:      sr.Step.Line,
				Time:      secs(sr.Duration.Seconds()),
			}
			switch {
			case sr.Skipped:
				c.Skipped = &struct{}{}
				s.Skipped++
			case !sr.Passed:
				c.Failure = &junitFailure{Message: sr.Failure, Body: sr.Failure}
				s.Failures++
			}
			var out strings.Builder
			diagram.Text(&out, "", sr.Events)
			c.SystemOut = out.String()
			s.Cases = append(s.Cases, c)
			s.Tests++
		}
		all.Suites = append(all.Suites, s)
		all.Tests += s.Tests
		all.Failures += s.Failures
		all.Skipped += s.Skipped
		total += r.Duration.Seconds()
	}
	all.Time = secs(total)
	if _, err := io.WriteString(w, xml.Header); err != nil {
		return err
	}
	enc := xml.NewEncoder(w)
	enc.Indent("", "  ")
	if err := enc.Encode(all); err != nil {
		return err
	}
	_, err := io.WriteString(w, "\n")
	return err
}

func secs(f float64) string { return fmt.Sprintf("%.3f", f) }
