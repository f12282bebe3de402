package process

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
)

// TestBusyboxAsTheSpecsRunIt runs the busybox image's commands as the [Conformance] specs do
// and checks the exact texts they match (each case names the spec file).
func TestBusyboxAsTheSpecsRunIt(t *testing.T) {
	// configmap_volume.go "binary data": the kubelet writes BinaryData dump.bin on the host.
	cm := t.TempDir()
	ts := filepath.Join(cm, "..2024_01_01_00_00_00.1")
	os.Mkdir(ts, 0o755)
	os.WriteFile(filepath.Join(ts, "dump.bin"), []byte{0xde, 0xca, 0xfe, 0xba, 0xd0, 0xfe, 0xff}, 0o644)
	os.Symlink("..2024_01_01_00_00_00.1", filepath.Join(cm, "..data"))
	os.Symlink("..data/dump.bin", filepath.Join(cm, "dump.bin"))
	data := t.TempDir()
	os.WriteFile(filepath.Join(data, "foo"), nil, 0o644)
	tests := []struct {
		name   string
		args   []string
		cfg    FSConfig
		id     Identity
		env    []string
		code   int
		stdout string // regexp over stdout and stderr, in that order
	}{
		// common/node/kubelet.go:214 (the log must equal this).
		{name: "read-only root", args: []string{"/bin/sh", "-c", "echo test > /file"}, cfg: FSConfig{ReadonlyRootfs: true}, code: 1,
			stdout: "^/bin/sh: can't create /file: Read-only file system\n$"},
		// common/node/security_context.go:568-600.
		{name: "writable root", args: []string{"sh", "-c", "touch checkfile"}, stdout: `^$`},
		{name: "read-only root touch", args: []string{"sh", "-c", "touch checkfile"}, cfg: FSConfig{ReadonlyRootfs: true}, code: 1,
			stdout: "^touch: checkfile: Read-only file system\n$"},
		// security_context.go:629-651: unprivileged, the default capabilities lack NET_ADMIN.
		{name: "ip link add unprivileged", args: []string{"sh", "-c", "ip link add dummy0 type dummy || true"},
			stdout: "^ip: RTNETLINK answers: Operation not permitted\n$"},
		{name: "ip link add privileged", args: []string{"sh", "-c", "ip link add dummy0 type dummy || true"}, id: Identity{Privileged: true}, stdout: `^$`},
		// common/node/sysctl.go:89,199 with the pod's sysctl set (the runtime passes it in the
		// sandbox config; FSConfig.Sysctls here).
		{name: "sysctl with dots", args: []string{"/bin/sysctl", "kernel.shm_rmid_forced"}, cfg: FSConfig{Sysctls: map[string]string{"kernel.shm_rmid_forced": "1"}},
			stdout: "^kernel\\.shm_rmid_forced = 1\n$"},
		{name: "sysctl with slashes", args: []string{"/bin/sysctl", "kernel/shm_rmid_forced"}, cfg: FSConfig{Sysctls: map[string]string{"kernel/shm_rmid_forced": "1"}},
			stdout: "^kernel\\.shm_rmid_forced = 1\n$"},
		// common/storage/configmap_volume.go:223,256: hexdump -C of the binary key.
		{name: "hexdump -C", args: []string{"hexdump", "-C", "/etc/configmap-volume/dump.bin"},
			cfg:    FSConfig{Mounts: []Mount{{ContainerPath: "/etc/configmap-volume", HostPath: cm, Readonly: true}}},
			stdout: "^00000000  de ca fe ba d0 fe ff                              \\|.......\\|\n00000007\n$"},
		// common/node/downwardapi.go:179.
		{name: "[[ == ]] equal", args: []string{"sh", "-c", `[[ "${HOST_IP:?}" == "${POD_IP:?}" ]] && echo 'OK' || echo "HOST_IP: '${HOST_IP}' != POD_IP: '${POD_IP}'"`},
			env: []string{"HOST_IP=10.0.0.1", "POD_IP=10.0.0.1"}, stdout: "^OK\n$"},
		{name: "[[ == ]] different", args: []string{"sh", "-c", `[[ "${HOST_IP:?}" == "${POD_IP:?}" ]] && echo 'OK' || echo "HOST_IP: '${HOST_IP}' != POD_IP: '${POD_IP}'"`},
			env: []string{"HOST_IP=10.0.0.1", "POD_IP=10.244.0.5"}, stdout: "^HOST_IP: '10\\.0\\.0\\.1' != POD_IP: '10\\.244\\.0\\.5'\n$"},
		// apps/daemon_set.go:547 (agnhost's Alpine: /var/tmp exists).
		{name: "readiness probe of the daemon set", args: []string{"/bin/sh", "-ec", `touch /var/tmp/ready; [[ "$( cat /var/tmp/ready )" == "" ]]`},
			cfg: FSConfig{Image: BaseLayer("agnhost")}, stdout: `^$`},
		// framework/job/fixtures.go:108-162.
		{name: "[[ -r ]]", args: []string{"sh", "-c", "if [[ -r /data/foo ]]\nthen\n\texit 0\nelse\n\ttouch /data/foo\n\texit 1\nfi"},
			cfg: FSConfig{Mounts: []Mount{{ContainerPath: "/data", HostPath: data}}}, stdout: `^$`},
		{name: "$RANDOM exit", args: []string{"/bin/sh", "-c", "exit $(( $RANDOM / 16384 ))"}, stdout: `^$`, code: -1},
		{name: "$RANDOM range", args: []string{"sh", "-c", "i=0; while [ $i -lt 200 ]; do r=$RANDOM; [ $r -ge 0 ] && [ $r -le 32767 ] || echo bad $r; i=$((i+1)); done; [ $RANDOM != $RANDOM ] || [ $RANDOM != $RANDOM ] && echo varies"},
			stdout: "^varies\n$"},
		{name: "expr in the indexed job", args: []string{"sh", "-c", "if [ $(expr ${JOB_COMPLETION_INDEX} % 2) -ne 0 ]; then exit 1; fi"}, env: []string{"JOB_COMPLETION_INDEX=3"}, code: 1, stdout: `^$`},
		{name: "expr forms", args: []string{"sh", "-c", "expr 7 + 5; expr 7 % 2; expr 3 \\* 4; expr abc : 'a\\(.\\)'; expr length hello; expr 2 \\< 10; expr substr hello 2 3; expr index hello l; expr 0; echo $?; expr 1 / 0; echo $?"},
			stdout: "^12\n1\n12\nb\n5\n1\nell\n3\n0\n1\nexpr: division by zero\n2\n$"},
		// node/kubelet.go:668, common/node/expansion.go:264: tail -f /dev/null never ends.
		{name: "tail -f", args: []string{"sh", "-c", "echo out1; echo err1 >&2; tail -f /dev/null"}, code: -2, stdout: "^out1\nerr1\n$"},
		// security_context.go: id.
		{name: "id", args: []string{"sh", "-c", "id -u; id -g; id"}, id: Identity{UID: 1001, GID: 2002}, stdout: "^1001\n2002\nuid=1001 gid=2002 groups=2002\n$"},
		// common/node/runtime.go:90, the restart counter: wc -l's count through awk, the quotes as the spec has them.
		{name: "awk after wc -l", args: []string{"sh", "-c", "f=/tmp/restartCount; count=$(echo 'hello' >> $f ; wc -l $f | awk {'print $1'}); echo $count; count=$(echo 'hello' >> $f ; wc -l $f | awk {'print $1'}); [ $count -eq 2 ] && echo two"},
			stdout: "^1\ntwo\n$"},
		// common/storage/empty_dir.go:390: a column of df.
		{name: "awk a column", args: []string{"sh", "-c", "printf 'a 1 x\nb  2\ty\n' | awk '{print $2}'"}, stdout: "^1\n2\n$"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			fsys := newFS(t, tc.cfg)
			var out syncBuffer
			p := startProc(t, Spec{Args: tc.args, FS: fsys, Identity: tc.id, Env: tc.env, Stdout: &out, Stderr: &out})
			var code int
			switch tc.code {
			case -2: // runs until killed: a kill ends it with 137, not its own exit code
				waitFor(t, "output", func() bool { return regexp.MustCompile(tc.stdout).MatchString(out.String()) })
				p.Signal(syscall.SIGKILL)
				if code := p.Wait(); code != 137 {
					t.Errorf("%q ended by itself with %d: %q", tc.args, code, out.String())
				}
				return
			default:
				code = p.Wait()
			}
			if (tc.code >= 0 && code != tc.code) || (tc.code == -1 && code != 0 && code != 1) || !regexp.MustCompile(tc.stdout).MatchString(out.String()) {
				t.Errorf("%q: code %d (want %d) output %q (want %q)", tc.args, code, tc.code, out.String(), tc.stdout)
			}
		})
	}
}

// TestWgetPostData: node/pre_stop.go:84, busybox's wget -O- --post-data to agnhost nettest's
// /write, which then shows the source in /read.
func TestWgetPostData(t *testing.T) {
	_, _, ll := agnhostServer(t, []string{"nettest"}, nil, nil)
	waitFor(t, "listener", func() bool { return ll.addr(":8080") != "" })
	out, errOut, code := runCmd(t, Spec{Args: []string{"wget", "-O-", `--post-data={"Source": "prestop"}`, "http://" + ll.addr(":8080") + "/write"}, FS: newFS(t, FSConfig{})})
	if code != 0 || out != "{\"Hostname\":\"srv-1\"}\n" || !strings.Contains(errOut, "writing to stdout") {
		t.Errorf("code %d stdout %q stderr %q", code, out, errOut)
	}
	resp, err := http.Get("http://" + ll.addr(":8080") + "/read")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var b strings.Builder
	fmt.Fprint(&b, resp.Header)
	body := make([]byte, 4096)
	n, _ := resp.Body.Read(body)
	if !strings.Contains(string(body[:n]), "\"prestop\": 1") {
		t.Errorf("/read: %s", body[:n])
	}
}
