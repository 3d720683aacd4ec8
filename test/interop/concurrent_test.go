package interop

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/lance-context/lance-context/lance/pb"
	"github.com/lance-context/lance-context/lance/table"
	"github.com/lance-context/lance-context/objstore"
)

var concSchema = arrow.NewSchema([]arrow.Field{
	{Name: "id", Type: arrow.BinaryTypes.String},
	{Name: "src", Type: arrow.BinaryTypes.String, Nullable: true},
	{Name: "n", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
}, nil)

// childEnv carries a committer child's job (JSON childJob).
const childEnv = "LC_INTEROP_COMMITTER"

// childResultPrefix starts the child's result line on stdout.
const childResultPrefix = "LC_COMMITTER_RESULT "

type childJob struct {
	Table   string `json:"table"`
	Prefix  string `json:"prefix"`
	N       int    `json:"n"`
	Barrier string `json:"barrier"`
}

// goAppends makes n single-row, single-fragment appends with ids
// prefix-0..prefix-(n-1) and returns the version each commit created.
func goAppends(ctx context.Context, st objstore.Store, prefix string, n int) ([]uint64, error) {
	d, err := table.Open(ctx, st)
	if err != nil {
		return nil, err
	}
	var versions []uint64
	for k := 0; k < n; k++ {
		rec := buildBatch(concSchema, []map[string]any{{"id": fmt.Sprintf("%s-%d", prefix, k), "src": prefix, "n": int64(k)}})
		frag, err := table.WriteFragment(ctx, st, d.Schema(), []arrow.RecordBatch{rec})
		rec.Release()
		if err != nil {
			return versions, err
		}
		nd, err := table.Append(ctx, st, []*pb.DataFragment{frag}, nil)
		if err != nil {
			return versions, fmt.Errorf("%s append %d: %w", prefix, k, err)
		}
		versions = append(versions, nd.Version())
	}
	return versions, nil
}

func waitFor(path string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		if _, err := os.Stat(path); err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("barrier %s did not appear within %s", path, timeout)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// TestCommitterChild is a committer process for TestConcurrentCommitters;
// it does nothing unless started by it.
func TestCommitterChild(t *testing.T) {
	spec := os.Getenv(childEnv)
	if spec == "" {
		t.Skip("only runs as a child of TestConcurrentCommitters")
	}
	var job childJob
	if err := json.Unmarshal([]byte(spec), &job); err != nil {
		t.Fatal(err)
	}
	st, err := objstore.NewLocal(job.Table)
	if err != nil {
		t.Fatal(err)
	}
	if err := waitFor(job.Barrier, time.Minute); err != nil {
		t.Fatal(err)
	}
	versions, err := goAppends(context.Background(), st, job.Prefix, job.N)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(versions)
	fmt.Printf("%s%s\n", childResultPrefix, b)
}

// TestConcurrentCommitters: Go goroutines, Go processes and a LanceDB writer
// append to one table at once. Every commit gets its own version and no row
// is lost or duplicated.
func TestConcurrentCommitters(t *testing.T) {
	requireNode(t)
	const (
		goroutines, perGoroutine = 4, 10
		children, perChild       = 3, 10
		nodeN                    = 20
	)
	ctx := context.Background()
	dir := t.TempDir()
	tableDir := filepath.Join(dir, "conc.lance")
	st := localStore(t, dir, "conc")
	createTable(t, st, concSchema)
	barrier := filepath.Join(dir, "go")

	var wantIDs []string
	add := func(prefix string, n int) {
		for k := 0; k < n; k++ {
			wantIDs = append(wantIDs, fmt.Sprintf("%s-%d", prefix, k))
		}
	}

	// LanceDB writer.
	add("node", nodeN)
	type nodeResult struct {
		doc map[string]any
		err error
	}
	nodeDone := make(chan nodeResult, 1)
	go func() {
		doc, err := runNodeErr(t, "append_loop.mjs", dir, "conc", "--n", fmt.Sprint(nodeN), "--prefix", "node",
			"--row-json", `{"src":"node","n":7}`, "--wait-for", barrier)
		nodeDone <- nodeResult{doc, err}
	}()

	// Committer processes.
	type childProc struct {
		prefix string
		cmd    *exec.Cmd
		out    bytes.Buffer
		errb   bytes.Buffer
	}
	var procs []*childProc
	for c := 0; c < children; c++ {
		p := &childProc{prefix: fmt.Sprintf("proc%d", c)}
		add(p.prefix, perChild)
		job, _ := json.Marshal(childJob{Table: tableDir, Prefix: p.prefix, N: perChild, Barrier: barrier})
		p.cmd = exec.Command(os.Args[0], "-test.run=^TestCommitterChild$", "-test.count=1", "-test.v")
		p.cmd.Env = append(os.Environ(), childEnv+"="+string(job))
		p.cmd.Stdout, p.cmd.Stderr = &p.out, &p.errb
		if err := p.cmd.Start(); err != nil {
			t.Fatal(err)
		}
		procs = append(procs, p)
	}

	// Goroutines.
	start := make(chan struct{})
	var wg sync.WaitGroup
	goVersions := make([][]uint64, goroutines)
	goErrs := make([]error, goroutines)
	for g := 0; g < goroutines; g++ {
		prefix := fmt.Sprintf("gor%d", g)
		add(prefix, perGoroutine)
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			goVersions[g], goErrs[g] = goAppends(ctx, st, prefix, perGoroutine)
		}()
	}

	// Give node time to load LanceDB and reach its barrier, then go.
	time.Sleep(1500 * time.Millisecond)
	if err := os.WriteFile(barrier, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	close(start)
	t0 := time.Now()

	wg.Wait()
	var allVersions []uint64
	owner := map[uint64]string{}
	record := func(who string, vs []uint64) {
		for _, v := range vs {
			if prev, dup := owner[v]; dup {
				t.Errorf("version %d committed twice: by %s and by %s", v, prev, who)
			}
			owner[v] = who
			allVersions = append(allVersions, v)
		}
	}
	for g := range goroutines {
		if goErrs[g] != nil {
			t.Errorf("goroutine %d: %v", g, goErrs[g])
		}
		if len(goVersions[g]) != perGoroutine {
			t.Errorf("goroutine %d: %d commits, want %d", g, len(goVersions[g]), perGoroutine)
		}
		record(fmt.Sprintf("goroutine %d", g), goVersions[g])
	}
	for _, p := range procs {
		err := p.cmd.Wait()
		var vs []uint64
		found := false
		sc := bufio.NewScanner(&p.out)
		for sc.Scan() {
			if rest, ok := strings.CutPrefix(sc.Text(), childResultPrefix); ok {
				found = true
				if err := json.Unmarshal([]byte(rest), &vs); err != nil {
					t.Errorf("%s: bad result line %q", p.prefix, sc.Text())
				}
			}
		}
		if err != nil || !found {
			t.Errorf("%s: exit %v, result line found %v\nstdout:\n%s\nstderr:\n%s", p.prefix, err, found, p.out.String(), p.errb.String())
			continue
		}
		if len(vs) != perChild {
			t.Errorf("%s: %d commits, want %d", p.prefix, len(vs), perChild)
		}
		record(p.prefix, vs)
	}
	nr := <-nodeDone
	if nr.err != nil {
		t.Fatalf("LanceDB writer: %v", nr.err)
	}
	var nodeVersions []uint64
	for _, v := range nr.doc["versions"].([]any) {
		nodeVersions = append(nodeVersions, uint64(normalize(v).(int64)))
	}
	if len(nodeVersions) != nodeN {
		t.Errorf("LanceDB writer: %d commits, want %d", len(nodeVersions), nodeN)
	}
	record("LanceDB", nodeVersions)
	t.Logf("%d commits by 8 writers in %s (LanceDB loop: %vs)", len(allVersions), time.Since(t0).Round(time.Millisecond), nr.doc["secs"])

	// Every commit made exactly one new version: 2 .. 1+total.
	total := goroutines*perGoroutine + children*perChild + nodeN
	sort.Slice(allVersions, func(i, j int) bool { return allVersions[i] < allVersions[j] })
	for i, v := range allVersions {
		if v != uint64(i+2) {
			t.Errorf("committed versions are not exactly 2..%d: %v", total+1, allVersions)
			break
		}
	}

	// The writers really raced: versions alternate between them.
	var seq []string
	changes := 0
	for i, v := range allVersions {
		seq = append(seq, owner[v])
		if i > 0 && owner[v] != owner[allVersions[i-1]] {
			changes++
		}
	}
	t.Logf("%d changes of committer in version order", changes)
	if changes < 8 {
		t.Errorf("committers barely interleaved (%d changes): %v", changes, seq)
	}

	d := openTable(t, st)
	if d.Version() != uint64(total+1) {
		t.Errorf("latest version %d, want %d", d.Version(), total+1)
	}
	fragIDs := map[uint64]bool{}
	for _, f := range d.Fragments() {
		if fragIDs[f.GetId()] {
			t.Errorf("fragment id %d appears twice in version %d", f.GetId(), d.Version())
		}
		fragIDs[f.GetId()] = true
	}
	if len(d.Fragments()) != total {
		t.Errorf("%d fragments, want %d (one per commit)", len(d.Fragments()), total)
	}
	sort.Strings(wantIDs)
	if d.CountRows() != int64(total) {
		t.Errorf("Go count %d, want %d", d.CountRows(), total)
	}
	got, _ := scanRows(t, d, table.ScanOptions{Columns: []string{"id", "src"}})
	for _, r := range got {
		if id := r["id"].(string); !strings.HasPrefix(id, r["src"].(string)+"-") {
			t.Errorf("row %s has src %v", id, r["src"])
		}
	}
	checkIDs(t, "Go ids after concurrent commits", sortedIDs(got), wantIDs)
	count, lids := dumpIDs(t, dir, "conc")
	if count != int64(total) {
		t.Errorf("LanceDB count %d, want %d", count, total)
	}
	checkIDs(t, "LanceDB ids after concurrent commits", lids, wantIDs)
}
