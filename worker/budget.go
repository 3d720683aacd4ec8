package worker

import (
	"net/http"
	"sync"

	"github.com/lance-context/lance-context/api"
	"github.com/lance-context/lance-context/httpapi"
)

// bodyBudget bounds the bytes of append bodies held at once: a body is
// read whole and its records alias it until the append is acknowledged, so
// without a bound a burst of large appends holds a burst's worth of memory
// (a few 50 MB appends left gigabytes resident). Past the bound an append
// answers 503 OVERLOADED with Retry-After, as the reference does.
type bodyBudget struct {
	mu    sync.Mutex
	max   int64
	inUse int64
	// what it bounds and its setting, for the 503's message (default:
	// append bodies, LC_INFLIGHT_BODY_BYTES)
	what, setting string
}

// admit reserves a request's body bytes: its Content-Length, or the body
// limit when the length is unknown (chunked). release returns them.
func (b *bodyBudget) admit(r *http.Request, limit int64) (release func(), err error) {
	n := r.ContentLength
	if n < 0 || n > limit {
		n = limit
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.inUse > 0 && b.inUse+n > b.max {
		what, setting := b.what, b.setting
		if what == "" {
			what, setting = "append bodies", "LC_INFLIGHT_BODY_BYTES"
		}
		return nil, &httpapi.Error{Status: http.StatusServiceUnavailable, Code: api.CodeOverloaded, RetryAfter: 1,
			Message: "this worker is reading its limit of " + what + " at once (" + setting + "); retry after Retry-After"}
	}
	b.inUse += n
	return func() {
		b.mu.Lock()
		b.inUse -= n
		b.mu.Unlock()
	}, nil
}

// refuseUnread answers a request whose body it will not read and closes
// the connection: otherwise net/http drains up to 256 KiB of the body
// before it sends the answer, and a slow or stalled uploader would wait
// for its 503 as long as its body takes to arrive.
func refuseUnread(w http.ResponseWriter, r *http.Request, err error) {
	w.Header().Set("Connection", "close")
	httpapi.WriteError(w, r, err)
}
