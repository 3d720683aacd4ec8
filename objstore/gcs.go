package objstore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"strings"

	"cloud.google.com/go/storage"
	"google.golang.org/api/googleapi"
	"google.golang.org/api/option"
)

// GCSConfig configures a Google Cloud Storage store.
type GCSConfig struct {
	Bucket string
	Prefix string // root of the store inside the bucket; may be empty

	// Endpoint overrides the JSON API endpoint, e.g. http://127.0.0.1:4443
	// for an emulator (fake-gcs-server); requests are then unauthenticated.
	// Empty: Google Cloud Storage with Application Default Credentials.
	Endpoint string

	ChunkSize int // upload chunk of streaming writes; 0: DefaultPartSize

	// Transport carries the HTTP requests when Endpoint is set (an
	// emulator, unauthenticated); nil: the client's. Tests count requests
	// with it or inject faults (TearingTransport).
	Transport http.RoundTripper
}

// GCSConfigFromEnv reads the endpoint override from STORAGE_EMULATOR_HOST
// (host:port or a URL; the variable the Google client libraries and
// fake-gcs-server use). Credentials come from Application Default
// Credentials (GOOGLE_APPLICATION_CREDENTIALS, gcloud, the metadata server).
func GCSConfigFromEnv() GCSConfig {
	return GCSConfig{Endpoint: os.Getenv("STORAGE_EMULATOR_HOST")}
}

// GCS is a Store in a Google Cloud Storage bucket under a prefix.
//
// PutIfAbsent is an upload with the precondition ifGenerationMatch=0 (the
// object has no live generation); GCS answers 412 if the name exists.
type GCS struct {
	client    *storage.Client
	bucket    *storage.BucketHandle
	name      string
	root      string // "" or prefix ending with '/'
	chunkSize int
}

var _ Store = (*GCS)(nil)

