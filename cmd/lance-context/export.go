package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/spf13/cobra"

	"github.com/lance-context/lance-context/api"
	"github.com/lance-context/lance-context/client"
	"github.com/lance-context/lance-context/objstore"
)

// exportResult is what export prints at the end.
type exportResult struct {
	Store   string  `json:"store"`
	Out     string  `json:"out"`
	Format  string  `json:"format"`
	Rows    int64   `json:"rows"`
	Bytes   int64   `json:"bytes"`
	Seconds float64 `json:"seconds"`
}

func newExportCmd() *cobra.Command {
	var f clientFlags
	var store, format, out, source, snapshot, columns string
	var filters []string
	var quiet bool
	cmd := clientVerb(&f, &cobra.Command{
		Use:   "export --store NAME --format parquet|jsonl|arrow --out FILE|s3://bucket/key",
		Short: "Export a store's rows (a source or a snapshot) to Parquet, JSON lines or Arrow",
		Long: "Stream a store's rows from the worker's export route into a file: Parquet (encoded by the worker " +
			"with arrow-go's writer, zstd, and written here as it arrives), JSON lines (one object per row), or an " +
			"Arrow IPC file (both from the route's Arrow IPC stream, batch by batch). " +
			"--source picks the tier (all by default), --snapshot a base version (a snapshot's tag, any tag, or a " +
			"version number), --columns a comma-separated subset, --filter column=value the records listing's " +
			"equality filters. --out names a local file (written beside it and renamed when whole) or an object " +
			"(s3://, gs://, az://, credentials from the environment). Progress goes to stderr; the row count " +
			"is printed at the end." + clientGroupNote,
		Args: cobra.NoArgs,
	}, func(cmd *cobra.Command, c *client.Client, _ []string) (any, textFunc, error) {
		if store == "" || out == "" {
			return nil, nil, fmt.Errorf("export needs --store and --out")
		}
		o := client.ExportOptions{Source: api.Source(source), Snapshot: snapshot, Filters: map[string]string{}}
		if columns != "" {
			o.Columns = strings.Split(columns, ",")
		}
		for _, kv := range filters {
			k, v, ok := strings.Cut(kv, "=")
			if !ok || k == "" {
				return nil, nil, fmt.Errorf("--filter %q: write column=value", kv)
			}
			o.Filters[k] = v
		}
		progress := cmd.ErrOrStderr()
		if quiet {
			progress = io.Discard
		}
		res, err := runExport(cmd.Context(), c, store, format, out, o, progress)
		if err != nil {
			return nil, nil, err
		}
		return res, line("%d rows of %s written to %s (%s, %d bytes, %.1f s)", res.Rows, store, out, format, res.Bytes, res.Seconds), nil
	})
	cmd.Flags().StringVar(&store, "store", "", "the store to export (required)")
	cmd.Flags().StringVar(&format, "format", "parquet", "parquet, jsonl or arrow (an Arrow IPC file)")
	cmd.Flags().StringVar(&out, "out", "", "a file, or s3://bucket/key (gs://, az:// too) (required)")
	cmd.Flags().StringVar(&source, "source", "", "fragments, wal or all (default all; fragments with --snapshot)")
	cmd.Flags().StringVar(&snapshot, "snapshot", "", "a base version to export: a snapshot's tag, a tag, or a version number")
	cmd.Flags().StringVar(&columns, "columns", "", "comma-separated columns (default every column but binary_payload)")
	cmd.Flags().StringArrayVar(&filters, "filter", nil, "column=value equality filter (repeatable)")
	cmd.Flags().BoolVar(&quiet, "quiet", false, "no progress line")
	return cmd
}

// sink is where an export's bytes go: Close commits them, Abort drops them.
type sink interface {
	io.Writer
	Close() error
	Abort() error
}

// fileSink writes a local file beside its name and renames it when whole.
type fileSink struct {
	f    *os.File
	dest string
}

func (s *fileSink) Write(p []byte) (int, error) { return s.f.Write(p) }

func (s *fileSink) Close() error {
	if err := s.f.Sync(); err != nil {
		_ = s.Abort()
		return err
	}
	if err := s.f.Close(); err != nil {
		_ = os.Remove(s.f.Name())
		return err
	}
	return os.Rename(s.f.Name(), s.dest)
}

func (s *fileSink) Abort() error {
	_ = s.f.Close()
	return os.Remove(s.f.Name())
}

// openSink opens out: an object store URL (s3://bucket/key, gs://, az://)
// or a local path.
func openSink(ctx context.Context, out string) (sink, error) {
	for _, scheme := range []string{"s3://", "gs://", "az://"} {
		rest, ok := strings.CutPrefix(out, scheme)
		if !ok {
			continue
		}
		bucket, key, _ := strings.Cut(rest, "/")
		if bucket == "" || key == "" || strings.HasSuffix(key, "/") {
			return nil, fmt.Errorf("--out %q: name an object, %sbucket/key", out, scheme)
		}
		st, err := objstore.Open(ctx, scheme+bucket)
		if err != nil {
			return nil, err
		}
		return st.Create(ctx, key)
	}
	if strings.Contains(out, "://") && !strings.HasPrefix(out, "file://") {
		return nil, fmt.Errorf("--out %q: a path, or s3://, gs://, az://", out)
	}
	dest := strings.TrimPrefix(out, "file://")
	f, err := os.CreateTemp(filepath.Dir(dest), "."+filepath.Base(dest)+".part-*")
	if err != nil {
		return nil, err
	}
	return &fileSink{f: f, dest: dest}, nil
}

