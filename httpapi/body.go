package httpapi

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"

	"github.com/klauspost/compress/zstd"

	"github.com/lance-context/lance-context/api"
)

// SupportedEncodings are the request Content-Encodings the services decode.
const SupportedEncodings = "gzip, zstd"

// maxZstdWindow bounds the window a zstd frame may ask the decoder to keep
// (its header states one, up to 3.75 TB by the format). 8 MiB covers zstd
// levels up to 19; --ultra and --long frames are refused.
const maxZstdWindow = 8 << 20

// DecodeBodies is middleware that undoes a request body's Content-Encoding
// (gzip or zstd) before the handler reads it, so that the limit a handler
// puts on its body with http.MaxBytesReader counts decoded bytes: a small
// body that inflates past it answers 413 like a large one. wire bounds the
// encoded bytes read. Any other coding answers 415, listing the supported
// ones (and in Accept-Encoding, as RFC 7694 asks).
func DecodeBodies(wire int64) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Body == nil || r.Body == http.NoBody || r.Header.Get("Content-Encoding") == "" {
				next.ServeHTTP(w, r)
				return
			}
			coding, err := contentCoding(r.Header.Values("Content-Encoding"))
			if err != nil {
				w.Header().Set("Accept-Encoding", SupportedEncodings)
				WriteError(w, r, err)
				return
			}
			if coding == "" { // identity
				next.ServeHTTP(w, r)
				return
			}
			body, err := newDecoder(coding, http.MaxBytesReader(w, r.Body, wire))
			if err != nil {
				WriteError(w, r, err)
				return
			}
			defer body.Close()
			r2 := r.WithContext(r.Context())
			r2.Header = r.Header.Clone()
			r2.Header.Del("Content-Encoding")
			r2.Header.Del("Content-Length")
			r2.ContentLength = -1
			r2.Body = body
			next.ServeHTTP(w, r2)
		})
	}
}

// decodedBody returns r's body, at most wire bytes of it read, decoded as
// its Content-Encoding says.
func decodedBody(w http.ResponseWriter, r *http.Request, wire int64) (io.ReadCloser, error) {
	raw := http.MaxBytesReader(w, r.Body, wire)
	coding, err := contentCoding(r.Header.Values("Content-Encoding"))
	if err != nil {
		w.Header().Set("Accept-Encoding", SupportedEncodings)
		return nil, err
	}
	if coding == "" {
		return raw, nil
	}
	return newDecoder(coding, raw)
}

// contentCoding reduces the Content-Encoding header's codings to the one
// to undo: "" for none (identity), "gzip" or "zstd".
func contentCoding(values []string) (string, error) {
	var codings []string
	for _, v := range values {
		for c := range strings.SplitSeq(v, ",") {
			switch c = strings.ToLower(strings.TrimSpace(c)); c {
			case "", "identity":
			case "x-gzip": // RFC 9110 8.4.1.3: the same as gzip
				codings = append(codings, "gzip")
			default:
				codings = append(codings, c)
			}
		}
	}
	switch {
	case len(codings) == 0:
		return "", nil
	case len(codings) > 1:
		return "", Errorf(http.StatusUnsupportedMediaType, api.CodeUnsupportedMediaType,
			"Content-Encoding %q applies %d codings; send one of %s", strings.Join(values, ", "), len(codings), SupportedEncodings)
	case codings[0] == "gzip", codings[0] == "zstd":
		return codings[0], nil
	}
	return "", Errorf(http.StatusUnsupportedMediaType, api.CodeUnsupportedMediaType,
		"Content-Encoding %q is not supported: send the body as is, or encoded with one of %s", codings[0], SupportedEncodings)
}

var gzipPool, zstdPool sync.Pool

