//go:build e2e

package e2e

import (
	"bufio"
	"bytes"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// crictlCmd is a crictl command against the fake, not yet started.
func (f *fake) crictlCmd(t *testing.T, args ...string) *exec.Cmd {
	t.Helper()
	all := append([]string{"--runtime-endpoint", f.endpoint, "--image-endpoint", f.endpoint, "--timeout", "30s"}, args...)
	cmd := exec.Command(tool(t, "crictl"), all...)
	cmd.Dir = f.dir
	return cmd
}

// background starts a long-running crictl (logs -f, attach, port-forward) and returns a reader
// of its stdout; the process is killed at the end of the test.
func background(t *testing.T, cmd *exec.Cmd) (*bufio.Reader, io.WriteCloser) {
	t.Helper()
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
		if t.Failed() {
			t.Logf("%s stderr:\n%s", strings.Join(cmd.Args, " "), stderr.String())
		}
	})
	return bufio.NewReader(out), in
}

// readUntil reads lines until one contains want, or fails after 10 s.
func readUntil(t *testing.T, r *bufio.Reader, want string) string {
	t.Helper()
	got := make(chan string, 1)
	go func() {
		var seen strings.Builder
		for {
			line, err := r.ReadString('\n')
			seen.WriteString(line)
			if strings.Contains(line, want) || err != nil {
				got <- seen.String()
				return
			}
		}
	}()
	select {
	case s := <-got:
		if !strings.Contains(s, want) {
			t.Fatalf("output ended without %q:\n%s", want, s)
		}
		return s
	case <-time.After(10 * time.Second):
		t.Fatalf("no %q within 10s", want)
	}
	return ""
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// TestCrictlProcesses drives the simulated processes through crictl: exec (plain, -i, -it),
// logs (and -f), attach and port-forward, on a running busybox and nginx container.
func TestCrictlProcesses(t *testing.T) {
	tool(t, "cni-fake")
	f := startFake(t)
	f.useCNIFake(t)
	f.crictl(t, "pull", "busybox")
	f.crictl(t, "pull", "nginx")

	logs := filepath.Join(f.dir, "logs")
	write := func(name, content string) string {
		p := filepath.Join(f.dir, name)
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	pod := write("pod.json", `{"metadata":{"name":"proc","namespace":"default","uid":"proc-uid","attempt":0},"log_directory":"`+logs+`","linux":{}}`)
	box := write("box.json", `{"metadata":{"name":"box"},"image":{"image":"busybox"},"log_path":"box/0.log","linux":{},
"command":["sh","-c","i=0; while true; do echo tick $i; i=$((i+1)); sleep 0.2; done"]}`)
	shell := write("shell.json", `{"metadata":{"name":"shell"},"image":{"image":"busybox"},"command":["sh"],"stdin":true,"log_path":"shell/0.log","linux":{}}`)
	web := write("web.json", `{"metadata":{"name":"web"},"image":{"image":"nginx"},"log_path":"web/0.log","linux":{}}`)

	podID := strings.TrimSpace(f.crictl(t, "runp", pod))
	run := func(cfg string) string {
		id := strings.TrimSpace(f.crictl(t, "create", podID, cfg, pod))
		f.crictl(t, "start", id)
		return id
	}
	boxID, shellID, webID := run(box), run(shell), run(web)
	mustContain(t, "ps", f.crictl(t, "ps"), boxID[:13], shellID[:13], webID[:13], "Running")

	// exec: output, exit codes, stdin, a TTY.
	if out := f.crictl(t, "exec", boxID, "echo", "hello"); out != "hello\n" {
		t.Fatalf("exec echo: %q", out)
	}
	var stderr bytes.Buffer
	cmd := f.crictlCmd(t, "exec", boxID, "sh", "-c", "exit 4")
	cmd.Stderr = &stderr
	if err := cmd.Run(); err == nil || !strings.Contains(stderr.String(), "exit code 4") {
		t.Fatalf("exec exit 4: %v, %s", err, stderr.String())
	}
	cmd = f.crictlCmd(t, "exec", "-i", boxID, "sh")
	cmd.Stdin = strings.NewReader("echo from-stdin; id -u\n")
	if out, err := cmd.Output(); err != nil || string(out) != "from-stdin\n0\n" {
		t.Fatalf("exec -i: %v %q", err, out)
	}
	script, err := exec.LookPath("script")
	if err != nil {
		t.Fatalf("script (util-linux) gives crictl exec -it a terminal: %v", err)
	}
	line := tool(t, "crictl") + " --runtime-endpoint " + f.endpoint + " exec -it " + boxID + " sh -c 'echo on-a-tty'"
	cmd = exec.Command(script, "-qec", line, "/dev/null")
	if out, err := cmd.Output(); err != nil || !strings.Contains(string(out), "on-a-tty\r\n") {
		t.Fatalf("exec -it: %v %q", err, out)
	}
	mustContain(t, "exec in nginx", f.crictl(t, "exec", webID, "cat", "/etc/nginx/conf.d/default.conf"), "listen 80")

	// logs: what the process printed, then -f follows new lines.
	mustContain(t, "logs", f.crictl(t, "logs", boxID), "tick 0\n")
	r, _ := background(t, f.crictlCmd(t, "logs", "-f", boxID))
	first := readUntil(t, r, "tick")
	n, _ := strconv.Atoi(strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(first[strings.LastIndex(strings.TrimSpace(first), "\n")+1:]), "tick")))
	readUntil(t, r, "tick "+strconv.Itoa(n+3)+"\n")

	// attach: input reaches the shell, its output comes back.
	r, in := background(t, f.crictlCmd(t, "attach", "-i", shellID))
	time.Sleep(300 * time.Millisecond) // let the session connect before typing
	io.WriteString(in, "echo attached-ok\n")
	readUntil(t, r, "attached-ok")
	in.Close()
	mustContain(t, "shell log", f.crictl(t, "logs", shellID), "attached-ok")

	// port-forward reaches nginx in the pod; its access log shows the request.
	port := freePort(t)
	r, _ = background(t, f.crictlCmd(t, "port-forward", podID, strconv.Itoa(port)+":80"))
	readUntil(t, r, "Forwarding from")
	resp, err := http.Get("http://127.0.0.1:" + strconv.Itoa(port) + "/")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(body), "nginx") {
		t.Fatalf("port-forward to nginx: %d %q", resp.StatusCode, body)
	}
	time.Sleep(100 * time.Millisecond)
	mustContain(t, "nginx access log", f.crictl(t, "logs", webID), `"GET / HTTP/1.1" 200`)

	// A stop with a grace period ends the processes: busybox's sh on TERM (143), nginx cleanly on
	// its stop signal (QUIT: 0). crictl's default timeout 0 would KILL at once (137).
	f.crictl(t, "stop", "--timeout", "10", boxID)
	f.crictl(t, "stop", "--timeout", "10", webID)
	mustContain(t, "inspect box", f.crictl(t, "inspect", boxID), `"exitCode": 143`, `"reason": "Error"`)
	mustContain(t, "inspect web", f.crictl(t, "inspect", webID), `"exitCode": 0`, `"reason": "Completed"`)
	f.crictl(t, "stopp", podID)
	f.crictl(t, "rmp", podID)
}
