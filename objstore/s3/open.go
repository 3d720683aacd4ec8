package s3

import (
	"context"

	"github.com/lance-context/lance-context/objstore"
	"github.com/lance-context/lance-context/objstore/internal/driver"
)

// Scheme is the URL scheme this package registers with objstore when it is
// imported: objstore.Open opens "s3://bucket/prefix" with Open.
const Scheme = "s3"

func init() { objstore.Register(Scheme, Open) }

// Open opens "s3://bucket/prefix" (the prefix is optional) with the
// configuration ConfigFromEnv reads and opts' transport. It is the
// objstore.Opener of "s3".
func Open(ctx context.Context, url string, opts objstore.OpenOptions) (objstore.Store, error) {
	bucket, prefix, err := driver.SplitURL(url, Scheme, "bucket")
	if err != nil {
		return nil, err
	}
	cfg := ConfigFromEnv()
	cfg.Bucket = bucket
	cfg.Prefix = prefix
	cfg.Transport = opts.Transport
	s, err := New(ctx, cfg)
	if err != nil {
		return nil, err
	}
	return s, nil
}
