package azure

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"github.com/lance-context/lance-context/objstore"
	"github.com/lance-context/lance-context/objstore/internal/driver"
	"io"
	"math"
	"net/http"
	"os"
	"strings"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/streaming"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/blob"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/bloberror"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/blockblob"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/container"
)

// DefaultBlockSize is the block size of streaming writes, 8 MiB (as
// objstore/s3's part size).
const DefaultBlockSize = 8 << 20

// Config configures an Azure Blob Storage store.
type Config struct {
	Container string
	Prefix    string // root of the store inside the container; may be empty

	// ConnectionString, when set, gives the account, key and endpoint
	// (the form the Azure tools print, with BlobEndpoint for an emulator).
	ConnectionString string

	// Otherwise: the account and its shared key (or a SAS token), and the
	// blob service endpoint; empty Endpoint: https://ACCOUNT.blob.core.windows.net.
	Account, Key, SASToken string
	Endpoint               string // e.g. http://127.0.0.1:10000/devstoreaccount1 for Azurite

	BlockSize int64 // block size of streaming writes; 0: DefaultBlockSize

	// Transport carries the HTTP requests; nil: the SDK's. Tests count
	// requests with it or inject faults (objstore.TearingTransport).
	Transport http.RoundTripper
}

// ConfigFromEnv reads AZURE_STORAGE_CONNECTION_STRING, or the account
// (AZURE_STORAGE_ACCOUNT or AZURE_STORAGE_ACCOUNT_NAME), its key
// (AZURE_STORAGE_KEY or AZURE_STORAGE_ACCOUNT_KEY) or a SAS token
// (AZURE_STORAGE_SAS_TOKEN), and the endpoint override
// (AZURE_STORAGE_ENDPOINT, for an emulator).
func ConfigFromEnv() Config {
	first := func(names ...string) string {
		for _, n := range names {
			if v := os.Getenv(n); v != "" {
				return v
			}
		}
		return ""
	}
	return Config{
		ConnectionString: os.Getenv("AZURE_STORAGE_CONNECTION_STRING"),
		Account:          first("AZURE_STORAGE_ACCOUNT", "AZURE_STORAGE_ACCOUNT_NAME"),
		Key:              first("AZURE_STORAGE_KEY", "AZURE_STORAGE_ACCOUNT_KEY"),
		SASToken:         os.Getenv("AZURE_STORAGE_SAS_TOKEN"),
		Endpoint:         os.Getenv("AZURE_STORAGE_ENDPOINT"),
	}
}

// Store is an objstore.Store in an Azure Blob Storage container under a prefix, with
// block blobs.
//
// PutIfAbsent is Put Blob with "If-None-Match: *"; the service answers 409
// BlobAlreadyExists (or 412 ConditionNotMet) if the name exists.
type Store struct {
	c         *container.Client
	root      string // "" or prefix ending with '/'
	blockSize int64
}

var (
	_ objstore.Store        = (*Store)(nil)
	_ objstore.FirstLister  = (*Store)(nil)
	_ objstore.BatchDeleter = (*Store)(nil)
)

// New returns an Azure Blob store. It does not contact the server.
func New(ctx context.Context, cfg Config) (*Store, error) {
	if cfg.Container == "" {
		return nil, errors.New("objstore: azure: empty container")
	}
	root, err := driver.StoreRoot("azure", cfg.Prefix)
	if err != nil {
		return nil, err
	}
	if cfg.BlockSize == 0 {
		cfg.BlockSize = DefaultBlockSize
	}
	var (
		c    *container.Client
		opts *container.ClientOptions
	)
	if cfg.Transport != nil {
		opts = &container.ClientOptions{}
		opts.Transport = &http.Client{Transport: cfg.Transport}
	}
	switch {
	case cfg.ConnectionString != "":
		c, err = container.NewClientFromConnectionString(cfg.ConnectionString, cfg.Container, opts)
	case cfg.Account == "":
		return nil, errors.New("objstore: azure: no account: set AZURE_STORAGE_CONNECTION_STRING, or AZURE_STORAGE_ACCOUNT with AZURE_STORAGE_KEY or AZURE_STORAGE_SAS_TOKEN")
	default:
		ep := strings.TrimSuffix(cfg.Endpoint, "/")
		if ep == "" {
			ep = "https://" + cfg.Account + ".blob.core.windows.net"
		}
		u := ep + "/" + cfg.Container
		switch {
		case cfg.Key != "":
			var cred *container.SharedKeyCredential
			if cred, err = container.NewSharedKeyCredential(cfg.Account, cfg.Key); err == nil {
				c, err = container.NewClientWithSharedKeyCredential(u, cred, opts)
			}
		case cfg.SASToken != "":
			c, err = container.NewClientWithNoCredential(u+"?"+strings.TrimPrefix(cfg.SASToken, "?"), opts)
		default:
			return nil, errors.New("objstore: azure: no credentials: set AZURE_STORAGE_KEY or AZURE_STORAGE_SAS_TOKEN")
		}
	}
	if err != nil {
		return nil, fmt.Errorf("objstore: azure: new client: %w", err)
	}
	return &Store{c: c, root: root, blockSize: cfg.BlockSize}, nil
}