// NewGCS returns a GCS store. It does not contact the server.
func NewGCS(ctx context.Context, cfg GCSConfig) (*GCS, error) {
	if cfg.Bucket == "" {
		return nil, errors.New("objstore: gcs: empty bucket")
	}
	root, err := storeRoot("gcs", cfg.Prefix)
	if err != nil {
		return nil, err
	}
	if cfg.ChunkSize == 0 {
		cfg.ChunkSize = DefaultPartSize
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
	return &GCS{client: client, bucket: client.Bucket(cfg.Bucket), name: cfg.Bucket, root: root, chunkSize: cfg.ChunkSize}, nil
}

// storeRoot validates a bucket prefix and returns it ending with '/', or "".
func storeRoot(backend, prefix string) (string, error) {
	root := strings.Trim(prefix, "/")
	if root == "" {
		return "", nil
	}
	if err := ValidateKey(root); err != nil {
		return "", fmt.Errorf("objstore: %s prefix: %w", backend, err)
	}
	return root + "/", nil
}

// Close releases the client's connections.
func (g *GCS) Close() error { return g.client.Close() }

func (g *GCS) obj(key string) (*storage.ObjectHandle, error) {
	if err := ValidateKey(key); err != nil {
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

func (g *GCS) wrap(op, key string, err error) error {
	if errors.Is(err, storage.ErrObjectNotExist) || gcsStatus(err) == http.StatusNotFound {
		return fmt.Errorf("%w: %s (gcs %s: %w)", ErrNotFound, key, op, err)
	}
	return fmt.Errorf("objstore: gcs %s %s: %w", op, key, err)
}

// Get implements Store. A body cut short is resumed (readResuming).
func (g *GCS) Get(ctx context.Context, key string) ([]byte, error) {
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

// GetRange implements Store with a ranged read; a body cut short is
// resumed (readResuming).
func (g *GCS) GetRange(ctx context.Context, key string, offset, length int64) ([]byte, error) {
	o, err := g.obj(key)
	if err != nil {
		return nil, err
	}
	if offset < 0 || length < 0 {
		return nil, fmt.Errorf("%w: %s: offset %d length %d", ErrInvalidRange, key, offset, length)
	}
	if length == 0 {
		return emptyRange(ctx, g, key, offset)
	}
	if length > math.MaxInt64-offset {
		length = -1 // to the end
	}
	data, err := g.read(ctx, o, key, offset, length)
	if err != nil {
		if gcsStatus(err) == http.StatusRequestedRangeNotSatisfiable {
			// offset >= size: empty when offset == size, an error past it.
			return emptyRange(ctx, g, key, offset)
		}
		return nil, g.wrap("get range", key, err)
	}
	return data, nil
}

// read reads length bytes at offset (-1: to the end) through readResuming;
// the rest of a torn body is read from the generation the first answer
// came from.
func (g *GCS) read(ctx context.Context, o *storage.ObjectHandle, key string, offset, length int64) ([]byte, error) {
	var gen int64
	return readResuming(ctx, resumableRead{key: key, limit: length, retryable: gcsRetryable,
		open: func(ctx context.Context, got int64) (io.ReadCloser, int64, error) {
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

// reader returns o for one read request of readResuming: of generation
// gen (0: the live one), with the client's retries off, as readResuming
// retries. (The client still resumes a torn body by itself, in one
// request each, and reports a resume that fails.)
func (g *GCS) reader(o *storage.ObjectHandle, gen int64) *storage.ObjectHandle {
	if gen > 0 {
		o = o.Generation(gen)
	}
	return o.Retryer(storage.WithPolicy(storage.RetryNever))
}

// gcsRetryable reports a transient error of a read (the client reports a
// missing object with no status).
func gcsRetryable(err error) bool {
	return !errors.Is(err, storage.ErrObjectNotExist) && retryableStatus(gcsStatus(err), err)
}

// Head implements Store.
func (g *GCS) Head(ctx context.Context, key string) (ObjectInfo, error) {
	o, err := g.obj(key)
	if err != nil {
		return ObjectInfo{}, err
	}
	a, err := o.Attrs(ctx)
	if err != nil {
		return ObjectInfo{}, g.wrap("head", key, err)
	}
	return ObjectInfo{Key: key, Size: a.Size, ModTime: a.Updated}, nil
}

// upload writes data in one request (objects up to the chunk size) with the
// handle's conditions. The client retries it only when it is idempotent
// (unconditional writes are not, by its default policy) unless retry is
// false.
func (g *GCS) upload(ctx context.Context, o *storage.ObjectHandle, data []byte, retry bool) error {
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

// Put implements Store.
func (g *GCS) Put(ctx context.Context, key string, data []byte) error {
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

// PutIfAbsent implements Store with an upload conditioned on
// ifGenerationMatch=0: GCS answers 412 Precondition Failed if the key has a
// live object.
//
// It retries transient errors itself rather than through the client, so
// that it knows when an earlier attempt may have been written with its
// acknowledgement lost: if a later attempt then finds the key taken, the
// object is read back, and identical content counts as this call's success.
func (g *GCS) PutIfAbsent(ctx context.Context, key string, data []byte) error {
	o, err := g.obj(key)
	if err != nil {
		return err
	}
	o = o.If(storage.Conditions{DoesNotExist: true})
	return putIfAbsentRetrying(ctx, key, data, conditionalPut{
		backend:   "gcs",
		put:       func() error { return g.upload(ctx, o, data, false) },
		taken:     func(err error) bool { return gcsStatus(err) == http.StatusPreconditionFailed },
		retryable: func(err error) bool { return retryableStatus(gcsStatus(err), err) },
		get:       func() ([]byte, error) { return g.Get(ctx, key) },
		wrap:      func(err error) error { return g.wrap("put if absent", key, err) },
	})
}

// Delete implements Store.
func (g *GCS) Delete(ctx context.Context, key string) error {
	o, err := g.obj(key)
	if err != nil {
		return err
	}
	if err := o.Delete(ctx); err != nil && !errors.Is(err, storage.ErrObjectNotExist) && gcsStatus(err) != http.StatusNotFound {
		return g.wrap("delete", key, err)
	}
	return nil
}

// List implements Store, following every page. Keys ending in '/' (folder
// placeholders some tools create) are skipped.
func (g *GCS) List(ctx context.Context, prefix string) ([]ObjectInfo, error) {
	return g.list(ctx, prefix, -1)
}

// Create implements Store with a resumable upload in chunks of ChunkSize
// (an object smaller than a chunk is sent in one request on Close). GCS
// makes the object visible only when the last chunk is finalized, on Close;
// Abort cancels the upload.
func (g *GCS) Create(ctx context.Context, key string) (ObjectWriter, error) {
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
	g         *GCS
	key       string
	w         *storage.Writer
	cancel    context.CancelFunc
	done      bool
	committed bool
}

func (w *gcsWriter) Write(p []byte) (int, error) {
	if w.done {
		return 0, errWriterDone
	}
	n, err := w.w.Write(p)
	if err != nil {
		return n, w.g.wrap("write", w.key, err)
	}
	return n, nil
}

func (w *gcsWriter) Close() error {
	if w.done {
		return errWriterDone
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
