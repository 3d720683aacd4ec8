package objstore

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
)

var (
	memStoresMu sync.Mutex
	memStores   = map[string]*Memory{}
)

// Open returns the store a URL names:
//
//   - "s3://bucket/prefix": S3 or an S3-compatible server, configured from the
//     environment (see S3ConfigFromEnv); the prefix is optional.
//   - "gs://bucket/prefix": Google Cloud Storage, configured from the
//     environment (see GCSConfigFromEnv); the prefix is optional.
//   - "az://container/prefix": Azure Blob Storage, configured from the
//     environment (see AzureConfigFromEnv); the prefix is optional.
//   - "mem://name": an in-memory store; the same name returns the same store
//     within a process.
//   - "file://path" or a plain path: the local filesystem rooted at path,
//     created if missing.
func Open(ctx context.Context, url string) (Store, error) {
	return open(ctx, url, nil)
}

// open is Open with an HTTP transport for the cloud backends (tests count
// requests with it); nil: their SDKs' own.
func open(ctx context.Context, url string, rt http.RoundTripper) (Store, error) {
	switch {
	case strings.HasPrefix(url, "s3://"):
		bucket, prefix, _ := strings.Cut(strings.TrimPrefix(url, "s3://"), "/")
		if bucket == "" {
			return nil, fmt.Errorf("objstore: open %q: missing bucket", url)
		}
		cfg := S3ConfigFromEnv()
		cfg.Bucket = bucket
		cfg.Prefix = prefix
		cfg.Transport = rt
		return NewS3(ctx, cfg)
	case strings.HasPrefix(url, "gs://"):
		bucket, prefix, _ := strings.Cut(strings.TrimPrefix(url, "gs://"), "/")
		if bucket == "" {
			return nil, fmt.Errorf("objstore: open %q: missing bucket", url)
		}
		cfg := GCSConfigFromEnv()
		cfg.Bucket = bucket
		cfg.Prefix = prefix
		cfg.Transport = rt
		return NewGCS(ctx, cfg)
	case strings.HasPrefix(url, "az://"):
		cont, prefix, _ := strings.Cut(strings.TrimPrefix(url, "az://"), "/")
		if cont == "" {
			return nil, fmt.Errorf("objstore: open %q: missing container", url)
		}
		cfg := AzureConfigFromEnv()
		cfg.Container = cont
		cfg.Prefix = prefix
		cfg.Transport = rt
		return NewAzure(ctx, cfg)
	case strings.HasPrefix(url, "mem://"):
		name := strings.TrimPrefix(url, "mem://")
		memStoresMu.Lock()
		defer memStoresMu.Unlock()
		m, ok := memStores[name]
		if !ok {
			m = NewMemory()
			memStores[name] = m
		}
		return m, nil
	case strings.Contains(url, "://") && !strings.HasPrefix(url, "file://"):
		return nil, fmt.Errorf("objstore: open %q: unsupported scheme", url)
	default:
		return NewLocal(strings.TrimPrefix(url, "file://"))
	}
}