func (a *Store) name(key string) (string, error) {
	if err := objstore.ValidateKey(key); err != nil {
		return "", err
	}
	return a.root + key, nil
}

func azStatus(err error) int {
	var re *azcore.ResponseError
	if errors.As(err, &re) {
		return re.StatusCode
	}
	return 0
}

func azNotFound(err error) bool {
	return bloberror.HasCode(err, bloberror.BlobNotFound) || azStatus(err) == http.StatusNotFound
}

func (a *Store) wrap(op, key string, err error) error {
	if azNotFound(err) {
		return fmt.Errorf("%w: %s (azure %s: %w)", objstore.ErrNotFound, key, op, err)
	}
	return fmt.Errorf("objstore: azure %s %s: %w", op, key, err)
}

// Get implements objstore.Store. A body cut short is resumed (driver.ReadResuming).
func (a *Store) Get(ctx context.Context, key string) ([]byte, error) {
	n, err := a.name(key)
	if err != nil {
		return nil, err
	}
	data, err := a.read(ctx, n, key, 0, -1)
	if err != nil {
		return nil, a.wrap("get", key, err)
	}
	return data, nil
}

// GetRange implements objstore.Store with a ranged download; a body cut short is
// resumed (driver.ReadResuming).
func (a *Store) GetRange(ctx context.Context, key string, offset, length int64) ([]byte, error) {
	n, err := a.name(key)
	if err != nil {
		return nil, err
	}
	if offset < 0 || length < 0 {
		return nil, fmt.Errorf("%w: %s: offset %d length %d", objstore.ErrInvalidRange, key, offset, length)
	}
	if length == 0 {
		return driver.EmptyRange(ctx, a, key, offset)
	}
	if length > math.MaxInt64-offset {
		length = -1 // to the end
	}
	data, err := a.read(ctx, n, key, offset, length)
	if err != nil {
		if azStatus(err) == http.StatusRequestedRangeNotSatisfiable || bloberror.HasCode(err, bloberror.InvalidRange) {
			// offset >= size: empty when offset == size, an error past it.
			return driver.EmptyRange(ctx, a, key, offset)
		}
		return nil, a.wrap("get range", key, err)
	}
	return data, nil
}

// read downloads length bytes at offset (-1: to the end) through
// driver.ReadResuming, with the pipeline's retries off (driver.ReadResuming retries,
// knowing how much of a body arrived). The rest of a torn body is asked
// for If-Match the first answer's ETag, so that the pieces are of one
// blob.
func (a *Store) read(ctx context.Context, name, key string, offset, length int64) ([]byte, error) {
	bc := a.c.NewBlobClient(name)
	var etag *azcore.ETag
	return driver.ReadResuming(ctx, driver.ResumableRead{Key: key, Limit: length, Retryable: azRetryable,
		Open: func(ctx context.Context, got int64) (io.ReadCloser, int64, error) {
			opts := &blob.DownloadStreamOptions{Range: blob.HTTPRange{Offset: offset + got}}
			if length >= 0 {
				opts.Range.Count = length - got
			}
			if got > 0 {
				opts.AccessConditions = &blob.AccessConditions{ModifiedAccessConditions: &blob.ModifiedAccessConditions{IfMatch: etag}}
			}
			resp, err := bc.DownloadStream(policy.WithRetryOptions(ctx, policy.RetryOptions{MaxRetries: -1}), opts)
			if err != nil {
				return nil, 0, err
			}
			// A server that ignores the range answers 200 with the whole blob.
			if resp.ContentRange == nil && offset+got > 0 {
				resp.Body.Close()
				return nil, 0, driver.Permanent{Err: errors.New("server ignored the Range header")}
			}
			etag = resp.ETag
			return resp.Body, driver.BodySize(resp.ContentLength), nil
		}})
}

