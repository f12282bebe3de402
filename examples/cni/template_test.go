// Package cni_test keeps pod-cidr.conflist.tmpl working: it renders through cri-fake's
// --cni-conf-template path into a config libcni loads, with the pod CIDR as cni-fake's range.
package cni_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/containernetworking/cni/libcni"

	"github.com/plugsim/plugsim/cri-fake/network"
)

func TestPodCIDRTemplate(t *testing.T) {
	// Valid JSON before rendering, too: the template's only action sits inside a string, so a
	// cluster can give each node its own dataDir and logFile by editing it as JSON (cni-fake's
	// leases and GC must not be shared between nodes).
	raw, err := os.ReadFile("pod-cidr.conflist.tmpl")
	if err != nil {
		t.Fatal(err)
	}
	if !json.Valid(raw) {
		t.Fatal("pod-cidr.conflist.tmpl is not valid JSON before rendering")
	}

	conf := t.TempDir()
	c := network.NewCNI(network.CNIOptions{ConfDir: conf, BinDirs: []string{t.TempDir()}, CacheDir: t.TempDir(), ConfTemplate: "pod-cidr.conflist.tmpl"})
	if err := c.SetPodCIDR("10.244.2.0/24"); err != nil {
		t.Fatal(err)
	}
	if err := c.Ready(); err != nil {
		t.Fatalf("rendered template does not load: %v", c.LoadError())
	}
	list, err := libcni.ConfListFromFile(filepath.Join(conf, network.ConfTemplateFileName))
	if err != nil {
		t.Fatal(err)
	}
	if len(list.Plugins) != 2 || list.Plugins[0].Network.Type != "cni-fake" || list.Plugins[1].Network.Type != "portmap" ||
		!list.Plugins[1].Network.Capabilities["portMappings"] {
		t.Fatalf("chain %s: want cni-fake, then portmap with the portMappings capability", list.Bytes)
	}
	var first struct {
		Mode string `json:"mode"`
		IPAM struct {
			Type   string `json:"type"`
			Ranges [][]struct {
				Subnet string `json:"subnet"`
			} `json:"ranges"`
		} `json:"ipam"`
	}
	if err := json.Unmarshal(list.Plugins[0].Bytes, &first); err != nil {
		t.Fatal(err)
	}
	if first.Mode != "veth" || first.IPAM.Type != "cni-fake" || len(first.IPAM.Ranges) != 1 || len(first.IPAM.Ranges[0]) != 1 ||
		first.IPAM.Ranges[0][0].Subnet != "10.244.2.0/24" {
		t.Fatalf("cni-fake entry %s: want veth mode, its own IPAM over the pod CIDR 10.244.2.0/24", list.Plugins[0].Bytes)
	}
}
