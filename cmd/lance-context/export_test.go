//go:build cgo

package main

import (
	"bufio"
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
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