func azRetryable(err error) bool { return driver.RetryableStatus(azStatus(err), err) }

// Head implements objstore.Store.
func (a *Store) Head(ctx context.Context, key string) (objstore.ObjectInfo, error) {
	n, err := a.name(key)
	if err != nil {
		return objstore.ObjectInfo{}, err
	}
	p, err := a.c.NewBlobClient(n).GetProperties(ctx, nil)
	if err != nil {
		return objstore.ObjectInfo{}, a.wrap("head", key, err)
	}
	return objstore.ObjectInfo{Key: key, Size: driver.Deref(p.ContentLength), ModTime: driver.Deref(p.LastModified)}, nil
}

// Put implements objstore.Store.
func (a *Store) Put(ctx context.Context, key string, data []byte) error {
	n, err := a.name(key)
	if err != nil {
		return err
	}
	_, err = a.c.NewBlockBlobClient(n).Upload(ctx, streaming.NopCloser(bytes.NewReader(data)), nil)
	if err != nil {
		return a.wrap("put", key, err)
	}
	return nil
}

// PutIfAbsent implements objstore.Store with Put Blob and "If-None-Match: *".
//
// It retries transient errors itself rather than through the SDK, so that it
// knows when an earlier attempt may have been written with its
// acknowledgement lost: if a later attempt then finds the key taken, the
// object is read back, and identical content counts as this call's success.
func (a *Store) PutIfAbsent(ctx context.Context, key string, data []byte) error {
	n, err := a.name(key)
	if err != nil {
		return err
	}
	bb := a.c.NewBlockBlobClient(n)
	opts := &blockblob.UploadOptions{AccessConditions: &blob.AccessConditions{
		ModifiedAccessConditions: &blob.ModifiedAccessConditions{IfNoneMatch: to.Ptr(azcore.ETagAny)},
	}}
	once := policy.WithRetryOptions(ctx, policy.RetryOptions{MaxRetries: -1})
	return driver.PutIfAbsentRetrying(ctx, key, data, driver.ConditionalPut{
		Backend: "azure",
		Put: func() error {
			_, err := bb.Upload(once, streaming.NopCloser(bytes.NewReader(data)), opts)
			return err
		},
		Taken: func(err error) bool {
			return bloberror.HasCode(err, bloberror.BlobAlreadyExists, bloberror.ConditionNotMet) || azStatus(err) == http.StatusPreconditionFailed
		},
		Retryable: func(err error) bool { return driver.RetryableStatus(azStatus(err), err) },
		Get:       func() ([]byte, error) { return a.Get(ctx, key) },
		Wrap:      func(err error) error { return a.wrap("put if absent", key, err) },
	})
}

// Delete implements objstore.Store.
func (a *Store) Delete(ctx context.Context, key string) error {
	n, err := a.name(key)
	if err != nil {
		return err
	}
	if _, err := a.c.NewBlobClient(n).Delete(ctx, nil); err != nil && !azNotFound(err) {
		return a.wrap("delete", key, err)
	}
	return nil
}

// DeleteMany implements objstore.BatchDeleter with blob batches (Blob
// Batch: up to 256 deletes in one request), deleteParallel requests at
// once. A blob that was absent counts as deleted, as with Delete.
func (a *Store) DeleteMany(ctx context.Context, keys []string) error {
	return driver.DeleteMany(ctx, keys, driver.BatchDelete{
		Size: 256, Parallel: deleteParallel, Send: a.deleteBatch, Retryable: azRetryable,
	})
}

// deleteParallel is how many batch requests of one DeleteMany are in
// flight at once.
const deleteParallel = 4

// deleteBatch sends one batch of deletes, with the pipeline's retries off
// (driver.DeleteMany retries).
func (a *Store) deleteBatch(ctx context.Context, keys []string) ([]error, error) {
	bb, err := a.c.NewBatchBuilder()
	if err != nil {
		return nil, fmt.Errorf("objstore: azure delete batch: %w", err)
	}
	for _, k := range keys {
		if err := bb.Delete(a.root+k, nil); err != nil {
			return nil, fmt.Errorf("objstore: azure delete batch: %w", err)
		}
	}
	resp, err := a.c.SubmitBatch(policy.WithRetryOptions(ctx, policy.RetryOptions{MaxRetries: -1}), bb, nil)
	if err != nil {
		return nil, fmt.Errorf("objstore: azure delete batch (%d keys): %w", len(keys), err)
	}
	errs := make([]error, len(keys))
	answered := make([]bool, len(keys))
	for _, r := range resp.Responses {
		if r.ContentID == nil || *r.ContentID < 0 || *r.ContentID >= len(keys) {
			continue
		}
		i := *r.ContentID
		answered[i] = true
		if r.Error != nil && !azNotFound(r.Error) {
			errs[i] = a.wrap("delete", keys[i], r.Error)
		}
	}
	for i, ok := range answered {
		if !ok {
			errs[i] = fmt.Errorf("objstore: azure delete %s: no answer in the batch's response", keys[i])
		}
	}
	return errs, nil
}

