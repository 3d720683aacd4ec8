package worker

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/ipc"

	"github.com/lance-context/lance-context/api"
	"github.com/lance-context/lance-context/httpapi"
	"github.com/lance-context/lance-context/rollout"
)

// exportWriteWindow is how long one batch may take to reach the client:
// each batch extends the write deadline by it, so an export outlives the
// server's write timeout (meant for requests, not for streams of minutes)
// as long as the client reads.
const exportWriteWindow = 2 * time.Minute

// exportQuery reads GET .../export's parameters: format (arrow or
// parquet), source, snapshot (a tag or a version number), columns
// (comma-separated) and the records listing's filters, as parameters or
// filters={...}.
func exportQuery(r *http.Request, st *rollout.Store) (rollout.ExportOptions, string, error) {
	o, err := exportOptions(r, st)
	if err != nil {
		return o, "", err
	}
	q := r.URL.Query()
	if len(q["format"]) > 1 {
		return o, "", httpapi.Errorf(http.StatusBadRequest, api.CodeInvalidRequest, "format given %d times; give it once", len(q["format"]))
	}
	format, err := rollout.ParseFormat(q.Get("format"))
	return o, format, err
}

func exportOptions(r *http.Request, st *rollout.Store) (rollout.ExportOptions, error) {
	var o rollout.ExportOptions
	q := r.URL.Query()
	q.Del("format") // read by exportQuery
	for _, k := range []string{"limit", "offset", "cursor"} {
		if q.Has(k) {
			return o, httpapi.Errorf(http.StatusBadRequest, api.CodeInvalidRequest,
				"%s is not taken by export: it streams every matching row (page with GET .../records)", k)
		}
	}
	snap, cols := q.Get("snapshot"), q.Get("columns")
	for _, k := range []string{"snapshot", "columns"} {
		if len(q[k]) > 1 {
			return o, httpapi.Errorf(http.StatusBadRequest, api.CodeInvalidRequest, "%s given %d times; give it once", k, len(q[k]))
		}
	}
	if q.Has("snapshot") && snap == "" {
		return o, httpapi.Errorf(http.StatusBadRequest, api.CodeInvalidRequest, "snapshot is empty: give a tag or a version number")
	}
	q.Del("snapshot")
	q.Del("columns")
	// The records listing's parser reads source and the filters (and
	// rejects unknown parameters as filters it cannot apply).
	lr := r.Clone(r.Context())
	lr.URL = &url.URL{Path: r.URL.Path, RawQuery: q.Encode()}
	def := rollout.SourceAll
	if snap != "" {
		def = rollout.SourceFragments
	}
	lo, err := httpapi.ListQuery(lr, 1, def)
	if err != nil {
		return o, err
	}
	o.Source, o.Filters = lo.Source, lo.Filters
	if cols != "" {
		for _, c := range strings.Split(cols, ",") {
			if c = strings.TrimSpace(c); c == "" {
				return o, httpapi.Errorf(http.StatusBadRequest, api.CodeInvalidRequest, "columns has an empty name in %q", cols)
			}
			o.Columns = append(o.Columns, c)
		}
	}
	if err := rollout.CheckExport(&o); err != nil {
		return o, err
	}
	if snap != "" {
		if o.Version, err = st.ResolveVersion(r.Context(), snap); err != nil {
			return o, err
		}
		if err := rollout.CheckExport(&o); err != nil {
			return o, err
		}
	}
	return o, nil
}

// batchWriter encodes an export's batches onto the response.
type batchWriter interface {
	Write(arrow.RecordBatch) error
	Close() error
}

