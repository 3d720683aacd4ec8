//go:build cgo

package main

import (
	"bufio"
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	_ "github.com/duckdb/duckdb-go/v2"

	"github.com/lance-context/lance-context/api"
	"github.com/lance-context/lance-context/client"
	"github.com/lance-context/lance-context/objstore"
	"github.com/lance-context/lance-context/rollout"
	"github.com/lance-context/lance-context/worker"
)

// exportRow is what the readback compares per row.
type exportRow struct {
	ID, RolloutID string
	Seq           int64
	Reward        string // %.4f, or "null"
}

func fmtReward(v any) string {
	switch x := v.(type) {
	case nil:
		return "null"
	case float64:
		return fmt.Sprintf("%.4f", x)
	case float32:
		return fmt.Sprintf("%.4f", x)
	}
	return fmt.Sprintf("?%T", v)
}

func rowsOfBatch(b arrow.RecordBatch) []exportRow {
	col := func(n string) arrow.Array { return b.Column(b.Schema().FieldIndices(n)[0]) }
	ids, rids, seq, rew := col("id").(*array.String), col("rollout_id").(*array.String), col("sequence_order"), col("reward")
	var out []exportRow
	for i := range ids.Len() {
		r := exportRow{ID: ids.Value(i), RolloutID: rids.Value(i), Reward: "null"}
		switch s := seq.(type) {
		case *array.Int32:
			r.Seq = int64(s.Value(i))
		case *array.Int64:
			r.Seq = s.Value(i)
		}
		if rew.IsValid(i) {
			r.Reward = fmtReward(rew.GetOneForMarshal(i))
		}
		out = append(out, r)
	}
	return out
}

func sortRows(rs []exportRow) []exportRow {
	slices.SortFunc(rs, func(a, b exportRow) int { return strings.Compare(a.ID, b.ID) })
	return rs
}

