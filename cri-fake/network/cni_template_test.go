package network

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
)

func TestParsePodCIDRs(t *testing.T) {
	for _, tc := range []struct {
		in      string
		want    ConfTemplateData
		invalid bool
	}{
		{in: "10.244.1.0/24", want: ConfTemplateData{PodCIDR: "10.244.1.0/24", PodCIDRRanges: []string{"10.244.1.0/24"}, Routes: []string{"0.0.0.0/0"}}},
		// Dual-stack: the kubelet joins node.spec.podCIDRs with ","; spaces are trimmed as
		// containerd trims them, and the routes keep the v4-then-v6 order whatever the input's.
		{in: "fd00:10:244:1::/64, 10.244.1.0/24", want: ConfTemplateData{PodCIDR: "fd00:10:244:1::/64", PodCIDRRanges: []string{"fd00:10:244:1::/64", "10.244.1.0/24"}, Routes: []string{"0.0.0.0/0", "::/0"}}},
		{in: "fd00::/64", want: ConfTemplateData{PodCIDR: "fd00::/64", PodCIDRRanges: []string{"fd00::/64"}, Routes: []string{"::/0"}}},
		{in: "10.244.1.0", invalid: true},
		{in: "10.244.1.0/24,", invalid: true},
		{in: `10.0.0.0/8","x":"`, invalid: true}, // would break out of a JSON string in the template
		{in: "10.244.1.0/33", invalid: true},
	} {
		got, err := ParsePodCIDRs(tc.in)
		if tc.invalid {
			if !errors.Is(err, ErrInvalidPodCIDR) {
				t.Errorf("ParsePodCIDRs(%q) = %+v, %v; want ErrInvalidPodCIDR", tc.in, got, err)
			}
			continue
		}
		if err != nil || !reflect.DeepEqual(got, tc.want) {
			t.Errorf("ParsePodCIDRs(%q) = %+v, %v; want %+v", tc.in, got, err, tc.want)
		}
	}
}

// confTemplate is the shape of containerd's documented example: one range per pod CIDR, one route
// per family.
const confTemplate = `{"cniVersion":"1.0.0","name":"tmpl","plugins":[{"type":"recorder","ipam":{"type":"host-local",
"ranges":[{{range $i, $r := .PodCIDRRanges}}{{if $i}},{{end}}[{"subnet":"{{$r}}"}]{{end}}],
"routes":[{{range $i, $r := .Routes}}{{if $i}},{{end}}{"dst":"{{$r}}"}{{end}}]}},
{"type":"portmap","capabilities":{"portMappings":true},"podCIDR":"{{.PodCIDR}}"}]}`

func writeTemplate(t testing.TB, text string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "template.conflist")
	if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// confDirNames lists the conf directory, temporary files included.
func confDirNames(t testing.TB, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	return names
}

func TestConfTemplateRenderedOnPodCIDR(t *testing.T) {
	// The conf dir does not exist yet: containerd creates it (0755) before writing.
	conf := filepath.Join(t.TempDir(), "net.d")
	var logs []string
	c := NewCNI(CNIOptions{ConfDir: conf, BinDirs: []string{t.TempDir()}, CacheDir: t.TempDir(),
		ConfTemplate: writeTemplate(t, confTemplate),
		Logf:         func(f string, a ...any) { logs = append(logs, f) }})
	if err := c.Ready(); err != ErrCNINotInitialized {
		t.Fatalf("before the pod CIDR: Ready() = %v", err)
	}
	if err := c.SetPodCIDR("10.244.1.0/24,fd00:10:244:1::/64"); err != nil {
		t.Fatal(err)
	}
	if names := confDirNames(t, conf); !reflect.DeepEqual(names, []string{ConfTemplateFileName}) {
		t.Fatalf("conf dir holds %v, want only %s", names, ConfTemplateFileName)
	}
	fi, err := os.Stat(filepath.Join(conf, ConfTemplateFileName))
	if err != nil || fi.Mode().Perm() != 0o644 {
		t.Fatalf("rendered file: %v, %v; want mode 0644", fi, err)
	}
	if err := c.Ready(); err != nil {
		t.Fatalf("after rendering: Ready() = %v (%v)", err, c.LoadError())
	}
	list, _ := c.current()
	ipam := string(list.Plugins[0].Bytes)
	for _, want := range []string{`[{"subnet":"10.244.1.0/24"}],[{"subnet":"fd00:10:244:1::/64"}]`, `{"dst":"0.0.0.0/0"},{"dst":"::/0"}`} {
		if !strings.Contains(ipam, want) {
			t.Errorf("first plugin %s lacks %s", ipam, want)
		}
	}
	if !strings.Contains(string(list.Plugins[1].Bytes), `"podCIDR":"10.244.1.0/24"`) {
		t.Errorf("second plugin %s: .PodCIDR is not the first CIDR", list.Plugins[1].Bytes)
	}
	if info := c.Info(); !strings.Contains(info["cniconfig"], `"PodCIDR":"10.244.1.0/24,fd00:10:244:1::/64"`) {
		t.Errorf("Info does not show the pod CIDRs: %s", info["cniconfig"])
	}

	// A later CIDR change leaves the loaded config alone, as containerd skips the template once
	// the network plugin is ready.
	before, _ := os.ReadFile(filepath.Join(conf, ConfTemplateFileName))
	if err := c.SetPodCIDR("10.99.0.0/24"); err != nil {
		t.Fatal(err)
	}
	after, _ := os.ReadFile(filepath.Join(conf, ConfTemplateFileName))
	if string(before) != string(after) {
		t.Errorf("a ready network's config was re-rendered:\n%s", after)
	}
	if len(logs) != 2 || !strings.HasPrefix(logs[0], "Generating cni config") || !strings.HasPrefix(logs[1], "CNI config is successfully loaded, skip") {
		t.Errorf("logs %q", logs)
	}
}