// List implements objstore.Store with List Blobs (flat), following every page. Names
// ending in '/' (folder placeholders) are skipped.
func (a *Store) List(ctx context.Context, prefix string) ([]objstore.ObjectInfo, error) {
	return a.list(ctx, prefix, -1)
}

// Create implements objstore.Store. The writer buffers one block: an object smaller
// than a block is sent with one Put Blob on Close, a larger one is staged
// block by block (uncommitted blocks are invisible) and committed with Put
// Block List on Close. Block ids carry a random writer id, so concurrent
// writers of one name do not mix blocks. Abort leaves staged blocks to the
// service, which discards uncommitted blocks after a week.
func (a *Store) Create(ctx context.Context, key string) (objstore.ObjectWriter, error) {
	n, err := a.name(key)
	if err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	var id [8]byte
	if _, err := rand.Read(id[:]); err != nil {
		return nil, err
	}
	return driver.NewPartWriter(ctx, a.blockSize, &azUpload{a: a, key: key, name: n, id: hex.EncodeToString(id[:])}), nil
}

// azUpload stages blocks and commits their list.
type azUpload struct {
	a         *Store
	key, name string
	id        string // of the writer, in every block id
	blocks    []string
}

func (u *azUpload) Part(ctx context.Context, n int, p []byte) error {
	// Every id of one blob must have the same length.
	id := base64.StdEncoding.EncodeToString(fmt.Appendf(nil, "%s-%08d", u.id, n))
	_, err := u.a.c.NewBlockBlobClient(u.name).StageBlock(ctx, id, streaming.NopCloser(bytes.NewReader(p)), nil)
	if err != nil {
		return u.a.wrap("stage block", u.key, err)
	}
	u.blocks = append(u.blocks, id)
	return nil
}

func (u *azUpload) Complete(ctx context.Context, _ int) error {
	if _, err := u.a.c.NewBlockBlobClient(u.name).CommitBlockList(ctx, u.blocks, nil); err != nil {
		return u.a.wrap("commit block list", u.key, err)
	}
	return nil
}

func (u *azUpload) Whole(ctx context.Context, p []byte) error { return u.a.Put(ctx, u.key, p) }

// Abort leaves the staged blocks to the service (see Create).
func (u *azUpload) Abort(context.Context) error { return nil }

// ListFirst implements objstore.FirstLister: one List Blobs request with
// maxresults (Azure answers at most 5000 a page: more take more pages).
func (a *Store) ListFirst(ctx context.Context, prefix string, n int) ([]objstore.ObjectInfo, error) {
	if n <= 0 {
		return nil, objstore.ValidatePrefix(prefix)
	}
	return a.list(ctx, prefix, n)
}

// list lists the first n keys under prefix in byte order (n < 0: all of
// them), page by page.
func (a *Store) list(ctx context.Context, prefix string, n int) ([]objstore.ObjectInfo, error) {
	if err := objstore.ValidatePrefix(prefix); err != nil {
		return nil, err
	}
	full := a.root + prefix
	var out []objstore.ObjectInfo
	opts := &container.ListBlobsFlatOptions{Prefix: &full}
	if n >= 0 {
		opts.MaxResults = to.Ptr(int32(min(n, 5000)))
	}
	p := a.c.NewListBlobsFlatPager(opts)
	for (n < 0 || len(out) < n) && p.More() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return nil, fmt.Errorf("objstore: azure list %q: %w", prefix, err)
		}
		for _, it := range page.Segment.BlobItems {
			name := driver.Deref(it.Name)
			if !strings.HasPrefix(name, full) || strings.HasSuffix(name, "/") {
				continue
			}
			info := objstore.ObjectInfo{Key: name[len(a.root):]}
			if it.Properties != nil {
				info.Size = driver.Deref(it.Properties.ContentLength)
				info.ModTime = driver.Deref(it.Properties.LastModified)
			}
			out = append(out, info)
		}
	}
	return driver.FirstSorted(out, n), nil
}
