// Package main only anchors the node's wrapper module: `go mod tidy` keeps the requirements of the binaries it builds.
package main

import (
	_ "k8s.io/kubernetes/cmd/kube-scheduler/app"
	_ "k8s.io/kubernetes/cmd/kubelet/app"
)

func main() {}
