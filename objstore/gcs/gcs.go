package gcs

import (
	"context"
	"errors"
	"fmt"
	"github.com/lance-context/lance-context/objstore"
	"github.com/lance-context/lance-context/objstore/internal/driver"
	"google.golang.org/api/iterator"
	"io"
	"math"
	"net/http"
	"os"
	"strings"

	"cloud.google.com/go/storage"
	"google.golang.org/api/googleapi"
	"google.golang.org/api/option"
)

// DefaultChunkSize is the upload chunk of streaming writes, 8 MiB (as
// objstore/s3's part size).
const DefaultChunkSize = 8 << 20

// Config configures a Google Cloud Storage store.
type Config struct {
	Bucket string
	Prefix string // root of the store inside the bucket; may be empty

	// Endpoint overrides the JSON API endpoint, e.g. http://127.0.0.1:4443
	// for an emulator (fake-gcs-server); requests are then unauthenticated.
	// Empty: Google Cloud Storage with Application Default Credentials.
	Endpoint string

	ChunkSize int // upload chunk of streaming writes; 0: DefaultChunkSize

	// Transport carries the HTTP requests when Endpoint is set (an
	// emulator, unauthenticated); nil: the client's. Tests count requests
	// with it or inject faults (objstore.TearingTransport).
	Transport http.RoundTripper
}

// ConfigFromEnv reads the endpoint override from STORAGE_EMULATOR_HOST
// (host:port or a URL; the variable the Google client libraries and
// fake-gcs-server use). Credentials come from Application Default
// Credentials (GOOGLE_APPLICATION_CREDENTIALS, gcloud, the metadata server).
func ConfigFromEnv() Config {
	return Config{Endpoint: os.Getenv("STORAGE_EMULATOR_HOST")}
}

// Store is an objstore.Store in a Google Cloud Storage bucket under a prefix.
//
// PutIfAbsent is an upload with the precondition ifGenerationMatch=0 (the
// object has no live generation); GCS answers 412 if the name exists.
type Store struct {
	client    *storage.Client
	bucket    *storage.BucketHandle
	name      string
	root      string // "" or prefix ending with '/'
	chunkSize int
}

var (
	_ objstore.Store       = (*Store)(nil)
	_ objstore.FirstLister = (*Store)(nil)
	_ objstore.TailReader  = (*Store)(nil)
)

// New returns a GCS store. It does not contact the server.
func New(ctx context.Context, cfg Config) (*Store, error) {
	if cfg.Bucket == "" {
		return nil, errors.New("objstore: gcs: empty bucket")
	}
	root, err := driver.StoreRoot("gcs", cfg.Prefix)
	if err != nil {
		return nil, err
	}
	if cfg.ChunkSize == 0 {
		cfg.ChunkSize = DefaultChunkSize
	}
	// JSON API reads: the XML API serves object paths only on the
	// storage.googleapis.com host, which emulators do not answer as, and the
	// client is moving to JSON reads by default anyway.
	opts := []option.ClientOption{storage.WithJSONReads()}
	if cfg.Endpoint != "" {
		ep := cfg.Endpoint
		if !strings.Contains(ep, "://") {
			ep = "http://" + ep
		}
		opts = append(opts, option.WithEndpoint(strings.TrimSuffix(ep, "/")+"/storage/v1/"), option.WithoutAuthentication())
		if cfg.Transport != nil {
			opts = append(opts, option.WithHTTPClient(&http.Client{Transport: cfg.Transport}))
		}
	}
	client, err := storage.NewClient(ctx, opts...)
	if err != nil {
		return nil, fmt.Errorf("objstore: gcs: new client: %w", err)
	}
	return &Store{client: client, bucket: client.Bucket(cfg.Bucket), name: cfg.Bucket, root: root, chunkSize: cfg.ChunkSize}, nil
}

// Close releases the client's connections.
func (g *Store) Close() error { return g.client.Close() }

func (g *Store) obj(key string) (*storage.ObjectHandle, error) {
	if err := objstore.ValidateKey(key); err != nil {
		return nil, err
	}
	return g.bucket.Object(g.root + key), nil
}

