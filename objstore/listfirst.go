package objstore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"cloud.google.com/go/storage"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/container"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"google.golang.org/api/iterator"
)

// FirstLister is implemented by stores that can list the first n keys under
// a prefix, in byte order, with one request for n up to a page (S3's
// max-keys and GCS's maxResults, 1000 a page; Azure's maxresults, 5000).
// It is optional: ListFirst falls back to List.
type FirstLister interface {
	ListFirst(ctx context.Context, prefix string, n int) ([]ObjectInfo, error)
}

// ListFirst returns the first n objects under prefix in byte order of key
// (fewer when there are fewer). On a store that implements FirstLister it
// costs one request whatever the number of keys under prefix; elsewhere it
// lists them all. Readers use it to find the newest of names that sort
// newest first (Lance's V2 manifest names).
func ListFirst(ctx context.Context, r Reader, prefix string, n int) ([]ObjectInfo, error) {
	if n <= 0 {
		return nil, nil
	}
	if fl, ok := r.(FirstLister); ok {
		return fl.ListFirst(ctx, prefix, n)
	}
	out, err := r.List(ctx, prefix)
	if err != nil {
		return nil, err
	}
	if len(out) > n {
		out = out[:n]
	}
	return out, nil
}

var (
	_ FirstLister = (*S3)(nil)
	_ FirstLister = (*GCS)(nil)
	_ FirstLister = (*Azure)(nil)
	_ FirstLister = (*subStore)(nil)
	_ FirstLister = (*Counting)(nil)
	_ FirstLister = (*Faulty)(nil)
)

// ListFirst implements FirstLister: one ListObjectsV2 request with MaxKeys
// (S3 answers at most 1000 keys a request: more take more pages).
func (s *S3) ListFirst(ctx context.Context, prefix string, n int) ([]ObjectInfo, error) {
	if n <= 0 {
		return nil, validatePrefix(prefix)
	}
	return s.list(ctx, prefix, n)
}

// list lists the first n keys under prefix in byte order (n < 0: all of
// them), page by page.
func (s *S3) list(ctx context.Context, prefix string, n int) ([]ObjectInfo, error) {
	if err := validatePrefix(prefix); err != nil {
		return nil, err
	}
	full := s.root + prefix
	var (
		out   []ObjectInfo
		token *string
	)
	for {
		in := &s3.ListObjectsV2Input{Bucket: &s.bucket, Prefix: &full, ContinuationToken: token}
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
			out = append(out, ObjectInfo{Key: k[len(s.root):], Size: aws.ToInt64(o.Size), ModTime: aws.ToTime(o.LastModified)})
		}
		if (n >= 0 && len(out) >= n) || !aws.ToBool(page.IsTruncated) || page.NextContinuationToken == nil {
			break
		}
		token = page.NextContinuationToken
	}
	return firstSorted(out, n), nil
}

// listPage asks for one page of a listing, again when the answer fails
// transiently or its body breaks off (a connection reset mid-body: the
// SDK's retryer does not retry a body that fails to decode, so one torn
// answer failed every read that lists), within a read's budget.
func (s *S3) listPage(ctx context.Context, in *s3.ListObjectsV2Input) (*s3.ListObjectsV2Output, error) {
	var first time.Time
	for attempt := 1; ; attempt++ {
		page, err := s.client.ListObjectsV2(ctx, in)
		if err == nil {
			return page, nil
		}
		if first.IsZero() {
			first = time.Now()
		}
		if ctx.Err() != nil || attempt >= readAttempts || time.Since(first) > readRetryWindow || !(s3Retryable(err) || isTornBody(err)) {
			return nil, err
		}
		if err := sleepCtx(ctx, time.Duration(attempt)*50*time.Millisecond); err != nil {
			return nil, err
		}
	}
}

// isTornBody reports an answer whose body broke off before its end.
func isTornBody(err error) bool {
	return errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, syscall.ECONNRESET)
}

// firstSorted sorts infos by key (the stores list in byte order already;
// sorting guards compatible servers) and keeps the first n (n < 0: all).
func firstSorted(infos []ObjectInfo, n int) []ObjectInfo {
	slices.SortFunc(infos, func(a, b ObjectInfo) int { return strings.Compare(a.Key, b.Key) })
	if n >= 0 && len(infos) > n {
		infos = infos[:n]
	}
	return infos
}

// ListFirst implements FirstLister: one objects.list request with
// maxResults (GCS answers at most 1000 a page: more take more pages).
func (g *GCS) ListFirst(ctx context.Context, prefix string, n int) ([]ObjectInfo, error) {
	if n <= 0 {
		return nil, validatePrefix(prefix)
	}
	return g.list(ctx, prefix, n)
}