// TestExportVerbReadsBack: lance-context export writes Parquet that DuckDB
// reads, JSON lines and an Arrow file, each equal to the export stream
// (merged, pending and rewritten rows, a filter, a column list); a bad
// filter writes nothing.
func TestExportVerbReadsBack(t *testing.T) {
	ctx := context.Background()
	cfg := worker.Config{InstanceID: "cli", MaxBodyBytes: 64 << 20, MaxRecords: 10000, MaxPayloadBytes: 32 << 20}
	catalog := rollout.NewCatalog(objstore.NewMemory(), rollout.ShardID("cli"), cfg.StoreOptions())
	srv := httptest.NewServer(worker.NewServer(cfg, catalog, worker.NewRegistry()).Handler())
	defer srv.Close()
	defer catalog.Close(ctx)
	c := client.New(srv.URL)
	if _, err := c.CreateStore(ctx, "ex"); err != nil {
		t.Fatal(err)
	}
	add := func(prefix string, n int, rollout string) {
		var recs []api.Record
		for i := range n {
			r := api.Record{ID: fmt.Sprintf("%s-%04d", prefix, i), RolloutID: rollout, SequenceOrder: int32(i)}
			if i%3 != 0 {
				rw := float32(i) / 7
				r.Reward = &rw
			}
			recs = append(recs, r)
		}
		if _, err := c.Append(ctx, "ex", recs, client.AppendOptions{Flush: true}); err != nil {
			t.Fatal(err)
		}
	}
	add("m", 500, "r-merged")
	if _, err := c.Merge(ctx, "ex"); err != nil {
		t.Fatal(err)
	}
	add("p", 120, "r-pending")
	add("m", 10, "r-rewritten") // rewrites of merged ids, pending
	snap, err := c.CreateSnapshot(ctx, "ex", 600, "test")
	if err != nil {
		t.Fatal(err)
	}
	add("q", 30, "r-after") // pending, after the snapshot

	source := func(o client.ExportOptions) []exportRow {
		var out []exportRow
		if _, err := c.Export(ctx, "ex", o, func(b arrow.RecordBatch) error {
			out = append(out, rowsOfBatch(b)...)
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		return sortRows(out)
	}
	run := func(args ...string) (string, error) {
		root := newRootCmd()
		var out, errb bytes.Buffer
		root.SetOut(&out)
		root.SetErr(&errb)
		root.SetArgs(append(append([]string{"export", "--store", "ex"}, args...), "--url", srv.URL))
		err := root.ExecuteContext(ctx)
		return out.String(), err
	}
	dir := t.TempDir()
	for _, tc := range []struct {
		name string
		args []string
		o    client.ExportOptions
	}{
		{"all", nil, client.ExportOptions{}},
		{"filtered", []string{"--filter", "rollout_id=r-rewritten", "--columns", "id,rollout_id,sequence_order,reward"},
			client.ExportOptions{Filters: map[string]string{"rollout_id": "r-rewritten"}}},
		{"fragments", []string{"--source", "fragments"}, client.ExportOptions{Source: api.SourceFragments}},
		{"wal", []string{"--source", "wal", "--columns", "reward,id,sequence_order,rollout_id"}, client.ExportOptions{Source: api.SourceWAL}},
		{"snapshot", []string{"--snapshot", snap.Tag}, client.ExportOptions{Snapshot: snap.Tag}},
	} {
		want := source(tc.o)
		if len(want) == 0 {
			t.Fatalf("%s: the source is empty", tc.name)
		}
		// Parquet, read by DuckDB.
		pq := filepath.Join(dir, tc.name+".parquet")
		out, err := run(append([]string{"--format", "parquet", "--out", pq}, tc.args...)...)
		if err != nil || !strings.HasPrefix(out, fmt.Sprintf("%d rows of ex written to %s", len(want), pq)) {
			t.Fatalf("%s parquet: %q %v", tc.name, out, err)
		}
		db, err := sql.Open("duckdb", "")
		if err != nil {
			t.Fatal(err)
		}
		// Every column asked for, in its order (all of them by default:
		// lists and the struct list too).
		wantCols := rollout.ScanColumns()
		if i := slices.Index(tc.args, "--columns"); i >= 0 {
			wantCols = strings.Split(tc.args[i+1], ",")
		}
		if cols := duckColumns(t, db, pq); !slices.Equal(cols, wantCols) {
			t.Fatalf("%s: the Parquet's columns %v, want %v", tc.name, cols, wantCols)
		}
		q, err := db.QueryContext(ctx, "SELECT id, rollout_id, sequence_order, reward FROM read_parquet(?)", pq)
		if err != nil {
			t.Fatal(err)
		}
		var got []exportRow
		for q.Next() {
			var r exportRow
			var rew sql.NullFloat64
			if err := q.Scan(&r.ID, &r.RolloutID, &r.Seq, &rew); err != nil {
				t.Fatal(err)
			}
			r.Reward = "null"
			if rew.Valid {
				r.Reward = fmtReward(rew.Float64)
			}
			got = append(got, r)
		}
		q.Close()
		db.Close()
		if !slices.Equal(sortRows(got), want) {
			t.Fatalf("%s: DuckDB reads %d rows from the Parquet, the export stream has %d (first %v vs %v)", tc.name, len(got), len(want), got[:1], want[:1])
		}

		// JSON lines.
		jl := filepath.Join(dir, tc.name+".jsonl")
		if _, err := run(append([]string{"--format", "jsonl", "--out", jl}, tc.args...)...); err != nil {
			t.Fatal(err)
		}
		f, err := os.Open(jl)
		if err != nil {
			t.Fatal(err)
		}
		got = got[:0]
		sc := bufio.NewScanner(f)
		sc.Buffer(nil, 1<<24)
		for sc.Scan() {
			var m map[string]any
			if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
				t.Fatalf("%s jsonl: %v: %s", tc.name, err, sc.Text())
			}
			got = append(got, exportRow{ID: m["id"].(string), RolloutID: m["rollout_id"].(string), Seq: int64(m["sequence_order"].(float64)), Reward: fmtReward(m["reward"])})
		}
		f.Close()
		if !slices.Equal(sortRows(got), want) {
			t.Fatalf("%s: the JSON lines hold %d rows, the export stream %d", tc.name, len(got), len(want))
		}

		// An Arrow IPC file.
		af := filepath.Join(dir, tc.name+".arrow")
		if _, err := run(append([]string{"--format", "arrow", "--out", af}, tc.args...)...); err != nil {
			t.Fatal(err)
		}
		f, err = os.Open(af)
		if err != nil {
			t.Fatal(err)
		}
		rd, err := ipc.NewFileReader(f)
		if err != nil {
			t.Fatal(err)
		}
		got = got[:0]
		for i := range rd.NumRecords() {
			b, err := rd.RecordBatch(i)
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, rowsOfBatch(b)...)
		}
		rd.Close()
		f.Close()
		if !slices.Equal(sortRows(got), want) {
			t.Fatalf("%s: the Arrow file holds %d rows, the export stream %d", tc.name, len(got), len(want))
		}
	}

	// Bad input: an error naming it, and no file.
	bad := filepath.Join(t.TempDir(), "bad")
	for _, args := range [][]string{
		{"--format", "parquet", "--out", bad + "/x.parquet", "--filter", "reward=1"},
		{"--format", "parquet", "--out", bad + "/x.parquet", "--columns", "id,nope"},
		{"--format", "csv", "--out", bad + "/x.csv"},
	} {
		if err := os.MkdirAll(bad, 0o755); err != nil {
			t.Fatal(err)
		}
		if _, err := run(args...); err == nil {
			t.Fatalf("%v: no error", args)
		}
		if ents, _ := os.ReadDir(bad); len(ents) != 0 {
			t.Fatalf("%v left %v", args, ents)
		}
	}
}

