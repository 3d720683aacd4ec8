package httpapi

import (
	"bytes"
	"compress/gzip"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestContentCoding(t *testing.T) {
	for _, c := range []struct {
		values []string
		want   string
		status int // 0: accepted
	}{
		{nil, "", 0},
		{[]string{""}, "", 0},
		{[]string{"identity"}, "", 0},
		{[]string{"GZIP"}, "gzip", 0},
		{[]string{"x-gzip"}, "gzip", 0},
		{[]string{" zstd "}, "zstd", 0},
		{[]string{"identity, gzip"}, "gzip", 0},
		{[]string{"br"}, "", 415},
		{[]string{"deflate"}, "", 415},
		{[]string{"gzip", "zstd"}, "", 415},
		{[]string{"gzip, gzip"}, "", 415},
	} {
		got, err := contentCoding(c.values)
		var he *Error
		switch {
		case c.status == 0 && (err != nil || got != c.want):
			t.Errorf("%q: %q, %v; want %q", c.values, got, err, c.want)
		case c.status != 0 && (!errors.As(err, &he) || he.Status != c.status || !strings.Contains(he.Message, SupportedEncodings)):
			t.Errorf("%q: %v; want a %d naming %s", c.values, err, c.status, SupportedEncodings)
		}
	}
}

// TestDecodeBodiesCountsDecodedBytes: the middleware hands the handler the
// decoded body, which the handler's own MaxBytesReader then bounds.
func TestDecodeBodiesCountsDecodedBytes(t *testing.T) {
	const limit = 1000
	h := DecodeBodies(limit)(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, err := io.ReadAll(http.MaxBytesReader(w, r.Body, limit))
		if err != nil {
			WriteError(w, r, bodyError(err))
			return
		}
		if r.Header.Get("Content-Encoding") != "" || r.ContentLength != -1 {
			t.Errorf("handler sees Content-Encoding %q and length %d", r.Header.Get("Content-Encoding"), r.ContentLength)
		}
		w.Write(b)
	}))
	gz := func(b []byte) []byte {
		var w bytes.Buffer
		zw := gzip.NewWriter(&w)
		zw.Write(b)
		zw.Close()
		return w.Bytes()
	}
	for _, c := range []struct {
		name   string
		body   []byte
		status int
	}{
		{"fits", gz(bytes.Repeat([]byte("a"), limit)), 200},
		{"inflates past the limit", gz(bytes.Repeat([]byte("a"), limit+1)), 413},
		{"not gzip", []byte("plain"), 400},
	} {
		req := httptest.NewRequest("POST", "/", bytes.NewReader(c.body))
		req.Header.Set("Content-Encoding", "gzip")
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != c.status {
			t.Errorf("%s: %d %s, want %d", c.name, rec.Code, rec.Body, c.status)
		}
	}
}

func TestDecodeJSON(t *testing.T) {
	type body struct {
		A string `json:"a"`
	}
	for _, c := range []struct {
		in     string
		status int
		msg    string
	}{
		{`{"a":"x"}`, 0, ""},
		{`{"a":"x"} `, 0, ""},
		{`{"a":"x"} {}`, 400, "more than one value"},
		{`{"b":1}`, 400, `(want {"a"}): json: unknown field "b"`},
		{`{"a":` + strings.Repeat("[", 300), 400, `JSON nesting deeper than 256 levels at byte 260 (in field "a[0]`},
		{"{\"a\":\"\xff\"}", 400, `field "a" is not valid UTF-8 (byte 6 of the body)`},
		{`{"a":"` + strings.Repeat("x", 2000) + `"}`, 413, "larger than 1024 bytes"},
	} {
		req := httptest.NewRequest("POST", "/", strings.NewReader(c.in))
		var v body
		err := DecodeJSON(httptest.NewRecorder(), req, 1024, &v, `{"a"}`)
		if c.status == 0 {
			if err != nil || v.A != "x" {
				t.Errorf("%.40s: %v %+v", c.in, err, v)
			}
			continue
		}
		if e := Classify(err); e.Status != c.status || !strings.Contains(e.Message, c.msg) {
			t.Errorf("%.40s: %d %q, want %d saying %q", c.in, e.Status, e.Message, c.status, c.msg)
		}
	}
}
