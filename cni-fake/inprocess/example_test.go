package inprocess_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/containernetworking/cni/libcni"
	current "github.com/containernetworking/cni/pkg/types/100"

	"github.com/plugsim/plugsim/cni-fake/inprocess"
)

// libcni runs cni-fake without a binary: the plugin directory can be empty.
func Example() {
	dir, _ := os.MkdirTemp("", "inprocess-example-")
	defer os.RemoveAll(dir)
	list, _ := libcni.NetworkConfFromBytes(fmt.Appendf(nil, `{"cniVersion": "1.1.0", "name": "example", "plugins": [
	  {"type": "cni-fake", "dataDir": %q, "ipam": {"type": "cni-fake", "subnet": "10.66.0.0/24"}}]}`, filepath.Join(dir, "data")))
	cni := libcni.NewCNIConfigWithCacheDir([]string{filepath.Join(dir, "bin")}, filepath.Join(dir, "cache"), inprocess.New())
	rt := &libcni.RuntimeConf{ContainerID: "pod1", NetNS: "/var/run/netns/pod1", IfName: "eth0"}
	res, err := cni.AddNetworkList(context.Background(), list, rt)
	if err != nil {
		panic(err)
	}
	r, _ := current.NewResultFromResult(res)
	fmt.Println(r.IPs[0].Address.String(), r.Interfaces[1].Name)
	fmt.Println(cni.DelNetworkList(context.Background(), list, rt))
	// Output:
	// 10.66.0.2/24 eth0
	// <nil>
}
