package client

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/ipc"

	"github.com/lance-context/lance-context/api"
)

// CreateSnapshot makes a base version holding everything the worker
// acknowledged before the call, tagged and leased for ttlSeconds (0: an
// hour). Any Lance engine reads it at Snapshot.URI, version or tag.
// Release it when done (or let it expire). Not retried: a retry would make
// a second snapshot (harmless, but a lease to release).
func (c *Client) CreateSnapshot(ctx context.Context, store string, ttlSeconds int64, holder string) (*api.Snapshot, error) {
	body, err := jsonBody(api.SnapshotRequest{TTLSeconds: ttlSeconds, Holder: holder})
	if err != nil {
		return nil, err
	}
	var out api.Snapshot
	if err := c.call(ctx, request{method: http.MethodPost, path: storePath(store, "snapshots"), body: body, contentType: "application/json"}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// Snapshot returns a live snapshot.
func (c *Client) Snapshot(ctx context.Context, store, id string) (*api.Snapshot, error) {
	var out api.Snapshot
	if err := c.call(ctx, request{method: http.MethodGet, path: storePath(store, "snapshots", url.PathEscape(id)), idempotent: true}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// Snapshots lists the store's live snapshots.
func (c *Client) Snapshots(ctx context.Context, store string) ([]api.Snapshot, error) {
	var out api.SnapshotsResponse
	if err := c.call(ctx, request{method: http.MethodGet, path: storePath(store, "snapshots"), idempotent: true}, &out); err != nil {
		return nil, err
	}
	return out.Snapshots, nil
}

// RenewSnapshot extends a live snapshot's lease to ttlSeconds from now.
func (c *Client) RenewSnapshot(ctx context.Context, store, id string, ttlSeconds int64) (*api.Snapshot, error) {
	body, err := jsonBody(api.SnapshotRequest{TTLSeconds: ttlSeconds})
	if err != nil {
		return nil, err
	}
	var out api.Snapshot
	if err := c.call(ctx, request{method: http.MethodPost, path: storePath(store, "snapshots", url.PathEscape(id), "renew"), body: body, contentType: "application/json", idempotent: true}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// ReleaseSnapshot deletes a snapshot's tag and releases its lease.
func (c *Client) ReleaseSnapshot(ctx context.Context, store, id string) error {
	return c.call(ctx, request{method: http.MethodDelete, path: storePath(store, "snapshots", url.PathEscape(id))}, nil)
}

// ExportOptions selects what Export streams.
type ExportOptions struct {
	// Source is fragments, wal or all; "" takes all (fragments with a
	// Snapshot).
	Source api.Source
	// Snapshot, when set, exports that base version: a snapshot's tag, any
	// tag, or a version number.
	Snapshot string
	// Columns to export, in order; nil: every column but binary_payload.
	Columns []string
	// Filters are the records listing's equality filters (column ->
	// value).
	Filters map[string]string
	// Format is what OpenExport asks for: "" or "arrow" (an Arrow IPC
	// stream), or "parquet" (one Parquet file, encoded by the server).
	// Export and OpenExportStream read Arrow only.
	Format string
}

func (o ExportOptions) query() url.Values {
	q := url.Values{}
	for k, v := range o.Filters {
		q.Set(k, v)
	}
	if o.Source != "" {
		q.Set("source", string(o.Source))
	}
	if o.Snapshot != "" {
		q.Set("snapshot", o.Snapshot)
	}
	if len(o.Columns) > 0 {
		q.Set("columns", strings.Join(o.Columns, ","))
	}
	if o.Format != "" {
		q.Set("format", o.Format)
	}
	return q
}

// ErrExportCut is returned when an export stream ends without the server's
// row count after it: the stream was cut short.
var ErrExportCut = errors.New("lance-context: the export stream ended before the server finished it")

// OpenExport starts an export and returns its raw body: an Arrow IPC
// stream (read it with arrow/ipc.NewReader), or with Format "parquet" a
// Parquet file's bytes; the caller closes it. Only the request is
// retried. Export checks the end of the stream; a raw reader should read
// to EOF and then check ExportRows.
func (c *Client) OpenExport(ctx context.Context, store string, o ExportOptions) (*http.Response, error) {
	accept := api.ArrowStream
	if o.Format == "parquet" {
		accept = api.ParquetFile
	}
	return c.do(ctx, request{method: http.MethodGet, path: storePath(store, "export"), query: o.query(), accept: accept, idempotent: true})
}

// ExportRows returns the row count the server sent after a whole export
// stream (resp's body read to EOF), or ErrExportCut.
func ExportRows(resp *http.Response) (int64, error) {
	v := resp.Trailer.Get(api.ExportRowsTrailer)
	if v == "" {
		return 0, ErrExportCut
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("lance-context: export row count %q: %w", v, err)
	}
	return n, nil
}

// ExportStream is an export being read: an Arrow IPC reader (Schema,
// Next, RecordBatch) whose Finish checks that the stream was whole.
type ExportStream struct {
	*ipc.Reader
	store string
	resp  *http.Response
	rows  int64
}

// OpenExportStream starts an export and returns it as an ExportStream; the
// caller reads it with Next and RecordBatch, then calls Finish, and always
// Close.
func (c *Client) OpenExportStream(ctx context.Context, store string, o ExportOptions) (*ExportStream, error) {
	if o.Format != "" && o.Format != "arrow" {
		return nil, fmt.Errorf("lance-context: an export stream is Arrow; read format %q with OpenExport", o.Format)
	}
	resp, err := c.OpenExport(ctx, store, o)
	if err != nil {
		return nil, err
	}
	rd, err := ipc.NewReader(resp.Body)
	if err != nil {
		resp.Body.Close()
		return nil, fmt.Errorf("lance-context: export of %q: %w", store, err)
	}
	return &ExportStream{Reader: rd, store: store, resp: resp}, nil
}

// Next moves to the next batch (RecordBatch), counting its rows.
func (s *ExportStream) Next() bool {
	if !s.Reader.Next() {
		return false
	}
	s.rows += s.Reader.RecordBatch().NumRows()
	return true
}

// Finish, after Next returned false, checks that the stream ended as the
// server ended it, with as many rows as it sent, and returns that count.
func (s *ExportStream) Finish() (int64, error) {
	if err := s.Reader.Err(); err != nil {
		return s.rows, fmt.Errorf("lance-context: export of %q after %d rows: %w", s.store, s.rows, err)
	}
	if _, err := io.Copy(io.Discard, s.resp.Body); err != nil { // to the trailer
		return s.rows, fmt.Errorf("lance-context: export of %q after %d rows: %w", s.store, s.rows, err)
	}
	want, err := ExportRows(s.resp)
	if err != nil {
		return s.rows, err
	}
	if want != s.rows {
		return s.rows, fmt.Errorf("lance-context: export of %q: read %d rows, the server sent %d", s.store, s.rows, want)
	}
	return s.rows, nil
}

// Close releases the reader and closes the response.
func (s *ExportStream) Close() error {
	s.Reader.Release()
	return s.resp.Body.Close()
}

// Export streams the store's rows that o selects to fn, batch by batch
// (fn must not keep a batch after it returns; Retain it to), and returns
// how many rows it read. A stream that ends early, or holds another count
// than the server sent, is an error (after fn saw what arrived).
func (c *Client) Export(ctx context.Context, store string, o ExportOptions, fn func(arrow.RecordBatch) error) (int64, error) {
	st, err := c.OpenExportStream(ctx, store, o)
	if err != nil {
		return 0, err
	}
	defer st.Close()
	for st.Next() {
		if err := fn(st.RecordBatch()); err != nil {
			return st.rows, err
		}
	}
	return st.Finish()
}
