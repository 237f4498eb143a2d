// argocd-health evaluates an Argo CD resource health check (Lua) with Argo CD's own code: util/lua of
// github.com/argoproj/argo-cd/v3, the VM the application controller runs a health customization in (gopher-lua with
// Argo CD's safe libraries, its one-second timeout, its JSON encoding of the object and its validation of the result).
//
//	argocd-health --script FILE
//
// reads one JSON object per line on stdin and writes one JSON line per object on stdout:
// {"status": "...", "message": "..."}, or {"error": "..."} when the object or the script fails. One process answers
// any number of objects, so a test keeps it open.
//
// The script is installed the way an argocd-cm customization (resource.customizations.health.<group>_<Kind>) is:
// as the resource override of the object's group and kind, with the standard libraries off (useOpenLibs false),
// and evaluated through ResourceHealthOverrides.GetResourceHealth, the path the controller takes.
package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"os"

	appv1 "github.com/argoproj/argo-cd/v3/pkg/apis/application/v1alpha1"
	"github.com/argoproj/argo-cd/v3/util/lua"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

type answer struct {
	Status  string `json:"status,omitempty"`
	Message string `json:"message,omitempty"`
	Error   string `json:"error,omitempty"`
}

func evaluate(line []byte, script string) answer {
	obj := &unstructured.Unstructured{}
	if err := obj.UnmarshalJSON(line); err != nil {
		return answer{Error: fmt.Sprintf("not a Kubernetes object: %v", err)}
	}
	overrides := lua.ResourceHealthOverrides{
		lua.GetConfigMapKey(obj.GroupVersionKind()): appv1.ResourceOverride{HealthLua: script},
	}
	hs, err := overrides.GetResourceHealth(obj)
	if err != nil {
		return answer{Error: err.Error()}
	}
	if hs == nil {
		return answer{Error: "no health script for " + lua.GetConfigMapKey(obj.GroupVersionKind())}
	}
	return answer{Status: string(hs.Status), Message: hs.Message}
}

func main() {
	scriptPath := flag.String("script", "", "the health check's Lua file")
	flag.Parse()
	if *scriptPath == "" || flag.NArg() != 0 {
		fmt.Fprintln(os.Stderr, "usage: argocd-health --script FILE < objects (one JSON object per line)")
		os.Exit(2)
	}
	script, err := os.ReadFile(*scriptPath)
	if err != nil {
		fmt.Fprintln(os.Stderr, "argocd-health:", err)
		os.Exit(1)
	}
	in := bufio.NewScanner(os.Stdin)
	in.Buffer(make([]byte, 0, 1<<20), 64<<20)
	out := bufio.NewWriter(os.Stdout)
	enc := json.NewEncoder(out)
	enc.SetEscapeHTML(false)
	for in.Scan() {
		if len(in.Bytes()) == 0 {
			continue
		}
		if err := enc.Encode(evaluate(in.Bytes(), string(script))); err != nil {
			fmt.Fprintln(os.Stderr, "argocd-health:", err)
			os.Exit(1)
		}
		if err := out.Flush(); err != nil {
			os.Exit(1)
		}
	}
	if err := in.Err(); err != nil {
		fmt.Fprintln(os.Stderr, "argocd-health:", err)
		os.Exit(1)
	}
}
