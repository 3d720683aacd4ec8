package client

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"iter"
	"math/rand/v2"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/google/uuid"

	"github.com/lance-context/lance-context/api"
)

// RetryPolicy says how idempotent calls are retried. Zero fields take the
// defaults of DefaultRetryPolicy.
type RetryPolicy struct {
	// MaxAttempts counts every attempt, the first included; 1 disables
	// retries. Default 5.
	MaxAttempts int
	// BaseBackoff is the wait before the first retry; it doubles per retry,
	// with jitter. Default 200ms.
	BaseBackoff time.Duration
	// MaxBackoff caps one wait, a server's Retry-After included. Default 30s.
	MaxBackoff time.Duration
}

// DefaultRetryPolicy is used when no WithRetry option is given.
var DefaultRetryPolicy = RetryPolicy{MaxAttempts: 5, BaseBackoff: 200 * time.Millisecond, MaxBackoff: 30 * time.Second}

func (p RetryPolicy) withDefaults() RetryPolicy {
	if p.MaxAttempts <= 0 {
		p.MaxAttempts = DefaultRetryPolicy.MaxAttempts
	}
	if p.BaseBackoff <= 0 {
		p.BaseBackoff = DefaultRetryPolicy.BaseBackoff
	}
	if p.MaxBackoff <= 0 {
		p.MaxBackoff = DefaultRetryPolicy.MaxBackoff
	}
	if p.MaxBackoff < p.BaseBackoff {
		p.MaxBackoff = p.BaseBackoff
	}
	return p
}

// Client calls one worker (or anything serving the same API). It is safe
// for concurrent use.
type Client struct {
	base      string // scheme://host[:port][/prefix], no trailing slash
	token     string
	hc        *http.Client
	retry     RetryPolicy
	userAgent string

	// sleep waits d or until ctx ends; tests replace it.
	sleep func(ctx context.Context, d time.Duration) error
}

// Option configures a Client.
type Option func(*Client)

// WithToken sends "Authorization: Bearer token" on every request (the
// worker's LC_API_TOKEN). An empty token sends nothing.
func WithToken(token string) Option { return func(c *Client) { c.token = token } }

// WithHTTPClient uses hc (timeouts, transport, proxies) instead of
// http.DefaultClient.
func WithHTTPClient(hc *http.Client) Option {
	return func(c *Client) {
		if hc != nil {
			c.hc = hc
		}
	}
}

// WithRetry sets the retry policy of idempotent calls.
func WithRetry(p RetryPolicy) Option { return func(c *Client) { c.retry = p.withDefaults() } }

// WithUserAgent sets the User-Agent header.
func WithUserAgent(ua string) Option { return func(c *Client) { c.userAgent = ua } }

// New returns a client of the worker at baseURL, e.g.
// "http://127.0.0.1:8080". A URL without a scheme gets "http://"; a path
// prefix (behind a proxy) is kept.
func New(baseURL string, opts ...Option) *Client {
	base := strings.TrimSpace(baseURL)
	if !strings.Contains(base, "://") {
		base = "http://" + base
	}
	c := &Client{
		base:      strings.TrimRight(base, "/"),
		hc:        http.DefaultClient,
		retry:     DefaultRetryPolicy,
		userAgent: "lance-context-go-client",
		sleep:     sleepCtx,
	}
	for _, o := range opts {
		o(c)
	}
	return c
}

// BaseURL returns the URL the client calls.
func (c *Client) BaseURL() string { return c.base }

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// APIError is an error response of the API.
type APIError struct {
	Status int    // HTTP status
	Code   string // stable code of the error envelope, e.g. "NOT_FOUND"; empty when the body was not the envelope
	// Message says what went wrong and usually what to do.
	Message string
	// RetryAfter is the server's Retry-After, 0 when absent.
	RetryAfter time.Duration
}

