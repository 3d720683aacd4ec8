package objstore

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
)

// An Opener opens the store a URL of its scheme names (see Register). It
// parses the rest of the URL itself: "s3://bucket/prefix" reaches the
// opener of "s3" whole.
type Opener func(ctx context.Context, url string, opts OpenOptions) (Store, error)

// OpenOptions are what OpenWith passes to an Opener besides the URL.
type OpenOptions struct {
	// Transport carries a cloud driver's HTTP requests; nil: its SDK's
	// own. Tests count requests with it or inject faults
	// (TearingTransport).
	Transport http.RoundTripper
}

var (
	openersMu sync.RWMutex
	openers   = map[string]Opener{}

	memStoresMu sync.Mutex
	memStores   = map[string]*Memory{}
)

// Register makes Open answer URLs "scheme://..." with open. The cloud
// drivers register themselves when imported (objstore/s3: "s3",
// objstore/gcs: "gs", objstore/azure: "az"); a program imports the ones it
// serves, as cmd/lance-context imports all three through objstore/drivers.
// It panics if scheme is empty, built in ("file", "mem") or registered
// twice, or open is nil.
func Register(scheme string, open Opener) {
	openersMu.Lock()
	defer openersMu.Unlock()
	switch {
	case scheme == "" || strings.Contains(scheme, ":/"):
		panic(fmt.Sprintf("objstore: Register of scheme %q", scheme))
	case scheme == "file" || scheme == "mem":
		panic(fmt.Sprintf("objstore: Register of built-in scheme %q", scheme))
	case open == nil:
		panic(fmt.Sprintf("objstore: Register of scheme %q with a nil opener", scheme))
	case openers[scheme] != nil:
		panic(fmt.Sprintf("objstore: scheme %q registered twice", scheme))
	}
	openers[scheme] = open
}

// Schemes returns the registered schemes, sorted (not "file" and "mem",
// which are built in).
func Schemes() []string {
	openersMu.RLock()
	defer openersMu.RUnlock()
	out := make([]string, 0, len(openers))
	for s := range openers {
		out = append(out, s)
	}
	slices.Sort(out)
	return out
}

// Open returns the store a URL names:
//
//   - "scheme://...": the store of the driver registered for scheme (see
//     Register): "s3://bucket/prefix" (objstore/s3), "gs://bucket/prefix"
//     (objstore/gcs), "az://container/prefix" (objstore/azure), each
//     configured from the environment. A scheme no imported driver
//     registered is an error.
//   - "mem://name": an in-memory store; the same name returns the same store
//     within a process.
//   - "file://path" or a plain path: the local filesystem rooted at path,
//     created if missing.
func Open(ctx context.Context, url string) (Store, error) {
	return OpenWith(ctx, url, OpenOptions{})
}

// OpenWith is Open with options for the driver.
func OpenWith(ctx context.Context, url string, opts OpenOptions) (Store, error) {
	scheme, _, hasScheme := strings.Cut(url, "://")
	switch {
	case scheme == "mem" && hasScheme:
		name := strings.TrimPrefix(url, "mem://")
		memStoresMu.Lock()
		defer memStoresMu.Unlock()
		m, ok := memStores[name]
		if !ok {
			m = NewMemory()
			memStores[name] = m
		}
		return m, nil
	case !hasScheme || scheme == "file":
		return NewLocal(strings.TrimPrefix(url, "file://"))
	}
	openersMu.RLock()
	open := openers[scheme]
	openersMu.RUnlock()
	if open == nil {
		return nil, fmt.Errorf("objstore: open %q: unsupported scheme %q (registered: %s; a program opens cloud stores by importing their drivers, objstore/drivers for all)",
			url, scheme, strings.Join(Schemes(), ", "))
	}
	return open(ctx, url, opts)
}
