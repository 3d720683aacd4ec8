package s3

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"github.com/lance-context/lance-context/objstore"
	"github.com/lance-context/lance-context/objstore/internal/driver"
	"github.com/lance-context/lance-context/objstore/internal/sleep"
	"io"
	"math"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go"
)

// DefaultPartSize is the multipart-upload part size of S3 writers.
const DefaultPartSize = 8 << 20

// minPartSize is S3's minimum size of every part but the last.
const minPartSize = 5 << 20

// Config configures an S3 store. Empty fields fall back to the AWS SDK's
// defaults (credential chain, shared config files).
type Config struct {
	Bucket string
	Prefix string // root of the store inside the bucket; may be empty

	Endpoint  string // e.g. http://127.0.0.1:7070; empty: AWS
	Region    string // empty: us-east-1
	PathStyle bool   // path-style addressing (forced when Endpoint is set)

	// Static credentials; when AccessKeyID is empty the SDK's default
	// credential chain is used.
	AccessKeyID, SecretAccessKey, SessionToken string

	PartSize int64 // multipart part size; 0: DefaultPartSize

	// Transport carries the HTTP requests; nil: the SDK's. Tests count
	// requests with it or inject faults (objstore.TearingTransport).
	Transport http.RoundTripper
}

// ConfigFromEnv reads the endpoint (AWS_ENDPOINT_URL_S3, else
// AWS_ENDPOINT_URL), region (AWS_REGION, else AWS_DEFAULT_REGION, else
// us-east-1) and path style (AWS_S3_FORCE_PATH_STYLE=true, or any endpoint
// set) from the environment. Credentials come from the SDK's default chain
// (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN, profiles...).
func ConfigFromEnv() Config {
	cfg := Config{
		Endpoint: os.Getenv("AWS_ENDPOINT_URL_S3"),
		Region:   os.Getenv("AWS_REGION"),
	}
	if cfg.Endpoint == "" {
		cfg.Endpoint = os.Getenv("AWS_ENDPOINT_URL")
	}
	if cfg.Region == "" {
		cfg.Region = os.Getenv("AWS_DEFAULT_REGION")
	}
	cfg.PathStyle, _ = strconv.ParseBool(os.Getenv("AWS_S3_FORCE_PATH_STYLE"))
	return cfg
}

// Store is an objstore.Store in an S3 bucket (or an S3-compatible server) under a prefix.
type Store struct {
	client   *awss3.Client
	bucket   string
	root     string // "" or prefix ending with '/'
	partSize int64
}

var (
	_ objstore.Store        = (*Store)(nil)
	_ objstore.FirstLister  = (*Store)(nil)
	_ objstore.TailReader   = (*Store)(nil)
	_ objstore.BatchDeleter = (*Store)(nil)
)

// New returns an S3 store. It does not contact the server.
func New(ctx context.Context, cfg Config) (*Store, error) {
	if cfg.Bucket == "" {
		return nil, errors.New("objstore: s3: empty bucket")
	}
	root := strings.Trim(cfg.Prefix, "/")
	if root != "" {
		if err := objstore.ValidateKey(root); err != nil {
			return nil, fmt.Errorf("objstore: s3 prefix: %w", err)
		}
		root += "/"
	}
	if cfg.Region == "" {
		cfg.Region = "us-east-1"
	}
	if cfg.PartSize == 0 {
		cfg.PartSize = DefaultPartSize
	}
	if cfg.PartSize < minPartSize {
		return nil, fmt.Errorf("objstore: s3: part size %d below the S3 minimum %d", cfg.PartSize, minPartSize)
	}
	opts := []func(*config.LoadOptions) error{config.WithRegion(cfg.Region)}
	if cfg.AccessKeyID != "" {
		opts = append(opts, config.WithCredentialsProvider(
			credentials.NewStaticCredentialsProvider(cfg.AccessKeyID, cfg.SecretAccessKey, cfg.SessionToken)))
	}
	awsCfg, err := config.LoadDefaultConfig(ctx, opts...)
	if err != nil {
		return nil, fmt.Errorf("objstore: s3: load AWS config: %w", err)
	}
	if cfg.Transport != nil {
		awsCfg.HTTPClient = &http.Client{Transport: cfg.Transport}
	}
	client := awss3.NewFromConfig(awsCfg, func(o *awss3.Options) {
		if cfg.Endpoint != "" {
			o.BaseEndpoint = aws.String(cfg.Endpoint)
			o.UsePathStyle = true
		}
		if cfg.PathStyle {
			o.UsePathStyle = true
		}
		// Validate response checksums only where asked for (whole-object
		// Get): ranged reads cannot be checked against a full-object
		// checksum, which some S3-compatible servers send anyway.
		o.ResponseChecksumValidation = aws.ResponseChecksumValidationWhenRequired
		o.DisableLogOutputChecksumValidationSkipped = true
	})
	return &Store{client: client, bucket: cfg.Bucket, root: root, partSize: cfg.PartSize}, nil
}

