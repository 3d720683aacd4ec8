// Package deploy holds the Kubernetes manifests; this test checks them and
// the compose file statically (no cluster or container engine runs in CI).
package deploy

import (
	"bytes"
	"errors"
	"io"
	"os"
	"regexp"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
)

func docs(t *testing.T, path string) []map[string]any {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	dec := yaml.NewDecoder(bytes.NewReader(b))
	var out []map[string]any
	for {
		var d map[string]any
		err := dec.Decode(&d)
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		out = append(out, d)
	}
}

func get(v any, path ...any) any {
	for _, p := range path {
		switch k := p.(type) {
		case string:
			m, ok := v.(map[string]any)
			if !ok {
				return nil
			}
			v = m[k]
		case int:
			l, ok := v.([]any)
			if !ok || k >= len(l) {
				return nil
			}
			v = l[k]
		}
	}
	return v
}

func TestManifests(t *testing.T) {
	kinds := map[string]map[string]any{}
	for _, f := range []string{"workers.yaml", "master.yaml", "secret.example.yaml"} {
		for _, d := range docs(t, f) {
			kinds[d["kind"].(string)+"/"+get(d, "metadata", "name").(string)] = d
		}
	}
	sts := kinds["StatefulSet/lance-context-worker"]
	if sts == nil {
		t.Fatal("no worker StatefulSet")
	}
	if get(sts, "spec", "serviceName") != "lance-context-worker-headless" || kinds["Service/lance-context-worker-headless"] == nil {
		t.Fatal("worker StatefulSet must name its headless Service")
	}
	c := get(sts, "spec", "template", "spec", "containers", 0)
	if get(c, "args", 0) != "worker" {
		t.Fatalf("worker args %v", get(c, "args"))
	}
	instance := false
	for _, e := range get(c, "env").([]any) {
		if get(e, "name") == "INSTANCE_ID" && get(e, "valueFrom", "fieldRef", "fieldPath") == "metadata.name" {
			instance = true
		}
	}
	if !instance {
		t.Fatal("INSTANCE_ID must come from the pod name")
	}
	if get(c, "envFrom", 0, "secretRef", "name") != "lance-context" {
		t.Fatal("worker must read the lance-context Secret")
	}
	dep := kinds["Deployment/lance-context-master"]
	if dep == nil || get(dep, "spec", "template", "spec", "containers", 0, "args", 0) != "master" {
		t.Fatal("no master Deployment")
	}
	if get(dep, "spec", "template", "spec", "containers", 0, "envFrom", 0, "secretRef", "name") != "lance-context" {
		t.Fatal("master must read the lance-context Secret")
	}
	sec := kinds["Secret/lance-context"]
	for _, k := range []string{"ETCD_ENDPOINTS", "DATA_DIR", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"} {
		if get(sec, "stringData", k) == nil {
			t.Errorf("secret example lacks %s", k)
		}
	}
}

func TestComposeAndDockerfile(t *testing.T) {
	df, err := os.ReadFile("../Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	targets := map[string]bool{"": true}
	for _, m := range regexp.MustCompile(`(?m)^FROM \S+(?: AS (\S+))?`).FindAllStringSubmatch(string(df), -1) {
		targets[m[1]] = true
	}
	d := docs(t, "../test/docker-compose.yml")[0]
	services := get(d, "services").(map[string]any)
	for _, want := range []string{"etcd", "s3", "master", "worker1", "worker2"} {
		if services[want] == nil {
			t.Errorf("compose lacks service %s", want)
		}
	}
	for name, s := range services {
		target, _ := get(s, "build", "target").(string)
		if !targets[target] {
			t.Errorf("service %s builds Dockerfile target %q, which does not exist", name, target)
		}
		if args, ok := get(s, "command").([]any); ok && (name == "master" || strings.HasPrefix(name, "worker")) {
			if args[0] != "master" && args[0] != "worker" {
				t.Errorf("service %s runs %v", name, args)
			}
		}
	}
	for _, w := range []string{"worker1", "worker2"} {
		if get(services[w], "environment", "INSTANCE_ID") == nil {
			t.Errorf("%s has no INSTANCE_ID", w)
		}
	}
	if _, err := os.Stat("../objstore/internal/mkbucket/main.go"); err != nil {
		t.Errorf("compose mkbucket: %v", err)
	}
}
