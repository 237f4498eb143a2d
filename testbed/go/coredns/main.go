// CoreDNS with only the plugins the test bed's Corefile uses (testbed/node/node.sh), in CoreDNS' own order
// (core/dnsserver/zdirectives.go): the kubernetes plugin answers cluster.local from the API server, forward sends
// the rest to the host's resolver. Leaving out the other plugins leaves out the cloud SDKs (AWS, Azure, Google) they
// import: a much smaller build.
package main

import (
	"github.com/coredns/coredns/core/dnsserver"
	"github.com/coredns/coredns/coremain"

	_ "github.com/coredns/coredns/plugin/bind"
	_ "github.com/coredns/coredns/plugin/cache"
	_ "github.com/coredns/coredns/plugin/errors"
	_ "github.com/coredns/coredns/plugin/forward"
	_ "github.com/coredns/coredns/plugin/kubernetes"
)

func init() {
	dnsserver.Directives = []string{"bind", "errors", "cache", "kubernetes", "forward"}
}

func main() {
	coremain.Run()
}