func TestConfTemplateNotRendered(t *testing.T) {
	for _, tc := range []struct {
		name     string
		template string // "" = no --cni-conf-template
		existing string // a config already in the conf dir
		cidr     string
		wantErr  string
		invalid  bool
	}{
		{name: "no template writes nothing", cidr: "10.244.1.0/24"},
		{name: "a config already there wins", template: confTemplate, existing: `{"cniVersion":"1.0.0","name":"calico","plugins":[{"type":"recorder"}]}`, cidr: "10.244.1.0/24"},
		{name: "invalid pod CIDR", template: confTemplate, cidr: "10.244.1.0/24,garbage", invalid: true},
		{name: "template fails to execute", template: `{"x":"{{.NoSuchField}}"}`, cidr: "10.244.1.0/24", wantErr: "failed to generate cni config file"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			conf := t.TempDir()
			if tc.existing != "" {
				if err := os.WriteFile(filepath.Join(conf, "05-calico.conflist"), []byte(tc.existing), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			opts := CNIOptions{ConfDir: conf, BinDirs: []string{t.TempDir()}, CacheDir: t.TempDir()}
			if tc.template != "" {
				opts.ConfTemplate = writeTemplate(t, tc.template)
			}
			c := NewCNI(opts)
			err := c.SetPodCIDR(tc.cidr)
			switch {
			case tc.invalid:
				if !errors.Is(err, ErrInvalidPodCIDR) {
					t.Fatalf("SetPodCIDR(%q) = %v, want ErrInvalidPodCIDR", tc.cidr, err)
				}
			case tc.wantErr != "":
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("SetPodCIDR = %v, want %q", err, tc.wantErr)
				}
			case err != nil:
				t.Fatal(err)
			}
			for _, n := range confDirNames(t, conf) {
				if n != "05-calico.conflist" {
					t.Errorf("conf dir holds %s", n)
				}
			}
			if (c.Ready() == nil) != (tc.existing != "") {
				t.Errorf("Ready() = %v with existing config %v", c.Ready(), tc.existing != "")
			}
		})
	}
}

// Updates racing each other render the file once and leave no temporary file behind.
func TestConfTemplateConcurrentUpdates(t *testing.T) {
	conf := t.TempDir()
	var mu sync.Mutex
	generated := 0
	c := NewCNI(CNIOptions{ConfDir: conf, BinDirs: []string{t.TempDir()}, CacheDir: t.TempDir(),
		ConfTemplate: writeTemplate(t, confTemplate),
		Logf: func(f string, a ...any) {
			if strings.HasPrefix(f, "Generating") {
				mu.Lock()
				generated++
				mu.Unlock()
			}
		}})
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			if err := c.SetPodCIDR("10.244.7.0/24"); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if names := confDirNames(t, conf); !reflect.DeepEqual(names, []string{ConfTemplateFileName}) || generated != 1 {
		t.Fatalf("conf dir %v after %d renderings; want only %s, rendered once", names, generated, ConfTemplateFileName)
	}
}

func TestCheckConfTemplate(t *testing.T) {
	if err := CheckConfTemplate(writeTemplate(t, confTemplate)); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{filepath.Join(t.TempDir(), "missing"), writeTemplate(t, `{{range}`)} {
		if err := CheckConfTemplate(p); err == nil || !strings.Contains(err.Error(), "failed to parse cni config template") {
			t.Errorf("CheckConfTemplate(%s) = %v", p, err)
		}
	}
}
