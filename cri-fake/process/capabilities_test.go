package process

import (
	"strings"
	"testing"
)

// capsIdentity is root with containerd's default set changed by add and drop,
// as ResolveIdentity makes it from a CRI Capability.
func capsIdentity(add, drop []string) Identity {
	return Identity{Capabilities: EffectiveCapabilities(add, drop, false)}
}

// TestCapabilityEnforced makes each call that needs a capability twice: with
// the capability in the effective set it succeeds, without it it fails the
// way the real tool reports it. So a "cannot" outcome (critest's "Privileged
// is false", "dropping ALL capabilities") is the capability's doing, not a
// missing tool's.
func TestCapabilityEnforced(t *testing.T) {
	tests := []struct {
		name    string
		script  string
		with    Identity // the capability is there
		without Identity // the same identity without it
		// stdout when it succeeds; stdout, stderr and exit code when it does not.
		okOut             string
		deniedOut, denied string
		deniedCode        int
	}{
		{name: "CAP_NET_ADMIN brctl addbr", script: "brctl addbr foobar && brctl show | grep -c foobar",
			with: capsIdentity([]string{"NET_ADMIN"}, nil), without: capsIdentity(nil, nil),
			okOut: "1\n", denied: "brctl: bridge foobar: Operation not permitted\n", deniedCode: 1},
		{name: "privileged brctl addbr", script: "brctl addbr foobar && brctl show | grep -c foobar",
			with: Identity{Privileged: true}, without: capsIdentity(nil, nil),
			okOut: "1\n", denied: "brctl: bridge foobar: Operation not permitted\n", deniedCode: 1},
		{name: "CAP_NET_ADMIN ip link add", script: "ip link add dummy0 type dummy && ip link show dummy0 | cut -d' ' -f2-",
			with: capsIdentity([]string{"NET_ADMIN"}, nil), without: capsIdentity(nil, nil),
			okOut: "dummy0: <BROADCAST,MULTICAST> (dummy)\n", denied: "ip: RTNETLINK answers: Operation not permitted\n", deniedCode: 2},
		{name: "CAP_NET_RAW ping", script: "ping -c 1 127.0.0.1 | head -2",
			with: capsIdentity(nil, nil), without: capsIdentity(nil, []string{"NET_RAW"}),
			okOut:     "PING 127.0.0.1 (127.0.0.1): 56 data bytes\n64 bytes from 127.0.0.1: seq=0 ttl=64 time=",
			deniedOut: "PING 127.0.0.1 (127.0.0.1): 56 data bytes\n", denied: "ping: permission denied (are you root?)\n", deniedCode: 0},
		{name: "CAP_NET_RAW ping exit code", script: "ping -c 1 -q localhost >/dev/null",
			with: capsIdentity(nil, nil), without: capsIdentity(nil, []string{"ALL"}),
			denied: "ping: permission denied (are you root?)\n", deniedCode: 1},
		{name: "CAP_CHOWN chown", script: "touch /tmp/f && chown 1000:1000 /tmp/f && stat -c %u:%g /tmp/f",
			with: capsIdentity(nil, nil), without: capsIdentity(nil, []string{"CHOWN"}),
			okOut: "1000:1000\n", denied: "chown: /tmp/f: Operation not permitted\n", deniedCode: 1},
		{name: "CAP_MKNOD mknod", script: "mknod /tmp/null c 1 3 && ls -l /tmp/null | cut -c1",
			with: capsIdentity(nil, nil), without: capsIdentity(nil, []string{"MKNOD"}),
			okOut: "c\n", denied: "mknod: /tmp/null: Operation not permitted\n", deniedCode: 1},
		{name: "CAP_SYS_ADMIN sethostname", script: "hostname renamed && hostname",
			with: capsIdentity([]string{"SYS_ADMIN"}, nil), without: capsIdentity(nil, nil),
			okOut: "renamed\n", denied: "hostname: sethostname: Operation not permitted\n", deniedCode: 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			out, errOut, code := runCmd(t, Spec{Args: []string{"sh", "-c", tc.script}, FS: newFS(t, FSConfig{Hostname: "h"}), Identity: tc.with})
			if !strings.HasPrefix(out, tc.okOut) || errOut != "" || code != 0 {
				t.Errorf("with the capability: stdout %q stderr %q code %d, want stdout %q, no stderr, code 0", out, errOut, code, tc.okOut)
			}
			out, errOut, code = runCmd(t, Spec{Args: []string{"sh", "-c", tc.script}, FS: newFS(t, FSConfig{Hostname: "h"}), Identity: tc.without})
			if out != tc.deniedOut || errOut != tc.denied || code != tc.deniedCode {
				t.Errorf("without it: stdout %q stderr %q code %d, want %q %q code %d", out, errOut, code, tc.deniedOut, tc.denied, tc.deniedCode)
			}
		})
	}
}

// TestChownRules: without CAP_CHOWN a file's owner may still change its group
// to one of its own groups, and nothing else (chown(2)).
func TestChownRules(t *testing.T) {
	id := Identity{UID: 1000, GID: 1000, AdditionalGIDs: []int{2000}}
	out, errOut, code := runCmd(t, Spec{Args: []string{"sh", "-c",
		"touch /tmp/f && chgrp 2000 /tmp/f && stat -c %g /tmp/f; chgrp 3000 /tmp/f; chown 0 /tmp/f; chown 1000 /etc/passwd"},
		FS: newFS(t, FSConfig{}), Identity: id})
	want := "chgrp: /tmp/f: Operation not permitted\nchown: /tmp/f: Operation not permitted\nchown: /etc/passwd: Operation not permitted\n"
	if out != "2000\n" || errOut != want || code != 1 {
		t.Errorf("stdout %q stderr %q code %d, want 2000, %q, 1", out, errOut, code, want)
	}
}