// list lists the first n keys under prefix in byte order (n < 0: all of
// them), page by page.
func (g *GCS) list(ctx context.Context, prefix string, n int) ([]ObjectInfo, error) {
	if err := validatePrefix(prefix); err != nil {
		return nil, err
	}
	full := g.root + prefix
	q := &storage.Query{Prefix: full}
	if err := q.SetAttrSelection([]string{"Name", "Size", "Updated"}); err != nil {
		return nil, err
	}
	var out []ObjectInfo
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
			out = append(out, ObjectInfo{Key: a.Name[len(g.root):], Size: a.Size, ModTime: a.Updated})
		}
		if token == "" {
			break
		}
	}
	return firstSorted(out, n), nil
}

// ListFirst implements FirstLister: one List Blobs request with
// maxresults (Azure answers at most 5000 a page: more take more pages).
func (a *Azure) ListFirst(ctx context.Context, prefix string, n int) ([]ObjectInfo, error) {
	if n <= 0 {
		return nil, validatePrefix(prefix)
	}
	return a.list(ctx, prefix, n)
}

// list lists the first n keys under prefix in byte order (n < 0: all of
// them), page by page.
func (a *Azure) list(ctx context.Context, prefix string, n int) ([]ObjectInfo, error) {
	if err := validatePrefix(prefix); err != nil {
		return nil, err
	}
	full := a.root + prefix
	var out []ObjectInfo
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
			name := deref(it.Name)
			if !strings.HasPrefix(name, full) || strings.HasSuffix(name, "/") {
				continue
			}
			info := ObjectInfo{Key: name[len(a.root):]}
			if it.Properties != nil {
				info.Size = deref(it.Properties.ContentLength)
				info.ModTime = deref(it.Properties.LastModified)
			}
			out = append(out, info)
		}
	}
	return firstSorted(out, n), nil
}

// ListFirst implements FirstLister.
func (s *subStore) ListFirst(ctx context.Context, prefix string, n int) ([]ObjectInfo, error) {
	if err := validatePrefix(prefix); err != nil {
		return nil, err
	}
	infos, err := ListFirst(ctx, s.inner, s.prefix+prefix, n)
	if err != nil {
		return nil, err
	}
	for i := range infos {
		infos[i].Key = strings.TrimPrefix(infos[i].Key, s.prefix)
	}
	return infos, nil
}

// ListFirst implements FirstLister, counted as OpList.
func (c *Counting) ListFirst(ctx context.Context, prefix string, n int) ([]ObjectInfo, error) {
	d := c.start(OpList, 0)
	var out []ObjectInfo
	err := c.wait(ctx)
	if err == nil {
		out, err = ListFirst(ctx, c.inner, prefix, n)
	}
	c.finish(d, 0)
	return out, err
}

// ListFirst implements FirstLister; its faults are List's.
func (f *Faulty) ListFirst(ctx context.Context, prefix string, n int) (infos []ObjectInfo, err error) {
	err = f.do(ctx, OpList, prefix, func() error { infos, err = ListFirst(ctx, f.inner, prefix, n); return err })
	if err != nil {
		return nil, err
	}
	return infos, nil
}

var _ FirstLister = (*Local)(nil)

// ListFirst implements FirstLister. For a prefix naming a directory of
// files it reads that directory's names (sorted by the OS call) and looks
// up only the first n; anything else (a partial name, subdirectories among
// the first names) takes List.
func (l *Local) ListFirst(ctx context.Context, prefix string, n int) ([]ObjectInfo, error) {
	fallback := func() ([]ObjectInfo, error) {
		out, err := l.List(ctx, prefix)
		if len(out) > n {
			out = out[:n]
		}
		return out, err
	}
	ents, ok, err := l.dirEntries(ctx, prefix)
	if err != nil || !ok {
		if err != nil {
			return nil, err
		}
		return fallback()
	}
	var out []ObjectInfo
	for _, d := range ents {
		if len(out) == n {
			break
		}
		if strings.HasPrefix(d.Name(), tmpPrefix) {
			continue
		}
		if !d.Type().IsRegular() {
			return fallback()
		}
		fi, err := d.Info()
		if err != nil {
			if notFound(err) {
				continue
			}
			return nil, fmt.Errorf("objstore: local list %q: %w", prefix, err)
		}
		out = append(out, ObjectInfo{Key: prefix + d.Name(), Size: fi.Size(), ModTime: fi.ModTime()})
	}
	return out, nil
}

// dirEntries reads the directory a prefix ending in "/" names, sorted by
// name (none when it does not exist); ok is false for any other prefix,
// which the caller lists with List. The entries may be shared with other
// callers (readDir): they must not be modified.
func (l *Local) dirEntries(ctx context.Context, prefix string) (ents []os.DirEntry, ok bool, err error) {
	if err := ctx.Err(); err != nil {
		return nil, false, err
	}
	if err := validatePrefix(prefix); err != nil {
		return nil, false, err
	}
	if !strings.HasSuffix(prefix, "/") {
		return nil, false, nil
	}
	ents, err = readDir(filepath.Join(l.root, filepath.FromSlash(prefix)))
	if err != nil {
		if notFound(err) {
			return nil, true, nil
		}
		return nil, false, fmt.Errorf("objstore: local list %q: %w", prefix, err)
	}
	return ents, true, nil
}
