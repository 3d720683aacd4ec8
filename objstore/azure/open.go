package azure

import (
	"context"

	"github.com/lance-context/lance-context/objstore"
	"github.com/lance-context/lance-context/objstore/internal/driver"
)

// Scheme is the URL scheme this package registers with objstore when it is
// imported: objstore.Open opens "az://container/prefix" with Open.
const Scheme = "az"

func init() { objstore.Register(Scheme, Open) }

// Open opens "az://container/prefix" (the prefix is optional) with the
// configuration ConfigFromEnv reads and opts' transport. It is the
// objstore.Opener of "az".
func Open(ctx context.Context, url string, opts objstore.OpenOptions) (objstore.Store, error) {
	container, prefix, err := driver.SplitURL(url, Scheme, "container")
	if err != nil {
		return nil, err
	}
	cfg := ConfigFromEnv()
	cfg.Container = container
	cfg.Prefix = prefix
	cfg.Transport = opts.Transport
	s, err := New(ctx, cfg)
	if err != nil {
		return nil, err
	}
	return s, nil
}
