package process

import "testing"

// TestMountInContainer: mount --bind needs CAP_SYS_ADMIN, which a privileged
// container has and the default set lacks; the bind shows its source until
// umount, and /proc/self/mountinfo lists it meanwhile.
func TestMountInContainer(t *testing.T) {
	tests := []struct {
		name           string
		id             Identity
		script         string
		stdout, stderr string
		code           int
	}{
		{"privileged binds and unmounts", Identity{Privileged: true},
			"mkdir /x && mount --bind /etc /x && cat /x/hostname && grep -c ' /etc /x ' /proc/self/mountinfo && umount /x && ls -A /x && echo empty",
			"web-1\n1\nempty\n", "", 0},
		{"CAP_SYS_ADMIN added", Identity{Capabilities: EffectiveCapabilities([]string{"SYS_ADMIN"}, nil, false)},
			"mkdir /x && mount -o bind /etc /x && cat /x/hostname", "web-1\n", "", 0},
		{"default capabilities", Identity{Capabilities: EffectiveCapabilities(nil, nil, false)},
			"mkdir /x && mount --bind /etc /x", "", "mount: permission denied (are you root?)\n", 1},
		{"umount without CAP_SYS_ADMIN", Identity{Capabilities: EffectiveCapabilities(nil, nil, false)},
			"umount /etc", "", "umount: can't unmount /etc: Operation not permitted\n", 1},
		{"not a mount point", Identity{Privileged: true}, "umount /etc", "", "umount: can't unmount /etc: Invalid argument\n", 1},
		{"missing mount point", Identity{Privileged: true}, "mount --bind /etc /nowhere", "", "mount: mounting /etc on /nowhere failed: No such file or directory\n", 1},
		{"a file system", Identity{Privileged: true}, "mkdir /x && mount -t tmpfs tmpfs /x", "", "mount: mounting tmpfs on /x failed: only bind mounts are simulated\n", 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			fsys := newFS(t, FSConfig{Image: BaseLayer("busybox"), Hostname: "web-1"})
			out, errOut, code := runCmd(t, Spec{Args: []string{"sh", "-c", tc.script}, FS: fsys, Hostname: "web-1", Identity: tc.id})
			if out != tc.stdout || errOut != tc.stderr || code != tc.code {
				t.Errorf("stdout %q stderr %q code %d, want %q %q %d", out, errOut, code, tc.stdout, tc.stderr, tc.code)
			}
		})
	}
}