// export streams GET .../export batch by batch: an Arrow IPC stream, or
// (format=parquet) one Parquet file whose row groups go out as they fill.
// Everything that can be refused is refused before the first byte; a
// failure after it aborts the connection (the client sees a cut stream,
// never a short one that looks whole) and the rows trailer
// (api.ExportRowsTrailer) comes only after the whole stream.
func (s *Server) export(w http.ResponseWriter, r *http.Request) {
	st, err := s.store(r)
	if err != nil {
		httpapi.WriteError(w, r, err)
		return
	}
	o, format, err := exportQuery(r, st)
	if err != nil {
		httpapi.WriteError(w, r, err)
		return
	}
	schema := rollout.ExportSchema(o.Columns)
	rc := http.NewResponseController(w)
	// The status goes out with the first byte, not before: a failure
	// before any byte reached the connection (a Parquet row group fills
	// before its first byte leaves) is still answered as an error.
	ct := api.ArrowStream
	if format == rollout.FormatParquet {
		ct = api.ParquetFile
	}
	lw := &lazyStart{w: w, start: func() {
		w.Header().Set("Content-Type", ct)
		w.Header().Set("Trailer", api.ExportRowsTrailer)
		w.WriteHeader(http.StatusOK)
	}}
	// 64 KiB: the stream's small pieces (messages' metadata, padding,
	// short buffers) are gathered into chunks; a column's buffer larger
	// than what is free goes to the connection without a copy (with 1 MiB
	// every byte was copied once: 10% of the export's CPU on 35 columns).
	bw := bufio.NewWriterSize(lw, 64<<10)
	var enc batchWriter
	var rows int64
	begin := func() error {
		if format == rollout.FormatParquet {
			pw, err := rollout.NewParquetWriter(bw, schema)
			if err != nil {
				return err
			}
			enc = pw
		} else {
			enc = ipc.NewWriter(bw, ipc.WithSchema(schema))
		}
		return nil
	}
	began := false
	start := time.Now()
	err = pipelined(r.Context(), func(ctx context.Context, fn func(arrow.RecordBatch) error) error {
		return st.Export(ctx, o, fn)
	}, func(b arrow.RecordBatch) error {
		if !began {
			began = true
			if err := begin(); err != nil {
				return err
			}
		}
		// A Parquet row group's bytes go out when it fills: one batch's
		// write may send a row group (up to about 128 MiB).
		_ = rc.SetWriteDeadline(time.Now().Add(exportWriteWindow))
		rows += b.NumRows()
		return enc.Write(b)
	})
	if err == nil && !began {
		began = true
		err = begin() // no rows: a stream of the schema alone, a Parquet file without row groups
	}
	if err == nil {
		_ = rc.SetWriteDeadline(time.Now().Add(exportWriteWindow))
		err = enc.Close() // the end-of-stream marker, or the last row group and the footer
	}
	if err == nil {
		err = bw.Flush()
	}
	if err != nil {
		if !lw.started {
			httpapi.WriteError(w, r, err)
			return
		}
		s.log.Warn("export failed mid-stream; aborting the response", "store", st.Name(), "format", format, "rows_sent", rows, "err", err)
		panic(http.ErrAbortHandler)
	}
	w.Header().Set(api.ExportRowsTrailer, strconv.FormatInt(rows, 10))
	s.log.Info("export", "store", st.Name(), "format", format, "source", o.Source, "version", o.Version, "columns", len(o.Columns), "rows", rows, "seconds", time.Since(start).Seconds())
}

// lazyStart calls start before the first byte written through it.
type lazyStart struct {
	w       io.Writer
	start   func()
	started bool
}

func (l *lazyStart) Write(p []byte) (int, error) {
	if !l.started {
		l.started = true
		l.start()
	}
	return l.w.Write(p)
}

// exportAhead is how many batches the scan may read ahead of the writer.
const exportAhead = 2

// pipelined runs scan in a goroutine, handing its batches to write through
// a channel of exportAhead: reading the next batch overlaps encoding and
// sending this one, and memory holds at most exportAhead+2 batches.
func pipelined(ctx context.Context, scan func(context.Context, func(arrow.RecordBatch) error) error, write func(arrow.RecordBatch) error) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	ch := make(chan arrow.RecordBatch, exportAhead)
	errc := make(chan error, 1)
	go func() {
		defer close(ch)
		errc <- scan(ctx, func(b arrow.RecordBatch) error {
			b.Retain()
			select {
			case ch <- b:
				return nil
			case <-ctx.Done():
				b.Release()
				return ctx.Err()
			}
		})
	}()
	var werr error
	for b := range ch {
		if werr == nil {
			werr = write(b)
			if werr != nil {
				cancel() // stop the scan; drain what it sent
			}
		}
		b.Release()
	}
	if err := <-errc; werr == nil && err != nil {
		return err
	}
	return werr
}