func (e *APIError) Error() string {
	code := e.Code
	if code == "" {
		code = http.StatusText(e.Status)
	}
	return fmt.Sprintf("lance-context: %d %s: %s", e.Status, code, e.Message)
}

// Temporary reports whether retrying later may succeed (a 502, 503 or 504).
func (e *APIError) Temporary() bool { return retryableStatus(e.Status) }

// IsCode reports whether err is (or wraps) an *APIError with the code.
func IsCode(err error, code string) bool {
	var ae *APIError
	return errors.As(err, &ae) && strings.EqualFold(ae.Code, code)
}

// IsNotFound reports whether err is a 404 of the API (a missing store,
// record or payload).
func IsNotFound(err error) bool {
	var ae *APIError
	return errors.As(err, &ae) && ae.Status == http.StatusNotFound
}

func retryableStatus(status int) bool {
	return status == http.StatusBadGateway || status == http.StatusServiceUnavailable || status == http.StatusGatewayTimeout
}

// request is one API call.
type request struct {
	method      string
	path        string // escaped, from the API root: "/api/v1/..."
	query       url.Values
	body        []byte
	contentType string
	accept      string // default application/json
	idempotent  bool
	// open, when set, makes the body of each attempt instead of body (a
	// stream too large to hold, rewound for a retry).
	open func() (io.Reader, error)
}

// do sends rq, retrying as the policy allows, and returns a response with a
// 2xx status; the caller closes its body. Other statuses become *APIError.
func (c *Client) do(ctx context.Context, rq request) (*http.Response, error) {
	u := c.base + rq.path
	if len(rq.query) > 0 {
		u += "?" + rq.query.Encode()
	}
	attempts := 1
	if rq.idempotent {
		attempts = c.retry.MaxAttempts
	}
	for attempt := 1; ; attempt++ {
		resp, err := c.once(ctx, rq, u)
		if err == nil && resp.StatusCode < 300 {
			return resp, nil
		}
		retry := false
		var after time.Duration
		if err != nil {
			if ctx.Err() != nil {
				return nil, fmt.Errorf("lance-context: %s %s: %w", rq.method, rq.path, ctx.Err())
			}
			err = fmt.Errorf("lance-context: %s %s: %w", rq.method, rq.path, err)
			retry = transientTransportError(err)
		} else {
			ae := decodeError(resp)
			err, retry, after = ae, retryableStatus(ae.Status), ae.RetryAfter
		}
		if !retry || attempt >= attempts {
			if attempt > 1 {
				return nil, fmt.Errorf("giving up after %d attempts: %w", attempt, err)
			}
			return nil, err
		}
		if serr := c.sleep(ctx, c.backoff(attempt, after)); serr != nil {
			return nil, fmt.Errorf("lance-context: %s %s: %w (while waiting to retry after: %v)", rq.method, rq.path, serr, err)
		}
	}
}

