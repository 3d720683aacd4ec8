package gcs

import (
	"context"

	"github.com/lance-context/lance-context/objstore"
	"github.com/lance-context/lance-context/objstore/internal/driver"
)

// Scheme is the URL scheme this package registers with objstore when it is
// imported: objstore.Open opens "gs://bucket/prefix" with Open.
const Scheme = "gs"

func init() { objstore.Register(Scheme, Open) }

// Open opens "gs://bucket/prefix" (the prefix is optional) with the
// configuration ConfigFromEnv reads and opts' transport. It is the
// objstore.Opener of "gs".
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
