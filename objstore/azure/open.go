package azure

import (
	"context"
	"fmt"
	"strings"

	"github.com/lance-context/lance-context/objstore"
)

// Scheme is the URL scheme this package registers with objstore when it is
// imported: objstore.Open opens "az://container/prefix" with Open.
const Scheme = "az"

func init() { objstore.Register(Scheme, Open) }

// Open opens "az://container/prefix" (the prefix is optional) with the
// configuration ConfigFromEnv reads and opts' transport. It is the
// objstore.Opener of "az".
func Open(ctx context.Context, url string, opts objstore.OpenOptions) (objstore.Store, error) {
	container, prefix, _ := strings.Cut(strings.TrimPrefix(url, Scheme+"://"), "/")
	if container == "" {
		return nil, fmt.Errorf("objstore: open %q: missing container", url)
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