func gcsStatus(err error) int {
	var ge *googleapi.Error
	if errors.As(err, &ge) {
		return ge.Code
	}
	return 0
}

func (g *Store) wrap(op, key string, err error) error {
	if errors.Is(err, storage.ErrObjectNotExist) || gcsStatus(err) == http.StatusNotFound {
		return fmt.Errorf("%w: %s (gcs %s: %w)", objstore.ErrNotFound, key, op, err)
	}
	return fmt.Errorf("objstore: gcs %s %s: %w", op, key, err)
}

// Get implements objstore.Store. A body cut short is resumed (driver.ReadResuming).
func (g *Store) Get(ctx context.Context, key string) ([]byte, error) {
	o, err := g.obj(key)
	if err != nil {
		return nil, err
	}
	data, err := g.read(ctx, o, key, 0, -1)
	if err != nil {
		return nil, g.wrap("get", key, err)
	}
	return data, nil
}

// GetRange implements objstore.Store with a ranged read; a body cut short is
// resumed (driver.ReadResuming).
func (g *Store) GetRange(ctx context.Context, key string, offset, length int64) ([]byte, error) {
	o, err := g.obj(key)
	if err != nil {
		return nil, err
	}
	if offset < 0 || length < 0 {
		return nil, fmt.Errorf("%w: %s: offset %d length %d", objstore.ErrInvalidRange, key, offset, length)
	}
	if length == 0 {
		return driver.EmptyRange(ctx, g, key, offset)
	}
	if length > math.MaxInt64-offset {
		length = -1 // to the end
	}
	data, err := g.read(ctx, o, key, offset, length)
	if err != nil {
		if gcsStatus(err) == http.StatusRequestedRangeNotSatisfiable {
			// offset >= size: empty when offset == size, an error past it.
			return driver.EmptyRange(ctx, g, key, offset)
		}
		return nil, g.wrap("get range", key, err)
	}
	return data, nil
}

// read reads length bytes at offset (-1: to the end) through driver.ReadResuming;
// the rest of a torn body is read from the generation the first answer
// came from.
func (g *Store) read(ctx context.Context, o *storage.ObjectHandle, key string, offset, length int64) ([]byte, error) {
	var gen int64
	return driver.ReadResuming(ctx, driver.ResumableRead{Key: key, Limit: length, Retryable: gcsRetryable,
		Open: func(ctx context.Context, got int64) (io.ReadCloser, int64, error) {
			n := int64(-1)
			if length >= 0 {
				n = length - got
			}
			r, err := g.reader(o, gen).NewRangeReader(ctx, offset+got, n)
			if err != nil {
				return nil, 0, err
			}
			gen = r.Attrs.Generation
			return r, r.Remain(), nil
		}})
}

// reader returns o for one read request of driver.ReadResuming: of generation
// gen (0: the live one), with the client's retries off, as driver.ReadResuming
// retries. (The client still resumes a torn body by itself, in one
// request each, and reports a resume that fails.)
func (g *Store) reader(o *storage.ObjectHandle, gen int64) *storage.ObjectHandle {
	if gen > 0 {
		o = o.Generation(gen)
	}
	return o.Retryer(storage.WithPolicy(storage.RetryNever))
}

// gcsRetryable reports a transient error of a read (the client reports a
// missing object with no status).
func gcsRetryable(err error) bool {
	return !errors.Is(err, storage.ErrObjectNotExist) && driver.RetryableStatus(gcsStatus(err), err)
}

// Head implements objstore.Store.
func (g *Store) Head(ctx context.Context, key string) (objstore.ObjectInfo, error) {
	o, err := g.obj(key)
	if err != nil {
		return objstore.ObjectInfo{}, err
	}
	a, err := o.Attrs(ctx)
	if err != nil {
		return objstore.ObjectInfo{}, g.wrap("head", key, err)
	}
	return objstore.ObjectInfo{Key: key, Size: a.Size, ModTime: a.Updated}, nil
}