func (s *Store) objKey(key string) (string, error) {
	if err := objstore.ValidateKey(key); err != nil {
		return "", err
	}
	return s.root + key, nil
}

func httpStatus(err error) int {
	var re *awshttp.ResponseError
	if errors.As(err, &re) {
		return re.HTTPStatusCode()
	}
	return 0
}

func errorCode(err error) string {
	var ae smithy.APIError
	if errors.As(err, &ae) {
		return ae.ErrorCode()
	}
	return ""
}

func isNotFound(err error) bool {
	var nsk *types.NoSuchKey
	var nf *types.NotFound
	if errors.As(err, &nsk) || errors.As(err, &nf) {
		return true
	}
	c := errorCode(err)
	return c == "NoSuchKey" || c == "NotFound"
}

func isPreconditionFailed(err error) bool {
	return httpStatus(err) == http.StatusPreconditionFailed || errorCode(err) == "PreconditionFailed"
}

func isConditionalConflict(err error) bool {
	return httpStatus(err) == http.StatusConflict || errorCode(err) == "ConditionalRequestConflict"
}

// wrap turns an SDK error into one naming the operation and key; context
// errors stay recognisable with errors.Is.
func (s *Store) wrap(op, key string, err error) error {
	if isNotFound(err) {
		return fmt.Errorf("%w: %s (s3 %s: %w)", objstore.ErrNotFound, key, op, err)
	}
	return fmt.Errorf("objstore: s3 %s %s: %w", op, key, err)
}

// Get implements objstore.Store. A body cut short is resumed (driver.ReadResuming).
func (s *Store) Get(ctx context.Context, key string) ([]byte, error) {
	k, err := s.objKey(key)
	if err != nil {
		return nil, err
	}
	var etag *string
	data, err := driver.ReadResuming(ctx, driver.ResumableRead{Key: key, Limit: -1, Retryable: s3Retryable,
		Open: func(ctx context.Context, got int64) (io.ReadCloser, int64, error) {
			in := &awss3.GetObjectInput{Bucket: &s.bucket, Key: &k, ChecksumMode: types.ChecksumModeEnabled}
			if got > 0 {
				// The rest is a range, which a whole-object checksum
				// cannot check.
				in.ChecksumMode, in.Range = "", aws.String(driver.HTTPRange(got, -1))
			}
			out, err := s.getObject(ctx, in, got, etag)
			if err != nil {
				return nil, 0, err
			}
			etag = out.ETag
			return out.Body, driver.BodySize(out.ContentLength), nil
		}})
	if err != nil {
		return nil, s.wrap("get", key, err)
	}
	return data, nil
}