func (c *Client) once(ctx context.Context, rq request, u string) (*http.Response, error) {
	var body io.Reader
	if rq.body != nil {
		body = bytes.NewReader(rq.body)
	}
	if rq.open != nil {
		var err error
		if body, err = rq.open(); err != nil {
			return nil, err
		}
	}
	req, err := http.NewRequestWithContext(ctx, rq.method, u, body)
	if err != nil {
		return nil, err
	}
	if rq.contentType != "" {
		req.Header.Set("Content-Type", rq.contentType)
	}
	accept := rq.accept
	if accept == "" {
		accept = "application/json"
	}
	req.Header.Set("Accept", accept)
	if c.userAgent != "" {
		req.Header.Set("User-Agent", c.userAgent)
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	return c.hc.Do(req)
}

// transientTransportError reports whether a failed round trip may succeed
// when tried again: anything but a bad URL or a TLS certificate problem.
func transientTransportError(err error) bool {
	var ue *url.Error
	if errors.As(err, &ue) && (ue.Op == "parse" || strings.Contains(ue.Err.Error(), "unsupported protocol scheme")) {
		return false
	}
	var cve *tls.CertificateVerificationError
	var uae x509.UnknownAuthorityError
	var hne x509.HostnameError
	var cie x509.CertificateInvalidError
	return !errors.As(err, &cve) && !errors.As(err, &uae) && !errors.As(err, &hne) && !errors.As(err, &cie)
}

// backoff returns the wait before retry number attempt (1-based): full
// exponential backoff with equal jitter, at least the server's Retry-After,
// all capped at MaxBackoff.
func (c *Client) backoff(attempt int, retryAfter time.Duration) time.Duration {
	p := c.retry
	d := p.BaseBackoff
	for i := 1; i < attempt && d < p.MaxBackoff; i++ {
		d *= 2
	}
	d = min(d, p.MaxBackoff)
	d = d/2 + rand.N(d/2+1)
	if retryAfter > 0 {
		d = max(d, min(retryAfter, p.MaxBackoff))
	}
	return d
}

// decodeError reads an error response (and closes its body).
func decodeError(resp *http.Response) *APIError {
	defer resp.Body.Close()
	raw, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	ae := &APIError{Status: resp.StatusCode, RetryAfter: parseRetryAfter(resp.Header.Get("Retry-After"))}
	var env struct {
		Error *struct {
			Code    string `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if json.Unmarshal(raw, &env) == nil && env.Error != nil && (env.Error.Code != "" || env.Error.Message != "") {
		ae.Code, ae.Message = env.Error.Code, env.Error.Message
		return ae
	}
	msg := strings.TrimSpace(string(raw))
	if len(msg) > 512 {
		msg = msg[:512] + "..."
	}
	if msg == "" {
		msg = http.StatusText(resp.StatusCode)
	}
	ae.Message = msg
	return ae
}

// parseRetryAfter reads delay-seconds or an HTTP date; 0 when absent or bad.
func parseRetryAfter(v string) time.Duration {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0
	}
	if n, err := strconv.Atoi(v); err == nil {
		if n < 0 {
			return 0
		}
		return time.Duration(n) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil {
		if d := time.Until(t); d > 0 {
			return d
		}
	}
	return 0
}

// call does rq and decodes a JSON response into out (nil: discard).
func (c *Client) call(ctx context.Context, rq request, out any) error {
	resp, err := c.do(ctx, rq)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if out == nil {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
		return nil
	}
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		return fmt.Errorf("lance-context: %s %s: decoding the %d response: %w", rq.method, rq.path, resp.StatusCode, err)
	}
	return nil
}

func jsonBody(v any) ([]byte, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("lance-context: encoding the request: %w", err)
	}
	return b, nil
}

func storePath(store string, rest ...string) string {
	var b strings.Builder
	b.WriteString("/api/v1/rollouts/")
	b.WriteString(url.PathEscape(store))
	for _, r := range rest {
		b.WriteByte('/')
		b.WriteString(r)
	}
	return b.String()
}

// Health is the answer of GET /api/v1/health.
type Health struct {
	Status     string `json:"status"`
	Role       string `json:"role"`
	InstanceID string `json:"instance_id"`
	ShardID    string `json:"shard_id"`
}

// Health checks that the worker is up. It needs no token.
func (c *Client) Health(ctx context.Context) (*Health, error) {
	var h Health
	if err := c.call(ctx, request{method: http.MethodGet, path: "/api/v1/health", idempotent: true}, &h); err != nil {
		return nil, err
	}
	return &h, nil
}

// StoreInfo identifies a store (api.StoreInfo): its name, where it lives,
// and (from CreateStore) its base table version.
type StoreInfo = api.StoreInfo

// CreateStore creates a store. An existing store is an *APIError with
// status 409 and code ALREADY_EXISTS. Not retried.
func (c *Client) CreateStore(ctx context.Context, name string) (*StoreInfo, error) {
	body, err := jsonBody(api.CreateStoreRequest{Name: name})
	if err != nil {
		return nil, err
	}
	var out StoreInfo
	if err := c.call(ctx, request{method: http.MethodPost, path: "/api/v1/rollouts", body: body, contentType: "application/json"}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// ListStores returns every store, sorted by name.
func (c *Client) ListStores(ctx context.Context) ([]StoreInfo, error) {
	var out api.ListStoresResponse
	if err := c.call(ctx, request{method: http.MethodGet, path: "/api/v1/rollouts", idempotent: true}, &out); err != nil {
		return nil, err
	}
	return out.Stores, nil
}

// Stats returns a store's row counts, fragments, versions and WAL backlog.
func (c *Client) Stats(ctx context.Context, store string) (*api.Stats, error) {
	var out api.Stats
	if err := c.call(ctx, request{method: http.MethodGet, path: storePath(store), idempotent: true}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// DeleteStore removes a store and all its data. Not retried.
func (c *Client) DeleteStore(ctx context.Context, store string) error {
	return c.call(ctx, request{method: http.MethodDelete, path: storePath(store)}, nil)
}

// AppendOptions tunes an append.
type AppendOptions struct {
	// Flush seals the rows before the response, so they are readable (in
	// the "wal" source) when Append returns. It costs a WAL seal per call:
	// use it at the end of a batch of appends, not on every one.
	Flush bool
}

// AppendResult is the answer of an append: the ids in input order, and
// the base table version the worker last saw (appends do not advance it).
type AppendResult = api.AppendResponse

// Append makes records durable. Records without an id get a UUIDv7, and
// records without created_at the time of the call, before the first attempt
// (the caller's slice is not modified), so a retry writes exactly the same
// rows; the ids are in the result, in input order.
func (c *Client) Append(ctx context.Context, store string, recs []api.Record, o AppendOptions) (*AppendResult, error) {
	recs = slices.Clone(recs)
	now := time.Now().UTC().Truncate(time.Microsecond) // the column's unit
	for i := range recs {
		if recs[i].ID == "" {
			recs[i].ID = newID()
		}
		if recs[i].CreatedAt == nil {
			recs[i].CreatedAt = &now
		}
	}
	body, err := jsonBody(api.AppendRequest{Records: recs})
	if err != nil {
		return nil, err
	}
	return c.appendBody(ctx, store, body, "application/json", o.Flush)
}

// AppendArrow appends the rows of an Arrow batch whose columns are any
// subset of the rollout schema (by name and type), sent as an Arrow IPC
// stream. When the batch has no "id" column, or null or empty ids, the
// client sends a copy with UUIDv7 ids filled in, so retries are idempotent.
// The caller keeps ownership of batch.
func (c *Client) AppendArrow(ctx context.Context, store string, batch arrow.RecordBatch, flush bool) (*AppendResult, error) {
	withIDs, err := fillArrowIDs(batch)
	if err != nil {
		return nil, err
	}
	defer withIDs.Release()
	var buf bytes.Buffer
	w := ipc.NewWriter(&buf, ipc.WithSchema(withIDs.Schema()))
	if err := w.Write(withIDs); err != nil {
		return nil, fmt.Errorf("lance-context: encoding the Arrow stream: %w", err)
	}
	if err := w.Close(); err != nil {
		return nil, fmt.Errorf("lance-context: encoding the Arrow stream: %w", err)
	}
	return c.appendBody(ctx, store, buf.Bytes(), api.ArrowStream, flush)
}

func (c *Client) appendBody(ctx context.Context, store string, body []byte, ctype string, flush bool) (*AppendResult, error) {
	rq := request{method: http.MethodPost, path: storePath(store, "records"), body: body, contentType: ctype, idempotent: true}
	if flush {
		rq.query = url.Values{"flush": {"true"}}
	}
	var out AppendResult
	if err := c.call(ctx, rq, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

func newID() string { return uuid.Must(uuid.NewV7()).String() }

// fillArrowIDs returns batch (retained) or a copy with ids filled in.
func fillArrowIDs(batch arrow.RecordBatch) (arrow.RecordBatch, error) {
	n := int(batch.NumRows())
	sch := batch.Schema()
	cols := slices.Clone(batch.Columns())
	fields := slices.Clone(sch.Fields())
	idx := sch.FieldIndices("id")
	var col arrow.Array
	switch {
	case len(idx) == 0:
		b := array.NewStringBuilder(memory.DefaultAllocator)
		defer b.Release()
		for range n {
			b.Append(newID())
		}
		col = b.NewArray()
		fields = append(fields, arrow.Field{Name: "id", Type: arrow.BinaryTypes.String})
		cols = append(cols, col)
	default:
		old := batch.Column(idx[0])
		sv, ok := old.(interface {
			IsNull(int) bool
			Value(int) string
		})
		if !ok {
			return nil, fmt.Errorf("lance-context: column %q is %s; want a string column", "id", old.DataType())
		}
		missing := false
		for i := range n {
			if sv.IsNull(i) || sv.Value(i) == "" {
				missing = true
				break
			}
		}
		if !missing {
			batch.Retain()
			return batch, nil
		}
		b := array.NewBuilder(memory.DefaultAllocator, old.DataType())
		defer b.Release()
		for i := range n {
			v := ""
			if !sv.IsNull(i) {
				v = sv.Value(i)
			}
			if v == "" {
				v = newID()
			}
			switch sb := b.(type) {
			case *array.StringBuilder:
				sb.Append(v)
			case *array.LargeStringBuilder:
				sb.Append(v)
			case *array.StringViewBuilder:
				sb.Append(v)
			default:
				return nil, fmt.Errorf("lance-context: column %q is %s; want utf8 or large_utf8", "id", old.DataType())
			}
		}
		col = b.NewArray()
		cols[idx[0]] = col
	}
	defer col.Release()
	md := sch.Metadata()
	return array.NewRecordBatch(arrow.NewSchema(fields, &md), cols, int64(n)), nil
}

// ListOptions selects a page of records. Records are in id order.
type ListOptions struct {
	// Source is "fragments" (the merged base table), "wal" (flushed rows
	// not yet merged) or "all" (both, newest write of an id winning). Empty
	// takes the server's default: "all" on a worker, "fragments" on a
	// master.
	Source api.Source
	// Filters are equality filters on id, rollout_id, problem_id, dataset,
	// role, content_type, policy_version, artifact_type or
	// include_in_training ("true"/"false"). Empty values are ignored.
	Filters map[string]string
	// Limit is the page size, 1..1000; 0 takes the server's default (25).
	Limit int
	// Offset skips that many matching records (after Cursor). Use it for
	// page numbers; while merges run it can skip or repeat rows.
	Offset int
	// Cursor continues a listing after the page whose NextCursor it is:
	// following cursors returns every row exactly once, merges or not.
	Cursor string
	// Version reads base version Version alone (a number or a tag name),
	// as a checkout of it does, without pinning the worker.
	Version string
}

func (o ListOptions) query() url.Values {
	q := url.Values{}
	for k, v := range o.Filters {
		q.Set(k, v)
	}
	if o.Source != "" {
		q.Set("source", string(o.Source))
	}
	if o.Limit != 0 {
		q.Set("limit", strconv.Itoa(o.Limit))
	}
	if o.Offset != 0 {
		q.Set("offset", strconv.Itoa(o.Offset))
	}
	if o.Cursor != "" {
		q.Set("cursor", o.Cursor)
	}
	if o.Version != "" {
		q.Set("version", o.Version)
	}
	return q
}

// ListPage is one page of records (api.ListResponse). Records carry no
// binary_payload: fetch it with Blob.
type ListPage = api.ListResponse

// List returns one page of records.
func (c *Client) List(ctx context.Context, store string, o ListOptions) (*ListPage, error) {
	var out ListPage
	if err := c.call(ctx, request{method: http.MethodGet, path: storePath(store, "records"), query: o.query(), idempotent: true}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// DefaultPageSize is the page size of Iterate and ListAll when
// ListOptions.Limit is 0.
const DefaultPageSize = 500

// Iterate yields every record matching o from o.Offset on, fetching pages
// of o.Limit (DefaultPageSize when 0) by cursor until the last one: each
// record that existed when it began exactly once, even while merges run.
// An error ends the sequence after being yielded.
func (c *Client) Iterate(ctx context.Context, store string, o ListOptions) iter.Seq2[api.Record, error] {
	if o.Limit == 0 {
		o.Limit = DefaultPageSize
	}
	return func(yield func(api.Record, error) bool) {
		for {
			page, err := c.List(ctx, store, o)
			if err != nil {
				yield(api.Record{}, err)
				return
			}
			for _, r := range page.Records {
				if !yield(r, nil) {
					return
				}
			}
			if !page.HasMore || page.NextCursor == "" {
				return
			}
			o.Cursor, o.Offset = page.NextCursor, 0
		}
	}
}

// ListAll returns every record matching o (see Iterate).
func (c *Client) ListAll(ctx context.Context, store string, o ListOptions) ([]api.Record, error) {
	var out []api.Record
	for r, err := range c.Iterate(ctx, store, o) {
		if err != nil {
			return out, err
		}
		out = append(out, r)
	}
	return out, nil
}

// Get returns the newest version of a record (WAL and base table), without
// its payload. A missing record is an *APIError with status 404 and code
// NOT_FOUND (the server answers {"record": null}).
func (c *Client) Get(ctx context.Context, store, id string) (*api.Record, error) {
	var out api.GetRecordResponse
	if err := c.call(ctx, request{method: http.MethodGet, path: storePath(store, "records", url.PathEscape(id)), idempotent: true}, &out); err != nil {
		return nil, err
	}
	if out.Record == nil {
		return nil, &APIError{Status: http.StatusNotFound, Code: api.CodeNotFound, Message: fmt.Sprintf("no record %q in store %q", id, store)}
	}
	return out.Record, nil
}

// OpenBlob streams a record's binary payload; the caller closes it. The
// second result is its content type ("application/octet-stream" unless the
// record has a content_type other than text/plain). Retries cover the
// request, not the reading of the body.
func (c *Client) OpenBlob(ctx context.Context, store, id string) (io.ReadCloser, string, error) {
	resp, err := c.do(ctx, request{method: http.MethodGet, path: storePath(store, "records", url.PathEscape(id), "blob"), idempotent: true})
	if err != nil {
		return nil, "", err
	}
	return resp.Body, resp.Header.Get("Content-Type"), nil
}

// Blob returns a record's binary payload and its content type. A record
// without a payload is a 404 (code NOT_FOUND).
func (c *Client) Blob(ctx context.Context, store, id string) ([]byte, string, error) {
	rc, ctype, err := c.OpenBlob(ctx, store, id)
	if err != nil {
		return nil, "", err
	}
	defer rc.Close()
	data, err := io.ReadAll(rc)
	if err != nil {
		return nil, "", fmt.Errorf("lance-context: reading the payload of %q: %w", id, err)
	}
	return data, ctype, nil
}

// Trajectory returns the records of one rollout (WAL and base table)
// ordered by sequence_order, then id. An unknown rollout is empty, not an
// error.
func (c *Client) Trajectory(ctx context.Context, store, rolloutID string) ([]api.Record, error) {
	var out api.TrajectoryResponse
	if err := c.call(ctx, request{method: http.MethodGet, path: storePath(store, "trajectories", url.PathEscape(rolloutID)), idempotent: true}, &out); err != nil {
		return nil, err
	}
	return out.Records, nil
}

// Flush seals the worker's buffered rows of the store, making them
// readable (source "wal" or "all").
func (c *Client) Flush(ctx context.Context, store string) error {
	return c.call(ctx, request{method: http.MethodPost, path: storePath(store, "flush"), idempotent: true}, nil)
}

// Merge runs one merge pass of the worker's shard: it seals buffered rows
// and folds pending generations into the base table ("fragments"). Call it
// until Remaining is 0 to drain the backlog.
func (c *Client) Merge(ctx context.Context, store string) (*api.MergeResult, error) {
	var out api.MergeResult
	if err := c.call(ctx, request{method: http.MethodPost, path: storePath(store, "merge"), idempotent: true}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// CompactResult is the answer of a compaction.
type CompactResult = api.CompactResponse

// Compact rewrites the base table's small fragments into fewer large ones
// (o nil: the server's defaults). A compaction already running is an
// *APIError with status 409 and code COMPACTION_IN_PROGRESS.
func (c *Client) Compact(ctx context.Context, store string, o *api.CompactRequest) (*CompactResult, error) {
	var body []byte
	if o != nil {
		var err error
		if body, err = jsonBody(o); err != nil {
			return nil, err
		}
	}
	var out CompactResult
	if err := c.call(ctx, request{method: http.MethodPost, path: storePath(store, "compact"), body: body, contentType: "application/json", idempotent: true}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// CompactionStats reports the store's fragments and this worker's
// compactions.
func (c *Client) CompactionStats(ctx context.Context, store string) (*api.CompactStatsResponse, error) {
	var out api.CompactStatsResponse
	if err := c.call(ctx, request{method: http.MethodGet, path: storePath(store, "compact", "stats"), idempotent: true}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// Checkout pins the worker's reads of the store to base table version v
// (time travel: the base at v, without the WAL tier); checking out the
// latest version unpins. It returns the version reads now see.
func (c *Client) Checkout(ctx context.Context, store string, v uint64) (uint64, error) {
	body, err := jsonBody(api.CheckoutRequest{Version: v})
	if err != nil {
		return 0, err
	}
	var out api.VersionResponse
	if err := c.call(ctx, request{method: http.MethodPost, path: storePath(store, "checkout"), body: body, contentType: "application/json", idempotent: true}, &out); err != nil {
		return 0, err
	}
	return out.Version, nil
}

// Query runs one read-only SQL statement on the master (or dev) where the
// store is the table records and other stores are tables of their own
// names. Numbers in the rows decode as json.Number, so 64-bit integers stay
// exact. A query that hits a server limit is an *APIError with status 422
// and code QUERY_LIMIT naming the limit. Retried like a GET: a query
// changes nothing.
func (c *Client) Query(ctx context.Context, store string, q api.QueryRequest) (*api.QueryResponse, error) {
	resp, err := c.query(ctx, store, q, "")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	dec := json.NewDecoder(resp.Body)
	dec.UseNumber()
	var out api.QueryResponse
	if err := dec.Decode(&out); err != nil {
		return nil, fmt.Errorf("lance-context: query of %q: decoding the answer: %w", store, err)
	}
	return &out, nil
}

// OpenQueryArrow runs a query as Query does and streams its result as an
// Arrow IPC stream (read it with arrow/ipc.NewReader); the caller closes
// it. The response headers api.HeaderRowCount, HeaderTruncated and
// HeaderRowsScanned say what the stream holds.
func (c *Client) OpenQueryArrow(ctx context.Context, store string, q api.QueryRequest) (io.ReadCloser, http.Header, error) {
	resp, err := c.query(ctx, store, q, api.ArrowStream)
	if err != nil {
		return nil, nil, err
	}
	return resp.Body, resp.Header, nil
}

func (c *Client) query(ctx context.Context, store string, q api.QueryRequest, accept string) (*http.Response, error) {
	body, err := jsonBody(q)
	if err != nil {
		return nil, err
	}
	return c.do(ctx, request{method: http.MethodPost, path: "/api/v1/experiments/" + url.PathEscape(store) + "/query",
		body: body, contentType: "application/json", accept: accept, idempotent: true})
}