// upload writes data in one request (objects up to the chunk size) with the
// handle's conditions. The client retries it only when it is idempotent
// (unconditional writes are not, by its default policy) unless retry is
// false.
func (g *Store) upload(ctx context.Context, o *storage.ObjectHandle, data []byte, retry bool) error {
	if !retry {
		o = o.Retryer(storage.WithPolicy(storage.RetryNever))
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	w := o.NewWriter(ctx)
	// One request: a chunk at least as large as the object (a multiple of
	// 256 KiB, as the client rounds it).
	w.ChunkSize = max(g.chunkSize, (len(data)/googleapi.MinUploadChunkSize+1)*googleapi.MinUploadChunkSize)
	if _, err := w.Write(data); err != nil {
		cancel()
		w.Close()
		return err
	}
	return w.Close()
}

// Put implements objstore.Store.
func (g *Store) Put(ctx context.Context, key string, data []byte) error {
	o, err := g.obj(key)
	if err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return g.wrap("put", key, err)
	}
	// A whole-object overwrite is safe to repeat.
	o = o.Retryer(storage.WithPolicy(storage.RetryAlways))
	if err := g.upload(ctx, o, data, true); err != nil {
		return g.wrap("put", key, err)
	}
	return nil
}

// PutIfAbsent implements objstore.Store with an upload conditioned on
// ifGenerationMatch=0: GCS answers 412 Precondition Failed if the key has a
// live object.
//
// It retries transient errors itself rather than through the client, so
// that it knows when an earlier attempt may have been written with its
// acknowledgement lost: if a later attempt then finds the key taken, the
// object is read back, and identical content counts as this call's success.
func (g *Store) PutIfAbsent(ctx context.Context, key string, data []byte) error {
	o, err := g.obj(key)
	if err != nil {
		return err
	}
	o = o.If(storage.Conditions{DoesNotExist: true})
	return driver.PutIfAbsentRetrying(ctx, key, data, driver.ConditionalPut{
		Backend:   "gcs",
		Put:       func() error { return g.upload(ctx, o, data, false) },
		Taken:     func(err error) bool { return gcsStatus(err) == http.StatusPreconditionFailed },
		Retryable: func(err error) bool { return driver.RetryableStatus(gcsStatus(err), err) },
		Get:       func() ([]byte, error) { return g.Get(ctx, key) },
		Wrap:      func(err error) error { return g.wrap("put if absent", key, err) },
	})
}

// Delete implements objstore.Store.
func (g *Store) Delete(ctx context.Context, key string) error {
	o, err := g.obj(key)
	if err != nil {
		return err
	}
	if err := o.Delete(ctx); err != nil && !errors.Is(err, storage.ErrObjectNotExist) && gcsStatus(err) != http.StatusNotFound {
		return g.wrap("delete", key, err)
	}
	return nil
}

// List implements objstore.Store, following every page. Keys ending in '/' (folder
// placeholders some tools create) are skipped.
func (g *Store) List(ctx context.Context, prefix string) ([]objstore.ObjectInfo, error) {
	return g.list(ctx, prefix, -1)
}

// Create implements objstore.Store with a resumable upload in chunks of ChunkSize
// (an object smaller than a chunk is sent in one request on Close). GCS
// makes the object visible only when the last chunk is finalized, on Close;
// Abort cancels the upload.
func (g *Store) Create(ctx context.Context, key string) (objstore.ObjectWriter, error) {
	o, err := g.obj(key)
	if err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	wctx, cancel := context.WithCancel(ctx)
	w := o.Retryer(storage.WithPolicy(storage.RetryAlways)).NewWriter(wctx)
	w.ChunkSize = g.chunkSize
	return &gcsWriter{g: g, key: key, w: w, cancel: cancel}, nil
}

type gcsWriter struct {
	g         *Store
	key       string
	w         *storage.Writer
	cancel    context.CancelFunc
	done      bool
	committed bool
}

func (w *gcsWriter) Write(p []byte) (int, error) {
	if w.done {
		return 0, driver.ErrWriterDone
	}
	n, err := w.w.Write(p)
	if err != nil {
		return n, w.g.wrap("write", w.key, err)
	}
	return n, nil
}

