package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lance-context/lance-context/objstore"
	"github.com/lance-context/lance-context/rollout"
	"github.com/lance-context/lance-context/worker"
)

func TestClientVerbs(t *testing.T) {
	cfg := worker.Config{InstanceID: "cli", APIToken: "tok", MaxBodyBytes: 64 << 20, MaxRecords: 10000, MaxPayloadBytes: 32 << 20}
	catalog := rollout.NewCatalog(objstore.NewMemory(), rollout.ShardID("cli"), cfg.StoreOptions())
	srv := httptest.NewServer(worker.NewServer(cfg, catalog, worker.NewRegistry()).Handler())
	defer srv.Close()
	defer catalog.Close(context.Background())

	run := func(stdin string, args ...string) (string, error) {
		t.Helper()
		root := newRootCmd()
		var out bytes.Buffer
		root.SetOut(&out)
		root.SetErr(&out)
		root.SetIn(strings.NewReader(stdin))
		root.SetArgs(append(args, "--url", srv.URL, "--token", "tok"))
		err := root.ExecuteContext(context.Background())
		return out.String(), err
	}
	must := func(stdin string, args ...string) string {
		t.Helper()
		out, err := run(stdin, args...)
		if err != nil {
			t.Fatalf("%v: %v\n%s", args, err, out)
		}
		return out
	}

	if out := must("", "create", "runs"); out != "created runs\n" {
		t.Fatalf("create: %q", out)
	}
	if _, err := run("", "create", "runs"); err == nil || !strings.Contains(err.Error(), "409 ALREADY_EXISTS") {
		t.Fatalf("second create: %v", err)
	}
	if out := must("", "stores"); out != "runs\n" {
		t.Fatalf("stores: %q", out)
	}

	// 5 records, one with a payload, in batches of 2; the blank line is skipped.
	lines := `{"rollout_id":"r1","sequence_order":1,"role":"user","content":"question"}
{"rollout_id":"r1","sequence_order":0,"role":"system","content":"be brief","metadata":{"k":[1,2]}}

{"id":"art-1","rollout_id":"r2","role":"artifact","content_type":"image/png","binary_payload":"AP8Q"}
{"rollout_id":"r1","sequence_order":2,"content":"answer","reward":0.5}
{"rollout_id":"r3","content":"x"}
`
	out := must(lines, "append", "runs", "-", "--batch", "2", "--flush", "--json")
	var app struct {
		IDs     []string `json:"ids"`
		Count   int      `json:"count"`
		Flushed bool     `json:"flushed"`
	}
	if err := json.Unmarshal([]byte(out), &app); err != nil || app.Count != 5 || !app.Flushed || app.IDs[2] != "art-1" {
		t.Fatalf("append: %q %v", out, err)
	}
	// From a file, text output, ending on a batch boundary (then flushed on its own).
	file := filepath.Join(t.TempDir(), "recs.jsonl")
	if err := os.WriteFile(file, []byte("{\"rollout_id\":\"r4\"}\n{\"rollout_id\":\"r4\"}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if out := must("", "append", "runs", file, "--batch", "2", "--flush"); out != "appended 2 records to runs (flushed: readable now)\n" {
		t.Fatalf("append file: %q", out)
	}
	if _, err := run("{\"rollout_id\":\"r\"}\nnot json\n", "append", "runs"); err == nil || !strings.Contains(err.Error(), "stdin line 2") {
		t.Fatalf("bad line: %v", err)
	}

	page := func(args ...string) map[string]any {
		t.Helper()
		var p map[string]any
		out := must("", append([]string{"list", "runs", "--json"}, args...)...)
		if err := json.Unmarshal([]byte(out), &p); err != nil {
			t.Fatalf("list %v: %q", args, out)
		}
		return p
	}
	nrecs := func(p map[string]any) int { return len(p["records"].([]any)) }
	// The worker's default source is all: what append --flush made
	// readable is listed without naming a source (regression: list showed
	// 0 records after "append --flush" said they were readable).
	if n := nrecs(page("--limit", "100")); n != 7 {
		t.Fatalf("default source after a flushed append: %d", n)
	}
	if n := nrecs(page("--source", "fragments")); n != 0 {
		t.Fatalf("fragments before merge: %d", n)
	}
	if n := nrecs(page("--source", "wal", "--limit", "100")); n != 7 {
		t.Fatalf("wal: %d", n)
	}
	if p := page("--source", "all", "--limit", "3", "--offset", "3"); nrecs(p) != 3 || p["has_more"] != true {
		t.Fatalf("all page: %v", p)
	}
	if p := page("--source", "all", "--filter", "rollout_id=r1", "--filter", "role=user"); nrecs(p) != 1 {
		t.Fatalf("filtered: %v", p)
	}
	out = must("", "list", "runs", "--source", "all", "--all", "--limit", "2", "--json")
	if n := strings.Count(out, "\n"); n != 7 {
		t.Fatalf("list --all --json: %d lines\n%s", n, out)
	}
	out = must("", "list", "runs", "--source", "all", "--filter", "rollout_id=r1")
	if !strings.Contains(out, "ROLLOUT_ID") || !strings.Contains(out, "question") || !strings.Contains(out, "3 records (source all, offset 0)") {
		t.Fatalf("list text:\n%s", out)
	}

	out = must("", "get", "runs", "art-1", "--json")
	var rec map[string]any
	if err := json.Unmarshal([]byte(out), &rec); err != nil || rec["rollout_id"] != "r2" || rec["payload_size"] != 3.0 {
		t.Fatalf("get: %q %v", out, err)
	}
	if _, err := run("", "get", "runs", "nope"); err == nil || !strings.Contains(err.Error(), "404 NOT_FOUND") {
		t.Fatalf("get missing: %v", err)
	}
	if out := must("", "blob", "runs", "art-1"); out != "\x00\xff\x10" {
		t.Fatalf("blob to stdout: %q", out)
	}
	dst := filepath.Join(t.TempDir(), "a.png")
	if out := must("", "blob", "runs", "art-1", "-o", dst); !strings.Contains(out, "wrote 3 bytes (image/png)") {
		t.Fatalf("blob -o: %q", out)
	}
	if b, err := os.ReadFile(dst); err != nil || string(b) != "\x00\xff\x10" {
		t.Fatalf("blob file: %q %v", b, err)
	}

	if out := must("", "flush", "runs"); out != "flushed runs\n" {
		t.Fatalf("flush: %q", out)
	}
	if out := must("", "merge", "runs"); !strings.Contains(out, "7 rows") || !strings.Contains(out, "0 generations remain") {
		t.Fatalf("merge: %q", out)
	}
	if n := nrecs(page("--limit", "100")); n != 7 {
		t.Fatalf("fragments after merge: %d", n)
	}
	out = must("", "stats", "runs", "--json")
	var st rollout.Stats
	if err := json.Unmarshal([]byte(out), &st); err != nil || st.Rows != 7 || st.BaseRows != 7 {
		t.Fatalf("stats: %q %v", out, err)
	}
	if out := must("", "stats", "runs"); !strings.Contains(out, "rows") || !strings.Contains(out, "7 (base 7, pending 0)") {
		t.Fatalf("stats text: %q", out)
	}
	if out := must("", "compact", "runs"); !strings.HasPrefix(out, "compacted runs:") {
		t.Fatalf("compact: %q", out)
	}
	// The lifecycle verbs: tags, cleanup, retention.
	if out := must("", "tag", "create", "runs", "before-cleanup"); !strings.Contains(out, "as before-cleanup") {
		t.Fatalf("tag create: %q", out)
	}
	if out := must("", "tag", "list", "runs"); !strings.HasPrefix(out, "before-cleanup\t") {
		t.Fatalf("tag list: %q", out)
	}
	if out := must("", "cleanup", "runs", "--older-than", "0", "--read-grace", "0"); !strings.Contains(out, "cleaned runs:") || !strings.Contains(out, "versions kept") {
		t.Fatalf("cleanup: %q", out)
	}
	if out := must("", "tag", "delete", "runs", "before-cleanup"); !strings.Contains(out, "deleted tag before-cleanup") {
		t.Fatalf("tag delete: %q", out)
	}
	if out := must("", "retention", "runs", "--keep-policy-versions", "3"); !strings.Contains(out, "newest 3 policy versions") {
		t.Fatalf("retention: %q", out)
	}

	// A wrong token is a 401 with the worker's message.
	root := newRootCmd()
	root.SetOut(new(bytes.Buffer))
	root.SetArgs([]string{"stores", "--url", srv.URL, "--token", "wrong"})
	if err := root.Execute(); err == nil || !strings.Contains(err.Error(), "401 UNAUTHORIZED") {
		t.Fatalf("wrong token: %v", err)
	}
}