// GetRange implements objstore.Store with a Range request; a body cut short is
// resumed (driver.ReadResuming).
func (s *Store) GetRange(ctx context.Context, key string, offset, length int64) ([]byte, error) {
	k, err := s.objKey(key)
	if err != nil {
		return nil, err
	}
	if offset < 0 || length < 0 {
		return nil, fmt.Errorf("%w: %s: offset %d length %d", objstore.ErrInvalidRange, key, offset, length)
	}
	if length == 0 {
		return driver.EmptyRange(ctx, s, key, offset)
	}
	end := int64(-1) // to the end of the object
	if length <= math.MaxInt64-offset {
		end = offset + length
	}
	var etag *string
	data, err := driver.ReadResuming(ctx, driver.ResumableRead{Key: key, Limit: length, Retryable: s3Retryable,
		Open: func(ctx context.Context, got int64) (io.ReadCloser, int64, error) {
			in := &awss3.GetObjectInput{Bucket: &s.bucket, Key: &k, Range: aws.String(driver.HTTPRange(offset+got, end))}
			out, err := s.getObject(ctx, in, got, etag)
			if err != nil {
				return nil, 0, err
			}
			// A server that ignores Range answers 200 with the whole object.
			if out.ContentRange == nil && offset > 0 {
				out.Body.Close()
				return nil, 0, driver.Permanent{Err: errors.New("server ignored the Range header")}
			}
			etag = out.ETag
			return out.Body, driver.BodySize(out.ContentLength), nil
		}})
	if err != nil {
		if httpStatus(err) == http.StatusRequestedRangeNotSatisfiable || errorCode(err) == "InvalidRange" {
			// offset >= size: empty when offset == size, an error past it.
			return driver.EmptyRange(ctx, s, key, offset)
		}
		return nil, s.wrap("get range", key, err)
	}
	return data, nil
}

// getObject sends one GetObject of a read through driver.ReadResuming, with the
// SDK's retries off: driver.ReadResuming retries, knowing how much of a body
// arrived. A request for the rest of an object (got > 0) is conditional
// on the ETag of the first answer, so that the pieces are of one object,
// and must be answered with a range.
func (s *Store) getObject(ctx context.Context, in *awss3.GetObjectInput, got int64, etag *string) (*awss3.GetObjectOutput, error) {
	if got > 0 {
		in.IfMatch = etag
	}
	out, err := s.client.GetObject(ctx, in, func(o *awss3.Options) { o.RetryMaxAttempts = 1 })
	if err != nil {
		return nil, err
	}
	if got > 0 && out.ContentRange == nil {
		out.Body.Close()
		return nil, driver.Permanent{Err: errors.New("server ignored the Range header of a resumed read")}
	}
	return out, nil
}

func s3Retryable(err error) bool { return driver.RetryableStatus(httpStatus(err), err) }

// Head implements objstore.Store.
func (s *Store) Head(ctx context.Context, key string) (objstore.ObjectInfo, error) {
	k, err := s.objKey(key)
	if err != nil {
		return objstore.ObjectInfo{}, err
	}
	out, err := s.client.HeadObject(ctx, &awss3.HeadObjectInput{Bucket: &s.bucket, Key: &k})
	if err != nil {
		return objstore.ObjectInfo{}, s.wrap("head", key, err)
	}
	return objstore.ObjectInfo{Key: key, Size: aws.ToInt64(out.ContentLength), ModTime: aws.ToTime(out.LastModified)}, nil
}

// Put implements objstore.Store.
func (s *Store) Put(ctx context.Context, key string, data []byte) error {
	k, err := s.objKey(key)
	if err != nil {
		return err
	}
	_, err = s.client.PutObject(ctx, &awss3.PutObjectInput{
		Bucket: &s.bucket, Key: &k,
		Body: bytes.NewReader(data), ContentLength: aws.Int64(int64(len(data))),
	})
	if err != nil {
		return s.wrap("put", key, err)
	}
	return nil
}

