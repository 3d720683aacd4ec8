package devmode

import (
	"bytes"
	"errors"
	"strings"
	"sync"
	"testing"

	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// Regression: a clean SIGTERM of dev printed four etcd error entries with
// stack traces ("setting up serving from embedded etcd failed.": http:
// Server closed, mux: server closed, use of closed network connection),
// one per listener the shutdown closed. They are not errors and are not
// logged; other etcd errors still are.
func TestRegression_EtcdShutdownIsQuiet(t *testing.T) {
	var plain, out lockedBuffer
	// The same entries into an unfiltered core too: the noise is real.
	tee := embed.NewZapLoggerBuilder(zap.New(zapcore.NewTee(newCore(&plain), quietClose{newCore(&out)})))
	e, _, err := startEtcd(t.TempDir(), tee)
	if err != nil {
		t.Fatal(err)
	}
	e.Close()
	if !strings.Contains(plain.String(), closedServe) {
		t.Fatalf("etcd no longer logs %q on close (the filter may be obsolete):\n%s", closedServe, plain.String())
	}
	if s := out.String(); strings.Contains(s, closedServe) {
		t.Fatalf("closing the embedded etcd logged:\n%s", s)
	}
	// A real failure of the same kind is kept.
	var buf lockedBuffer
	lg := zap.New(quietClose{newCore(&buf)})
	lg.Error(closedServe, zap.Error(errors.New("listen tcp: address already in use")))
	lg.Error(closedServe, zap.Error(errors.New("http: Server closed")))
	// Which listener reports first is a race: cmux's own close was logged once in CI.
	lg.Error(closedServe, zap.Error(errors.New("mux: listener closed")))
	if s := buf.String(); strings.Count(s, closedServe) != 1 || !strings.Contains(s, "address already in use") {
		t.Fatalf("filtered log:\n%s", s)
	}
}