// newDecoder returns a pooled decoder of coding reading raw; closing it
// returns it to its pool (it does not close raw: the server does).
func newDecoder(coding string, raw io.Reader) (io.ReadCloser, error) {
	var err error
	if coding == "gzip" {
		zr, _ := gzipPool.Get().(*gzip.Reader)
		if zr == nil {
			zr, err = gzip.NewReader(raw)
		} else {
			err = zr.Reset(raw)
		}
		if err != nil {
			return nil, bodyError(&CodingError{Coding: coding, Err: err})
		}
		return &codingReader{r: zr, coding: coding, release: func() { gzipPool.Put(zr) }}, nil
	}
	zr, _ := zstdPool.Get().(*zstd.Decoder)
	if zr == nil {
		// Concurrency 1 decodes in the reader's goroutine (the default
		// starts GOMAXPROCS goroutines per decoder); the window bound is
		// the memory a frame can make the decoder hold.
		zr, err = zstd.NewReader(raw, zstd.WithDecoderConcurrency(1), zstd.WithDecoderLowmem(true),
			zstd.WithDecoderMaxWindow(maxZstdWindow))
	} else {
		err = zr.Reset(raw)
	}
	if err != nil {
		return nil, bodyError(&CodingError{Coding: coding, Err: err})
	}
	return &codingReader{r: zr, coding: coding, release: func() {
		_ = zr.Reset(nil) // drop the request's reader before pooling
		zstdPool.Put(zr)
	}}, nil
}

// codingReader reads a decoder, its errors as *CodingError (but for EOF
// and the body limit's).
type codingReader struct {
	r       io.Reader
	coding  string
	release func()
}

func (c *codingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	var mbe *http.MaxBytesError
	if err != nil && err != io.EOF && !errors.As(err, &mbe) {
		err = &CodingError{Coding: c.coding, Err: err}
	}
	return n, err
}

func (c *codingReader) Close() error {
	if c.release != nil {
		c.release()
		c.release = nil
	}
	return nil
}

// CodingError is a body that does not decode as its Content-Encoding says.
type CodingError struct {
	Coding string // gzip or zstd
	Err    error
}

func (e *CodingError) Error() string {
	if errors.Is(e.Err, zstd.ErrWindowSizeExceeded) {
		return fmt.Sprintf("the zstd body asks for a window larger than %d MiB: compress at level 19 or lower, without --long", maxZstdWindow>>20)
	}
	return fmt.Sprintf("the body is not valid %s (its Content-Encoding): %v", e.Coding, e.Err)
}

func (e *CodingError) Unwrap() error { return e.Err }

// bodyError words a failure to read or decode the body: the body limit's
// error as it is (a 413), anything else as the client's bad input.
func bodyError(err error) error {
	var mbe *http.MaxBytesError
	var he *Error
	if errors.As(err, &mbe) || errors.As(err, &he) {
		return err
	}
	var ce *CodingError
	if errors.As(err, &ce) {
		return Errorf(http.StatusBadRequest, api.CodeInvalidRequest, "%v", ce)
	}
	return Errorf(http.StatusBadRequest, api.CodeInvalidRequest, "reading the body: %v", err)
}

// DecodeJSON reads r's body (at most limit bytes, decoded as its
// Content-Encoding says) and decodes it into v with encoding/json after
// CheckJSON, strictly: unknown fields and trailing data are errors. want,
// when set, shows the expected shape in a syntax error's message. Errors
// are *Error (or the body limit's *http.MaxBytesError: a 413).
func DecodeJSON(w http.ResponseWriter, r *http.Request, limit int64, v any, want string) error {
	body, err := decodedBody(w, r, limit)
	if err != nil {
		return err
	}
	defer body.Close()
	var buf bytes.Buffer
	if _, err := buf.ReadFrom(http.MaxBytesReader(w, body, limit)); err != nil {
		return bodyError(err)
	}
	b := buf.Bytes()
	if _, err := CheckJSON(b, 0, nil); err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	err = dec.Decode(v)
	if err == nil && len(bytes.TrimSpace(b[dec.InputOffset():])) > 0 {
		err = errors.New("more than one value")
	}
	if err != nil {
		if want != "" {
			want = " (want " + want + ")"
		}
		return Errorf(http.StatusBadRequest, api.CodeInvalidRequest, "invalid JSON body%s: %v", want, err)
	}
	return nil
}