// PutIfAbsent implements objstore.Store with PutObject and "If-None-Match: *": the
// server answers 412 Precondition Failed if the key exists.
//
// It retries transient errors itself rather than through the SDK, so that it
// knows when an earlier attempt may have been written with its
// acknowledgement lost: if a later attempt then finds the key taken, the
// object is read back, and identical content counts as this call's success.
// A 409 ConditionalRequestConflict (another conditional write to the key in
// flight) is retried too; if it persists it is reported as objstore.ErrExists.
func (s *Store) PutIfAbsent(ctx context.Context, key string, data []byte) error {
	k, err := s.objKey(key)
	if err != nil {
		return err
	}
	retryer := retry.NewStandard()
	ambiguous := false
	for attempt := 1; ; attempt++ {
		_, err := s.client.PutObject(ctx, &awss3.PutObjectInput{
			Bucket: &s.bucket, Key: &k,
			Body: bytes.NewReader(data), ContentLength: aws.Int64(int64(len(data))),
			IfNoneMatch: aws.String("*"),
		}, func(o *awss3.Options) { o.RetryMaxAttempts = 1 })
		if err == nil {
			return nil
		}
		conflict := isConditionalConflict(err)
		switch {
		case isPreconditionFailed(err) || (conflict && attempt >= driver.PutIfAbsentAttempts):
			if ambiguous {
				if cur, gerr := s.Get(ctx, key); gerr == nil && bytes.Equal(cur, data) {
					return nil
				}
			}
			return fmt.Errorf("%w: %s (s3: %w)", objstore.ErrExists, key, err)
		case conflict:
		case ctx.Err() != nil || attempt >= driver.PutIfAbsentAttempts || !retryer.IsErrorRetryable(err):
			return s.wrap("put if absent", key, err)
		default:
			ambiguous = true
		}
		delay, derr := retryer.RetryDelay(attempt, err)
		if derr != nil {
			delay = 100 * time.Millisecond
		}
		if err := sleep.Ctx(ctx, delay); err != nil {
			return s.wrap("put if absent", key, err)
		}
	}
}

// Delete implements objstore.Store.
func (s *Store) Delete(ctx context.Context, key string) error {
	k, err := s.objKey(key)
	if err != nil {
		return err
	}
	_, err = s.client.DeleteObject(ctx, &awss3.DeleteObjectInput{Bucket: &s.bucket, Key: &k})
	if err != nil && !isNotFound(err) {
		return s.wrap("delete", key, err)
	}
	return nil
}

// DeleteMany implements objstore.BatchDeleter with DeleteObjects, 1000
// keys a request (S3's bound), deleteParallel requests at once. A key
// that was absent counts as deleted, as with Delete.
func (s *Store) DeleteMany(ctx context.Context, keys []string) error {
	return driver.DeleteMany(ctx, keys, driver.BatchDelete{
		Size: 1000, Parallel: deleteParallel, Send: s.deleteObjects,
		Retryable: func(err error) bool {
			var ke *keyError
			if errors.As(err, &ke) {
				return ke.code == "InternalError" || ke.code == "SlowDown" || ke.code == "ServiceUnavailable"
			}
			return s3Retryable(err)
		},
	})
}

// deleteParallel is how many DeleteObjects requests of one DeleteMany
// are in flight at once.
const deleteParallel = 4

// keyError is the failure of one key of a DeleteObjects request.
type keyError struct{ code, msg string }

func (e *keyError) Error() string { return e.code + ": " + e.msg }

// deleteObjects sends one DeleteObjects request (quiet: the answer lists
// only failures), with the SDK's retries off: driver.DeleteMany retries.
func (s *Store) deleteObjects(ctx context.Context, keys []string) ([]error, error) {
	objs := make([]types.ObjectIdentifier, len(keys))
	at := make(map[string]int, len(keys))
	for i, k := range keys {
		objs[i] = types.ObjectIdentifier{Key: aws.String(s.root + k)}
		at[s.root+k] = i
	}
	out, err := s.client.DeleteObjects(ctx, &awss3.DeleteObjectsInput{
		Bucket: &s.bucket, Delete: &types.Delete{Objects: objs, Quiet: aws.Bool(true)},
	}, func(o *awss3.Options) { o.RetryMaxAttempts = 1 })
	if err != nil {
		return nil, fmt.Errorf("objstore: s3 delete objects (%d keys): %w", len(keys), err)
	}
	errs := make([]error, len(keys))
	for _, e := range out.Errors {
		i, ok := at[aws.ToString(e.Key)]
		if !ok || aws.ToString(e.Code) == "NoSuchKey" {
			continue
		}
		errs[i] = fmt.Errorf("objstore: s3 delete %s: %w", keys[i], &keyError{code: aws.ToString(e.Code), msg: aws.ToString(e.Message)})
	}
	return errs, nil
}