// duckColumns lists the columns DuckDB reads in a Parquet file (a full
// scan of every column: a file it cannot decode fails here).
func duckColumns(t *testing.T, db *sql.DB, path string) []string {
	t.Helper()
	var n int64
	if err := db.QueryRow("SELECT count(*) FROM (SELECT * FROM read_parquet(?))", path).Scan(&n); err != nil {
		t.Fatalf("DuckDB reading every column of %s: %v", path, err)
	}
	rows, err := db.Query(fmt.Sprintf("DESCRIBE SELECT * FROM read_parquet('%s')", strings.ReplaceAll(path, "'", "''")))
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	names, err := rows.Columns()
	if err != nil {
		t.Fatal(err)
	}
	var cols []string
	for rows.Next() {
		vals := make([]any, len(names))
		ptrs := make([]any, len(names))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			t.Fatal(err)
		}
		cols = append(cols, fmt.Sprint(vals[0])) // column_name
	}
	return cols
}

// TestExportParquetRefusedAndCut: GET .../export?format=parquet refuses bad
// input with a JSON 400 before any byte (a bad format names the ones
// taken), an empty selection is a Parquet file of no rows, and a Parquet
// body that ends without the row count (or breaks off) leaves no file.
func TestExportParquetRefusedAndCut(t *testing.T) {
	ctx := context.Background()
	cfg := worker.Config{InstanceID: "cli", MaxBodyBytes: 64 << 20, MaxRecords: 10000, MaxPayloadBytes: 32 << 20}
	catalog := rollout.NewCatalog(objstore.NewMemory(), rollout.ShardID("cli"), cfg.StoreOptions())
	srv := httptest.NewServer(worker.NewServer(cfg, catalog, worker.NewRegistry()).Handler())
	defer srv.Close()
	defer catalog.Close(ctx)
	c := client.New(srv.URL)
	if _, err := c.CreateStore(ctx, "pq"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Append(ctx, "pq", []api.Record{{ID: "a", RolloutID: "r"}, {ID: "b", RolloutID: "r"}}, client.AppendOptions{Flush: true}); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ query, want string }{
		{"format=csv", `format \"csv\": arrow or parquet`},
		{"format=parquet&format=arrow", "format given 2 times"},
		{"format=parquet&columns=id,nope", `no column \"nope\"`},
		{"format=parquet&reward=1", `cannot filter on \"reward\"`},
		{"format=parquet&source=everything", "not one of"},
		{"format=parquet&snapshot=", "snapshot is empty"},
	} {
		resp, err := http.Get(srv.URL + "/api/v1/rollouts/pq/export?" + tc.query)
		if err != nil {
			t.Fatal(err)
		}
		raw, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(raw), tc.want) || resp.Header.Get("Content-Type") != "application/json" {
			t.Errorf("export?%s: %d %s %s, want 400 with %q", tc.query, resp.StatusCode, resp.Header.Get("Content-Type"), raw, tc.want)
		}
	}

	run := func(url string, args ...string) (string, error) {
		root := newRootCmd()
		var out, errb bytes.Buffer
		root.SetOut(&out)
		root.SetErr(&errb)
		root.SetArgs(append(append([]string{"export", "--store", "pq", "--format", "parquet"}, args...), "--url", url))
		err := root.ExecuteContext(ctx)
		return out.String(), err
	}
	// Nothing matches: a Parquet file of the schema and no rows.
	dir := t.TempDir()
	empty := filepath.Join(dir, "empty.parquet")
	if out, err := run(srv.URL, "--out", empty, "--filter", "rollout_id=none"); err != nil || !strings.HasPrefix(out, "0 rows of pq written") {
		t.Fatalf("empty export: %q %v", out, err)
	}
	db, err := sql.Open("duckdb", "")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if cols := duckColumns(t, db, empty); !slices.Equal(cols, rollout.ScanColumns()) {
		t.Fatalf("the empty file's columns: %v", cols)
	}

	// A server whose Parquet body ends early: without the trailer, or cut.
	whole, err := os.ReadFile(empty)
	if err != nil {
		t.Fatal(err)
	}
	for _, abort := range []bool{false, true} {
		bad := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", api.ParquetFile)
			w.Header().Set("Trailer", api.ExportRowsTrailer)
			w.WriteHeader(http.StatusOK)
			_, _ = w.Write(whole[:len(whole)/2])
			http.NewResponseController(w).Flush()
			if abort {
				panic(http.ErrAbortHandler)
			}
		}))
		cutDir := t.TempDir()
		out, err := run(bad.URL, "--out", filepath.Join(cutDir, "cut.parquet"))
		bad.Close()
		if err == nil {
			t.Fatalf("abort=%v: a body without its row count was taken as whole: %q", abort, out)
		}
		if ents, _ := os.ReadDir(cutDir); len(ents) != 0 {
			t.Fatalf("abort=%v: a cut export left %v", abort, ents)
		}
	}
}