// TestBindBelowUnprivilegedPortStart: a port below the namespace's
// net.ipv4.ip_unprivileged_port_start needs CAP_NET_BIND_SERVICE; nginx
// reports the EACCES as it does. containerd 2's default of 0 lets any port be
// bound.
func TestBindBelowUnprivilegedPortStart(t *testing.T) {
	cfg := FSConfig{Image: BaseLayer("nginx"), Sysctls: map[string]string{"net.ipv4.ip_unprivileged_port_start": "1024"}}
	nginx := []string{"nginx", "-g", "daemon off;"}
	out, errOut, code := runCmd(t, Spec{Args: nginx, FS: newFS(t, cfg), Identity: capsIdentity(nil, []string{"NET_BIND_SERVICE"}), Listen: (&loopbackListen{}).listen})
	if want := "nginx: [emerg] bind() to 0.0.0.0:80 failed (13: Permission denied)\n"; errOut != want || code != 1 {
		t.Errorf("without CAP_NET_BIND_SERVICE: stdout %q stderr %q code %d, want %q code 1", out, errOut, code, want)
	}
	for name, spec := range map[string]Spec{
		"with CAP_NET_BIND_SERVICE": {Args: nginx, FS: newFS(t, cfg), Identity: capsIdentity(nil, nil)},
		"with the default sysctl":   {Args: nginx, FS: newFS(t, FSConfig{Image: BaseLayer("nginx")}), Identity: capsIdentity(nil, []string{"ALL"})},
	} {
		ll := &loopbackListen{}
		spec.Listen = ll.listen
		startProc(t, spec)
		waitFor(t, "nginx "+name+" to listen on :80", func() bool { return ll.addr(":80") != "" })
	}
}

// TestSetuidAndNoNewPrivs: the nonewprivs image's set-user-ID-root program
// runs as root for uid 1000, unless no_new_privs is set (whether it is run by
// the runtime, spawned by a shell, or exec'd by it); /proc/self/status shows
// NoNewPrivs and the effective uid.
func TestSetuidAndNoNewPrivs(t *testing.T) {
	img := ImageConfig{Cmd: []string{"nnp"}, Behavior: []byte(`{"executables":{"/usr/local/bin/nnp":"nnp"},"setuid":["/usr/local/bin/nnp"]}`)}
	layer, err := ImageLayer(img)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args       []string
		nnp        bool
		want, errs string
	}{
		{args: []string{"nnp"}, want: "Effective uid: 0\n"},
		{args: []string{"nnp"}, nnp: true, want: "Effective uid: 1000\n"},
		{args: []string{"sh", "-c", "nnp; id -u"}, want: "Effective uid: 0\n1000\n"},
		{args: []string{"sh", "-c", "exec nnp"}, want: "Effective uid: 0\n"},
		{args: []string{"sh", "-c", "exec nnp"}, nnp: true, want: "Effective uid: 1000\n"},
		{args: []string{"sh", "-c", "ls -l /usr/local/bin/nnp | cut -c1-10; grep -E '^(Uid|NoNewPrivs)' /proc/self/status"}, nnp: true,
			want: "-rwsr-xr-x\nUid:\t1000\t1000\t1000\t1000\nNoNewPrivs:\t1\n"},
	} {
		id := Identity{UID: 1000, GID: 1000, NoNewPrivs: tc.nnp}
		out, errOut, code := runCmd(t, Spec{Args: tc.args, FS: newFS(t, FSConfig{Image: layer}), Identity: id})
		if out != tc.want || errOut != tc.errs || code != 0 {
			t.Errorf("%q no_new_privs=%v: stdout %q stderr %q code %d, want %q", tc.args, tc.nnp, out, errOut, code, tc.want)
		}
	}
}

// TestMknodNodes: the nodes mknod makes are listed with their type, a FIFO
// needs no capability, and opening a device or FIFO is ENXIO (no device is
// simulated).
func TestMknodNodes(t *testing.T) {
	_, errOut, code := runCmd(t, Spec{Args: []string{"sh", "-c", "mknod /tmp/b b 7 0 && mknod /tmp/p p"},
		FS: newFS(t, FSConfig{}), Identity: capsIdentity(nil, []string{"MKNOD"})})
	if want := "mknod: /tmp/b: Operation not permitted\n"; errOut != want || code != 1 {
		t.Errorf("without CAP_MKNOD: stderr %q code %d, want %q", errOut, code, want)
	}
	out, errOut, code := runCmd(t, Spec{Args: []string{"sh", "-c",
		"mknod /tmp/b b 7 0 && mknod -m 600 /tmp/p p && ls -l /tmp/b /tmp/p | cut -c1-10; cat /tmp/b; echo x > /tmp/p"},
		FS: newFS(t, FSConfig{}), Identity: capsIdentity(nil, nil)})
	wantErr := "cat: can't open '/tmp/b': No such device or address\nsh: can't create /tmp/p: No such device or address\n"
	if out != "brw-r--r--\nprw-------\n" || errOut != wantErr || code != 1 {
		t.Errorf("stdout %q stderr %q code %d, want the two nodes listed and %q", out, errOut, code, wantErr)
	}
}