// List implements objstore.Store with ListObjectsV2, following every page. Keys
// ending in '/' (directory markers some tools create) are skipped.
func (s *Store) List(ctx context.Context, prefix string) ([]objstore.ObjectInfo, error) {
	return s.list(ctx, prefix, -1)
}

// Create implements objstore.Store. The writer buffers one part: an object smaller
// than a part is sent with one PutObject on Close, a larger one with a
// multipart upload completed on Close (aborted on Abort or failure).
func (s *Store) Create(ctx context.Context, key string) (objstore.ObjectWriter, error) {
	k, err := s.objKey(key)
	if err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return driver.NewPartWriter(ctx, s.partSize, &s3Upload{s: s, key: key, k: k}), nil
}

// s3Upload is a multipart upload, started with the first part.
type s3Upload struct {
	s        *Store
	key, k   string
	uploadID *string
	parts    []types.CompletedPart
}

func (u *s3Upload) Part(ctx context.Context, n int, p []byte) error {
	if u.uploadID == nil {
		out, err := u.s.client.CreateMultipartUpload(ctx, &awss3.CreateMultipartUploadInput{Bucket: &u.s.bucket, Key: &u.k})
		if err != nil {
			return u.s.wrap("create multipart upload", u.key, err)
		}
		u.uploadID = out.UploadId
	}
	num := int32(n + 1)
	out, err := u.s.client.UploadPart(ctx, &awss3.UploadPartInput{
		Bucket: &u.s.bucket, Key: &u.k, UploadId: u.uploadID, PartNumber: &num,
		Body: bytes.NewReader(p), ContentLength: aws.Int64(int64(len(p))),
	})
	if err != nil {
		return u.s.wrap("upload part", u.key, err)
	}
	u.parts = append(u.parts, types.CompletedPart{ETag: out.ETag, PartNumber: &num})
	return nil
}

func (u *s3Upload) Complete(ctx context.Context, _ int) error {
	_, err := u.s.client.CompleteMultipartUpload(ctx, &awss3.CompleteMultipartUploadInput{
		Bucket: &u.s.bucket, Key: &u.k, UploadId: u.uploadID,
		MultipartUpload: &types.CompletedMultipartUpload{Parts: u.parts},
	})
	if err != nil {
		return u.s.wrap("complete multipart upload", u.key, err)
	}
	return nil
}

func (u *s3Upload) Whole(ctx context.Context, p []byte) error { return u.s.Put(ctx, u.key, p) }

// Abort releases the parts of a multipart upload, even when the writer's
// context is already canceled.
func (u *s3Upload) Abort(ctx context.Context) error {
	if u.uploadID == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	_, err := u.s.client.AbortMultipartUpload(ctx, &awss3.AbortMultipartUploadInput{Bucket: &u.s.bucket, Key: &u.k, UploadId: u.uploadID})
	u.uploadID = nil
	if err != nil && !isNotFound(err) && errorCode(err) != "NoSuchUpload" {
		return u.s.wrap("abort multipart upload", u.key, err)
	}
	return nil
}

// ListFirst implements objstore.FirstLister: one ListObjectsV2 request with MaxKeys
// (S3 answers at most 1000 keys a request: more take more pages).
func (s *Store) ListFirst(ctx context.Context, prefix string, n int) ([]objstore.ObjectInfo, error) {
	if n <= 0 {
		return nil, objstore.ValidatePrefix(prefix)
	}
	return s.list(ctx, prefix, n)
}

// list lists the first n keys under prefix in byte order (n < 0: all of
// them), page by page.
func (s *Store) list(ctx context.Context, prefix string, n int) ([]objstore.ObjectInfo, error) {
	if err := objstore.ValidatePrefix(prefix); err != nil {
		return nil, err
	}
	full := s.root + prefix
	var (
		out   []objstore.ObjectInfo
		token *string
	)
	for {
		in := &awss3.ListObjectsV2Input{Bucket: &s.bucket, Prefix: &full, ContinuationToken: token}
		if n >= 0 {
			in.MaxKeys = aws.Int32(int32(min(n-len(out), 1000)))
		}
		page, err := s.listPage(ctx, in)
		if err != nil {
			return nil, fmt.Errorf("objstore: s3 list %q: %w", prefix, err)
		}
		for _, o := range page.Contents {
			k := aws.ToString(o.Key)
			if !strings.HasPrefix(k, full) || strings.HasSuffix(k, "/") {
				continue
			}
			out = append(out, objstore.ObjectInfo{Key: k[len(s.root):], Size: aws.ToInt64(o.Size), ModTime: aws.ToTime(o.LastModified)})
		}
		if (n >= 0 && len(out) >= n) || !aws.ToBool(page.IsTruncated) || page.NextContinuationToken == nil {
			break
		}
		token = page.NextContinuationToken
	}
	return driver.FirstSorted(out, n), nil
}

