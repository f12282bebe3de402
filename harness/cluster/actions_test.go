package cluster

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// failingStart starts a process that exits at once and waits for something it never makes: the way a
// component that crashes at start fails `up`.
type failingStart struct{}

func (failingStart) Name() string { return "start the widget" }
func (failingStart) Execute(c *actionContext) error {
	if _, err := c.startProc("widget", "", "/bin/sh", []string{"-c", "echo 'widget: bad flag --frobnicate'; exit 3"}); err != nil {
		return err
	}
	return c.wait("the widget's socket", func() (bool, string) { return false, "no socket yet" })
}

type okAction struct{ ran *[]string }

func (okAction) Name() string { return "do nothing" }
func (a okAction) Execute(c *actionContext) error {
	*a.ran = append(*a.ran, "ok")
	return nil
}

// A failed action stops the list; the error's one line names the step, why and the log to read, and the
// log's end is its detail, not its first line.
func TestActionFailureNamesStepWhyAndLog(t *testing.T) {
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "logs"), 0o755); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var ran []string
	c := &actionContext{o: Options{Dir: dir, Out: io.Discard}, st: &State{Dir: dir}, ctx: ctx, start: time.Now(), exited: make(chan string, 4)}
	err := c.run([]action{okAction{&ran}, failingStart{}, okAction{&ran}})
	var se *StepError
	if !errors.As(err, &se) {
		t.Fatalf("got %v, want a *StepError", err)
	}
	if len(ran) != 1 {
		t.Errorf("actions run: %v; the one after the failure ran too", ran)
	}
	log := filepath.Join(dir, "logs", "widget.log")
	want := "start the widget failed: widget exited while waiting for the widget's socket; read " + log
	if se.Error() != want {
		t.Errorf("error line\n got %q\nwant %q", se.Error(), want)
	}
	if !strings.Contains(se.Detail(), "widget: bad flag --frobnicate") {
		t.Errorf("detail %q does not carry the log's end", se.Detail())
	}
	if strings.Contains(se.Error(), "\n") {
		t.Errorf("the error is more than one line: %q", se.Error())
	}
}

// An action that starts nothing and fails points at the components' log directory.
func TestActionFailureWithoutProcess(t *testing.T) {
	dir := t.TempDir()
	c := &actionContext{o: Options{Dir: dir, Out: io.Discard}, st: &State{Dir: dir}, ctx: context.Background(), start: time.Now()}
	err := c.run([]action{plainFailure{}})
	if want := "write the widget's file failed: disk full; read " + filepath.Join(dir, "logs"); err == nil || err.Error() != want {
		t.Errorf("got %v, want %q", err, want)
	}
}

// A step that started hundreds of processes (a 200-node start) names the first log and the last ones,
// and how many more there are, not every one of them.
func TestActionFailureBoundsTheLogsNamed(t *testing.T) {
	var logs []string
	for i := 1; i <= 400; i++ {
		logs = append(logs, fmt.Sprintf("/d/logs/node%d-cri-fake.log", i))
	}
	err := &StepError{Step: "start the nodes", Err: errors.New("timed out waiting for node400's cri-fake socket"), Logs: logs}
	want := "start the nodes failed: timed out waiting for node400's cri-fake socket; read /d/logs/node1-cri-fake.log, " +
		"/d/logs/node398-cri-fake.log, /d/logs/node399-cri-fake.log, /d/logs/node400-cri-fake.log and 396 more in /d/logs"
	if err.Error() != want {
		t.Errorf("error line\n got %q\nwant %q", err.Error(), want)
	}
	err.Logs = logs[:logsShown]
	if got := err.Error(); strings.Count(got, ".log") != logsShown || strings.Contains(got, "more in") {
		t.Errorf("%d logs: %q; want all of them named", logsShown, got)
	}
}

type plainFailure struct{}

func (plainFailure) Name() string                 { return "write the widget's file" }
func (plainFailure) Execute(*actionContext) error { return errors.New("disk full") }
