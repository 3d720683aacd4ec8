// Package bench holds the benchmarks of the lance-context binary's bench
// verbs (lance-context-bench table|engine|http|master, bench/cmd/lance-context-bench): each measures a
// layer side by side with LanceDB where one applies, and prints JSON lines
// (see bench/README.md). They live apart from the command so that the
// production binary's own package holds no measurement code.
package bench

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"runtime/pprof"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/spf13/cobra"

	"github.com/lance-context/lance-context/lance/file"
	"github.com/lance-context/lance-context/lance/pb"
	"github.com/lance-context/lance-context/lance/schema"
	"github.com/lance-context/lance-context/lance/table"
	"github.com/lance-context/lance-context/objstore"
)

// Command returns the bench verb and its subcommands.
func Command() *cobra.Command {
	cmd := &cobra.Command{Use: "bench", Short: "Benchmarks"}
	cmd.AddCommand(newBenchTableCmd(), newBenchHTTPCmd())
	cmd.AddCommand(newBenchEngineCmd())
	cmd.AddCommand(newBenchMasterCmd())
	return cmd
}

// benchSchema is the rollout-shaped table of test/interop/bench.mjs, so the
// Go and LanceDB figures describe the same data. Raw bytes per row:
// len(id)+len(rollout_id)+len(text) + 4+8+8+8 + 4*len(tokens).
var benchSchema = arrow.NewSchema([]arrow.Field{
	{Name: "id", Type: arrow.BinaryTypes.String},
	{Name: "rollout_id", Type: arrow.BinaryTypes.String, Nullable: true},
	{Name: "text", Type: arrow.BinaryTypes.LargeString, Nullable: true},
	{Name: "reward", Type: arrow.PrimitiveTypes.Float32, Nullable: true},
	{Name: "score", Type: arrow.PrimitiveTypes.Float64, Nullable: true},
	{Name: "step", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
	{Name: "created_at", Type: &arrow.TimestampType{Unit: arrow.Microsecond, TimeZone: "UTC"}, Nullable: true},
	{Name: "tokens", Type: arrow.ListOf(arrow.PrimitiveTypes.Int32), Nullable: true},
}, nil)

// benchBatch builds rows [from, from+n) and returns the batch and its raw bytes.
func benchBatch(pool []byte, rng *rand.Rand, from, n int) (arrow.RecordBatch, int64) {
	b := array.NewRecordBuilder(memory.DefaultAllocator, benchSchema)
	defer b.Release()
	var raw int64
	now := time.Now().UnixMicro()
	tok := b.Field(7).(*array.ListBuilder)
	tv := tok.ValueBuilder().(*array.Int32Builder)
	for i := from; i < from+n; i++ {
		id := fmt.Sprintf("r-%09d", i)
		rid := fmt.Sprintf("rollout-%06d", i/16)
		tl := 896 + rng.IntN(256)
		off := rng.IntN(len(pool) - tl)
		text := pool[off : off+tl]
		b.Field(0).(*array.StringBuilder).Append(id)
		b.Field(1).(*array.StringBuilder).Append(rid)
		b.Field(2).(*array.LargeStringBuilder).BinaryBuilder.Append(text)
		b.Field(3).(*array.Float32Builder).Append(rng.Float32())
		b.Field(4).(*array.Float64Builder).Append(rng.Float64())
		b.Field(5).(*array.Int64Builder).Append(int64(i))
		b.Field(6).(*array.TimestampBuilder).Append(arrow.Timestamp(now + int64(i)))
		nt := 56 + rng.IntN(16)
		tok.Append(true)
		for j := 0; j < nt; j++ {
			tv.Append(int32(rng.IntN(50000)))
		}
		raw += int64(len(id)+len(rid)+tl) + 28 + 4*int64(nt)
	}
	return b.NewRecordBatch(), raw
}

// scanRawBytes counts a scanned batch's raw bytes by the same formula.
func scanRawBytes(rec arrow.RecordBatch) int64 {
	var raw int64
	for _, col := range rec.Columns() {
		switch c := col.(type) {
		case *array.String:
			o := c.ValueOffsets()
			raw += int64(o[len(o)-1] - o[0])
		case *array.LargeString:
			o := c.ValueOffsets()
			raw += o[len(o)-1] - o[0]
		case *array.List:
			o := c.Offsets()
			raw += 4 * int64(o[len(o)-1]-o[0])
		default:
			raw += int64(c.Len()) * int64(col.DataType().(arrow.FixedWidthDataType).BitWidth()/8)
		}
	}
	return raw
}

func newBenchTableCmd() *cobra.Command {
	var dir, cpuProfile string
	var rows, batch int
	cmd := &cobra.Command{
		Use:   "table",
		Short: "Write and fully scan a rollout-shaped Lance table (compare: node test/interop/bench.mjs)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			store, err := objstore.Open(ctx, dir)
			if err != nil {
				return err
			}
			s, err := schema.FromArrow(benchSchema, 0)
			if err != nil {
				return err
			}
			if _, err := table.Create(ctx, store, s, table.CreateOptions{}); err != nil {
				return fmt.Errorf("create (use an empty --dir): %w", err)
			}
			pool := make([]byte, 4<<20)
			rng := rand.New(rand.NewPCG(42, 42))
			for i := range pool {
				pool[i] = byte(32 + rng.IntN(95))
			}
			// Generate batches outside the timed section, as bench.mjs does.
			var recs []arrow.RecordBatch
			var raw int64
			for i := 0; i < rows; i += batch {
				r, n := benchBatch(pool, rng, i, min(batch, rows-i))
				recs = append(recs, r)
				raw += n
			}
			start := time.Now()
			fw, err := table.NewFragmentWriter(ctx, store, s, benchSchema, file.WriterOptions{})
			if err != nil {
				return err
			}
			for _, r := range recs {
				if err := fw.Write(r); err != nil {
					return err
				}
				r.Release()
			}
			frag, err := fw.Finish()
			if err != nil {
				return err
			}
			d, err := table.Append(ctx, store, []*pb.DataFragment{frag}, nil)
			if err != nil {
				return err
			}
			writeSecs := time.Since(start).Seconds()

			if cpuProfile != "" {
				f, err := os.Create(cpuProfile)
				if err != nil {
					return err
				}
				defer f.Close()
				if err := pprof.StartCPUProfile(f); err != nil {
					return err
				}
				defer pprof.StopCPUProfile()
			}
			start = time.Now()
			var scanRows, scanRaw int64
			err = d.Scan(ctx, table.ScanOptions{}, func(rec arrow.RecordBatch) error {
				scanRows += rec.NumRows()
				scanRaw += scanRawBytes(rec)
				return nil
			})
			if err != nil {
				return err
			}
			scanSecs := time.Since(start).Seconds()
			out := map[string]any{
				"mode": "write_scan", "rows": rows, "batch": batch, "fragments": len(d.Fragments()),
				"bytes_on_disk": frag.GetFiles()[0].GetFileSizeBytes(), "raw_bytes": raw,
				"write_secs": writeSecs, "write_rows_per_s": float64(rows) / writeSecs, "write_mb_per_s": float64(raw) / 1e6 / writeSecs,
				"scan_secs": scanSecs, "scan_rows": scanRows, "scan_raw_bytes": scanRaw,
				"scan_rows_per_s": float64(scanRows) / scanSecs, "scan_mb_per_s": float64(scanRaw) / 1e6 / scanSecs,
			}
			return json.NewEncoder(cmd.OutOrStdout()).Encode(out)
		},
	}
	cmd.Flags().StringVar(&dir, "dir", "", "empty directory or s3:// URL for the table (required)")
	cmd.Flags().IntVar(&rows, "rows", 1_000_000, "rows to write")
	cmd.Flags().IntVar(&batch, "batch", 10_000, "rows per generated record batch")
	cmd.Flags().StringVar(&cpuProfile, "cpuprofile", "", "write a CPU profile of the scan to this file")
	_ = cmd.MarkFlagRequired("dir")
	return cmd
}