func (w *gcsWriter) Close() error {
	if w.done {
		return driver.ErrWriterDone
	}
	w.done = true
	err := w.w.Close()
	w.cancel()
	if err != nil {
		return w.g.wrap("close", w.key, err)
	}
	w.committed = true
	return nil
}

func (w *gcsWriter) Abort() error {
	if w.committed {
		return nil
	}
	if !w.done {
		w.done = true
		// Canceling the context stops the upload; Close then reports the
		// cancellation and the object is not created.
		w.cancel()
		w.w.Close()
	}
	return nil
}

// ListFirst implements objstore.FirstLister: one objects.list request with
// maxResults (GCS answers at most 1000 a page: more take more pages).
func (g *Store) ListFirst(ctx context.Context, prefix string, n int) ([]objstore.ObjectInfo, error) {
	if n <= 0 {
		return nil, objstore.ValidatePrefix(prefix)
	}
	return g.list(ctx, prefix, n)
}

// list lists the first n keys under prefix in byte order (n < 0: all of
// them), page by page.
func (g *Store) list(ctx context.Context, prefix string, n int) ([]objstore.ObjectInfo, error) {
	if err := objstore.ValidatePrefix(prefix); err != nil {
		return nil, err
	}
	full := g.root + prefix
	q := &storage.Query{Prefix: full}
	if err := q.SetAttrSelection([]string{"Name", "Size", "Updated"}); err != nil {
		return nil, err
	}
	var out []objstore.ObjectInfo
	// A Pager asks for one page of the size left to fill, and fetches
	// another only when the server answered fewer and has more.
	size := 1000
	if n >= 0 {
		size = min(n, 1000)
	}
	p := iterator.NewPager(g.bucket.Objects(ctx, q), size, "")
	for n < 0 || len(out) < n {
		var page []*storage.ObjectAttrs
		token, err := p.NextPage(&page)
		if err != nil {
			return nil, fmt.Errorf("objstore: gcs list %q: %w", prefix, err)
		}
		for _, a := range page {
			if !strings.HasPrefix(a.Name, full) || strings.HasSuffix(a.Name, "/") {
				continue
			}
			out = append(out, objstore.ObjectInfo{Key: a.Name[len(g.root):], Size: a.Size, ModTime: a.Updated})
		}
		if token == "" {
			break
		}
	}
	return driver.FirstSorted(out, n), nil
}

// GetTail implements objstore.TailReader: one read with a negative offset (a suffix
// range); the reader's attributes carry the object's size. A body cut
// short is resumed (driver.ReadResuming).
func (g *Store) GetTail(ctx context.Context, key string, n int64) ([]byte, objstore.ObjectInfo, error) {
	o, err := g.obj(key)
	if err != nil {
		return nil, objstore.ObjectInfo{}, err
	}
	if n <= 0 {
		return objstore.HeadTail(ctx, g, key, 0)
	}
	var attrs storage.ReaderObjectAttrs // the first answer's
	data, err := driver.ReadResuming(ctx, driver.ResumableRead{Key: key, Limit: -1, Retryable: gcsRetryable,
		Open: func(ctx context.Context, got int64) (io.ReadCloser, int64, error) {
			if got == 0 {
				r, err := g.reader(o, 0).NewRangeReader(ctx, -n, -1)
				if err != nil {
					return nil, 0, err
				}
				attrs = r.Attrs
				return r, r.Remain(), nil
			}
			r, err := g.reader(o, attrs.Generation).NewRangeReader(ctx, attrs.StartOffset+got, -1)
			if err != nil {
				return nil, 0, err
			}
			return r, r.Remain(), nil
		}})
	if err != nil {
		if gcsStatus(err) == http.StatusRequestedRangeNotSatisfiable {
			return objstore.HeadTail(ctx, g, key, n) // an empty object
		}
		return nil, objstore.ObjectInfo{}, g.wrap("get tail", key, err)
	}
	if data, err = driver.TailOf(key, data, attrs.Size, n); err != nil {
		return nil, objstore.ObjectInfo{}, err
	}
	return data, objstore.ObjectInfo{Key: key, Size: attrs.Size, ModTime: attrs.LastModified}, nil
}
