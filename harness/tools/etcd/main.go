// Command etcd is etcd v3.6.16's server, the store behind `harness cluster up`'s kube-apiserver. It is what
// etcd's own main (go.etcd.io/etcd/server/v3/main.go) runs: etcdmain.Main with the process's arguments.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() { etcdmain.Main(os.Args) }