// listPage asks for one page of a listing, again when the answer fails
// transiently or its body breaks off (a connection reset mid-body: the
// SDK's retryer does not retry a body that fails to decode, so one torn
// answer failed every read that lists), within a read's budget.
func (s *Store) listPage(ctx context.Context, in *awss3.ListObjectsV2Input) (*awss3.ListObjectsV2Output, error) {
	var first time.Time
	for attempt := 1; ; attempt++ {
		page, err := s.client.ListObjectsV2(ctx, in)
		if err == nil {
			return page, nil
		}
		if first.IsZero() {
			first = time.Now()
		}
		if ctx.Err() != nil || attempt >= driver.ReadAttempts || time.Since(first) > driver.ReadRetryWindow || !(s3Retryable(err) || driver.IsTornBody(err)) {
			return nil, err
		}
		if err := sleep.Ctx(ctx, time.Duration(attempt)*50*time.Millisecond); err != nil {
			return nil, err
		}
	}
}

// GetTail implements objstore.TailReader: one GetObject with "Range: bytes=-n"; the
// size is the complete length in its Content-Range. A body cut short is
// resumed from the byte it reached (driver.ReadResuming).
func (s *Store) GetTail(ctx context.Context, key string, n int64) ([]byte, objstore.ObjectInfo, error) {
	k, err := s.objKey(key)
	if err != nil {
		return nil, objstore.ObjectInfo{}, err
	}
	if n <= 0 {
		return objstore.HeadTail(ctx, s, key, 0) // "bytes=-0" is unsatisfiable
	}
	var (
		etag     *string
		start    int64 // of the first answer's bytes in the object
		size     int64 = -1
		modified time.Time
	)
	data, err := driver.ReadResuming(ctx, driver.ResumableRead{Key: key, Limit: -1, Retryable: s3Retryable,
		Open: func(ctx context.Context, got int64) (io.ReadCloser, int64, error) {
			rng := fmt.Sprintf("bytes=-%d", n)
			if got > 0 {
				rng = driver.HTTPRange(start+got, -1)
			}
			out, err := s.getObject(ctx, &awss3.GetObjectInput{Bucket: &s.bucket, Key: &k, Range: &rng}, got, etag)
			if err != nil {
				return nil, 0, err
			}
			if got == 0 {
				etag, modified = out.ETag, aws.ToTime(out.LastModified)
				// A server that ignores Range answers 200 with the whole
				// object: its size is then what arrives.
				if out.ContentRange != nil {
					var ok bool
					if start, size, ok = driver.ContentRange(*out.ContentRange); !ok {
						out.Body.Close()
						return nil, 0, driver.Permanent{Err: fmt.Errorf("bad Content-Range %q", *out.ContentRange)}
					}
				}
			}
			return out.Body, driver.BodySize(out.ContentLength), nil
		}})
	if err != nil {
		if httpStatus(err) == http.StatusRequestedRangeNotSatisfiable || errorCode(err) == "InvalidRange" {
			// An empty object has no satisfiable suffix range.
			return objstore.HeadTail(ctx, s, key, n)
		}
		return nil, objstore.ObjectInfo{}, s.wrap("get tail", key, err)
	}
	if size < 0 {
		size = int64(len(data))
	}
	if data, err = driver.TailOf(key, data, size, n); err != nil {
		return nil, objstore.ObjectInfo{}, err
	}
	return data, objstore.ObjectInfo{Key: key, Size: size, ModTime: modified}, nil
}
