package devmode

import (
	"errors"
	"io"
	"net"
	"net/http"
	"strings"

	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// closedServe is what the embedded etcd logs, at error level and with a
// stack trace, for each of its listeners when it is closed: on every
// clean shutdown (SIGTERM of dev) four of them.
const closedServe = "setting up serving from embedded etcd failed."

// etcdLogger is the embedded etcd's logger: errors only, as JSON lines on
// w, without stack traces, and without the closedServe entries whose error
// is a listener closed by a shutdown. Real failures still show.
func etcdLogger(w io.Writer) func(*embed.Config) error {
	return embed.NewZapLoggerBuilder(zap.New(quietClose{newCore(w)}))
}

// newCore writes entries of error level and above as JSON lines on w.
func newCore(w io.Writer) zapcore.Core {
	return zapcore.NewCore(zapcore.NewJSONEncoder(zap.NewProductionEncoderConfig()), zapcore.AddSync(w), zapcore.ErrorLevel)
}

// quietClose drops the closedServe entries of a shutdown.
type quietClose struct{ zapcore.Core }

func (q quietClose) With(fs []zapcore.Field) zapcore.Core { return quietClose{q.Core.With(fs)} }

func (q quietClose) Check(e zapcore.Entry, ce *zapcore.CheckedEntry) *zapcore.CheckedEntry {
	if q.Enabled(e.Level) {
		return ce.AddCore(e, q)
	}
	return ce
}

func (q quietClose) Write(e zapcore.Entry, fs []zapcore.Field) error {
	if e.Message == closedServe && closedListener(fs) {
		return nil
	}
	return q.Core.Write(e, fs)
}

// closedListener reports whether the entry's error is a server or
// listener closed on purpose.
func closedListener(fs []zapcore.Field) bool {
	for _, f := range fs {
		err, ok := f.Interface.(error)
		if f.Key != "error" || !ok {
			continue
		}
		msg := strings.ToLower(err.Error())
		return errors.Is(err, http.ErrServerClosed) || errors.Is(err, net.ErrClosed) ||
			strings.Contains(msg, "server closed") || strings.Contains(msg, "use of closed network connection") ||
			strings.Contains(msg, "server has been stopped") || // grpc.ErrServerStopped
			strings.Contains(msg, "mux: listener closed") // cmux, when its listener closes first
	}
	return false
}