// countingWriter counts the bytes written through it.
type countingWriter struct {
	w io.Writer
	n int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

// formatWriter writes batches in one output format.
type formatWriter interface {
	write(arrow.RecordBatch) error
	close() error
}

type jsonlOut struct{ w io.Writer }

func (j *jsonlOut) write(b arrow.RecordBatch) error { return array.RecordToJSON(b, j.w) }
func (j *jsonlOut) close() error                    { return nil }

type arrowOut struct{ fw *ipc.FileWriter }

func (a *arrowOut) write(b arrow.RecordBatch) error { return a.fw.Write(b) }
func (a *arrowOut) close() error                    { return a.fw.Close() }

// checkFormat refuses a bad --format before any request.
func checkFormat(format string) error {
	switch format {
	case "parquet", "jsonl", "arrow":
		return nil
	}
	return fmt.Errorf("--format %q: parquet, jsonl or arrow", format)
}

// newFormatWriter writes the formats made here from the Arrow stream.
func newFormatWriter(format string, schema *arrow.Schema, w io.Writer) (formatWriter, error) {
	switch format {
	case "jsonl":
		return &jsonlOut{w}, nil
	case "arrow":
		fw, err := ipc.NewFileWriter(w, ipc.WithSchema(schema))
		if err != nil {
			return nil, err
		}
		return &arrowOut{fw}, nil
	}
	return nil, fmt.Errorf("--format %q: jsonl or arrow from a stream", format)
}

// runExport streams the export into out in format, printing progress to
// progress about once a second. Parquet is encoded by the worker
// (format=parquet) and its bytes written here as they come: one encode,
// no Arrow IPC in between; JSON lines and Arrow are made here from the
// Arrow IPC stream.
func runExport(ctx context.Context, c *client.Client, store, format, out string, o client.ExportOptions, progress io.Writer) (*exportResult, error) {
	if err := checkFormat(format); err != nil {
		return nil, err // before any request
	}
	start := time.Now()
	var body io.Reader
	var st *client.ExportStream
	var resp *http.Response
	if format == "parquet" {
		o.Format = "parquet"
		r, err := c.OpenExport(ctx, store, o)
		if err != nil {
			return nil, err
		}
		defer r.Body.Close()
		resp, body = r, r.Body
	} else {
		s, err := c.OpenExportStream(ctx, store, o)
		if err != nil {
			return nil, err
		}
		defer s.Close()
		st = s
	}
	sk, err := openSink(ctx, out)
	if err != nil {
		return nil, err
	}
	committed := false
	defer func() {
		if !committed {
			_ = sk.Abort()
		}
	}()
	cw := &countingWriter{w: sk}
	var rows int64
	last := start
	tick := func() {
		now := time.Now()
		if now.Sub(last) < time.Second {
			return
		}
		last = now
		secs := now.Sub(start).Seconds()
		if st == nil { // Parquet bytes: the rows are counted at the end
			fmt.Fprintf(progress, "\rexport %s: %.1f MB, %.1f MB/s   ", store, float64(cw.n)/1e6, float64(cw.n)/1e6/secs)
			return
		}
		fmt.Fprintf(progress, "\rexport %s: %d rows, %.1f MB, %.0f rows/s   ", store, rows, float64(cw.n)/1e6, float64(rows)/secs)
	}
	if st == nil {
		buf := make([]byte, 1<<20)
		for {
			n, rerr := body.Read(buf)
			if n > 0 {
				if _, err := cw.Write(buf[:n]); err != nil {
					return nil, fmt.Errorf("export to %s: %w", out, err)
				}
				tick()
			}
			if rerr == io.EOF {
				break
			}
			if rerr != nil {
				return nil, fmt.Errorf("lance-context: export of %q after %d bytes: %w", store, cw.n, rerr)
			}
		}
		if rows, err = client.ExportRows(resp); err != nil {
			return nil, err // cut short: the file is not kept
		}
	} else {
		bw := bufio.NewWriterSize(cw, 1<<20) // the writers' many small writes
		fw, err := newFormatWriter(format, st.Schema(), bw)
		if err != nil {
			return nil, err
		}
		for st.Next() {
			b := st.RecordBatch()
			if err := fw.write(b); err != nil {
				return nil, fmt.Errorf("export to %s: %w", out, err)
			}
			rows += b.NumRows()
			tick()
		}
		if _, err := st.Finish(); err != nil {
			return nil, err
		}
		if err := fw.close(); err != nil {
			return nil, fmt.Errorf("export to %s: %w", out, err)
		}
		if err := bw.Flush(); err != nil {
			return nil, fmt.Errorf("export to %s: %w", out, err)
		}
	}
	if err := sk.Close(); err != nil {
		return nil, fmt.Errorf("export to %s: %w", out, err)
	}
	committed = true
	secs := time.Since(start).Seconds()
	if last != start {
		fmt.Fprintln(progress)
	}
	return &exportResult{Store: store, Out: out, Format: format, Rows: rows, Bytes: cw.n, Seconds: secs}, nil
}
