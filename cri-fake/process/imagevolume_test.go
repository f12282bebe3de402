package process

import (
	"context"
	"strings"
	"testing"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// TestImageVolume: an image mounted in a container (CRI Mount.image), as the ImageVolume
// conformance spec and critest's Image Volume specs read it: its files at the container path
// (kitten's /data.json and its /etc/os-release), its programs runnable from there, writes refused
// (read-only), the image's /etc/passwd, and image_sub_path mounting one directory only.
func TestImageVolume(t *testing.T) {
	kitten := BaseLayer("busybox").AddFile("/data.json", []byte("{\n  \"image\": \"kitten.jpg\"\n}\n"), 0o644)
	sandbox := &runtimeapi.PodSandboxConfig{Metadata: &runtimeapi.PodSandboxMetadata{Name: "p"}}
	cfg := &runtimeapi.ContainerConfig{
		Command: []string{"sleep", "100000"},
		Mounts: []*runtimeapi.Mount{
			{ContainerPath: "/volume", Readonly: true, Image: &runtimeapi.ImageSpec{Image: "sha256:kitten"}},
			{ContainerPath: "/only/etc", Readonly: true, Image: &runtimeapi.ImageSpec{Image: "sha256:kitten"}, ImageSubPath: "etc"},
		},
	}
	img := ImageConfig{Cmd: []string{"sh"}, Volumes: map[string]*Layer{"sha256:kitten": kitten}}
	spec, err := FromCRI(cfg, sandbox, img, nil)
	if err != nil {
		t.Fatal(err)
	}
	p := startProc(t, spec)
	for _, c := range []struct{ cmd, want string }{
		{"cat /volume/data.json", "{\n  \"image\": \"kitten.jpg\"\n}\n"},
		{"grep -c ID= /volume/etc/os-release", "1\n"},
		{"ls -A /volume/bin/sh", "/volume/bin/sh\n"},
		{"/volume/bin/ls / | grep -c '^volume$'", "1\n"},
		{"touch /volume/x 2>&1; echo $?", "touch: /volume/x: Read-only file system\n1\n"},
		{"rm /volume/data.json 2>&1; echo $?", "rm: can't remove '/volume/data.json': Read-only file system\n1\n"},
		{"grep -c '^root:' /volume/etc/passwd", "1\n"},
		{"ls /only/etc/passwd; test -e /only/etc/etc || echo no-etc-below", "/only/etc/passwd\nno-etc-below\n"},
	} {
		out, errb, _, err := p.ExecSync(context.Background(), []string{"sh", "-c", c.cmd}, 0)
		if err != nil || string(out) != c.want {
			t.Errorf("%s: %q (stderr %q, %v), want %q", c.cmd, out, errb, err, c.want)
		}
	}

	for _, bad := range []struct {
		name string
		m    *runtimeapi.Mount
		img  map[string]*Layer
		want string
	}{
		{"not pulled", &runtimeapi.Mount{ContainerPath: "/v", Readonly: true, Image: &runtimeapi.ImageSpec{Image: "sha256:other"}}, img.Volumes, "is not pulled"},
		{"missing sub-path", &runtimeapi.Mount{ContainerPath: "/v", Readonly: true, Image: &runtimeapi.ImageSpec{Image: "sha256:kitten"}, ImageSubPath: "not-existing"}, img.Volumes, "not a directory of the image"},
		{"sub-path out of the image", &runtimeapi.Mount{ContainerPath: "/v", Readonly: true, Image: &runtimeapi.ImageSpec{Image: "sha256:kitten"}, ImageSubPath: "../etc"}, img.Volumes, "inside the image"},
	} {
		c := &runtimeapi.ContainerConfig{Command: []string{"sleep", "1"}, Mounts: []*runtimeapi.Mount{bad.m}}
		if _, err := FromCRI(c, sandbox, ImageConfig{Cmd: []string{"sh"}, Volumes: bad.img}, nil); err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("%s: %v, want an error with %q", bad.name, err, bad.want)
		}
	}
}
