package objstore

import (
	"context"
	"net/http"
)

// OpenWithTransport is Open with the cloud backends' HTTP requests sent
// through rt, for tests that count them.
func OpenWithTransport(ctx context.Context, url string, rt http.RoundTripper) (Store, error) {
	return open(ctx, url, rt)
}
