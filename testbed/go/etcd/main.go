// Package main only anchors the wrapper module: `go mod tidy` keeps the requirements of etcd's server.
package main

import (
	_ "go.etcd.io/etcd/server/v3/etcdmain"
)

func main() {}
