// Command etcd is the etcd server at the version the pinned Kubernetes release was tested
// with, built from go.etcd.io/etcd/server/v3 because no release download is available.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() {
	etcdmain.Main(os.Args)
}
