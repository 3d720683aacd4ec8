package objstore

import (
	"context"
	"fmt"
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
//   - "mem://name": an in-memory store; the same name returns the same store
//     within a process.
//   - "file://path" or a plain path: the local filesystem rooted at path,
//     created if missing.
func Open(ctx context.Context, url string) (Store, error) {
	switch {
	case strings.HasPrefix(url, "s3://"):
		bucket, prefix, _ := strings.Cut(strings.TrimPrefix(url, "s3://"), "/")
		if bucket == "" {
			return nil, fmt.Errorf("objstore: open %q: missing bucket", url)
		}
		cfg := S3ConfigFromEnv()
		cfg.Bucket = bucket
		cfg.Prefix = prefix
		return NewS3(ctx, cfg)
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
