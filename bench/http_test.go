package bench

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/ipc"
)

// The load generator's response reader must agree with net/http's server on
// every framing it may send: a Content-Length body, a chunked body (a large
// response written in pieces) and Connection: close, on one keep-alive
// connection.
func TestConnClientReadsNetHTTPResponses(t *testing.T) {
	big := strings.Repeat("x", 10<<10)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/small":
			w.WriteHeader(http.StatusCreated)
			_, _ = w.Write([]byte(`{"ids":["a"]}`))
		case "/chunked":
			for i := 0; i < 10; i++ {
				_, _ = w.Write([]byte(big[:1<<10]))
				w.(http.Flusher).Flush()
			}
		case "/empty":
			w.WriteHeader(http.StatusNoContent)
		case "/close":
			w.Header().Set("Connection", "close")
			http.Error(w, "overloaded", http.StatusServiceUnavailable)
		}
	}))
	defer srv.Close()
	c, err := dialConnClient(srv.URL, "")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, tc := range []struct {
		path string
		code int
		body string
	}{
		{"/small", 201, `{"ids":["a"]}`},
		{"/chunked", 200, big},
		{"/empty", 204, ""},
		{"/small", 201, `{"ids":["a"]}`},
		{"/close", 503, "overloaded\n"},
		{"/small", 201, `{"ids":["a"]}`}, // on a new connection
	} {
		code, body, err := c.post(ctx, tc.path, "application/json", []byte("{}"))
		if err != nil || code != tc.code || string(body) != tc.body {
			t.Fatalf("%s: got %d %q %v, want %d %q", tc.path, code, body, err, tc.code, tc.body)
		}
		if tc.path == "/close" && c.conn != nil {
			t.Fatal("Connection: close did not drop the connection")
		}
	}
}

func TestConnClientRejectsMalformedResponses(t *testing.T) {
	for _, resp := range []string{
		"garbage\r\n\r\n",
		"HTTP/1.1 2x1 Created\r\n\r\n",
		"HTTP/1.1 201 Created\r\nno colon\r\n\r\n",
		"HTTP/1.1 201 Created\r\nContent-Length: -3\r\n\r\n",
		"HTTP/1.1 201 Created\r\nContent-Length: 10\r\n\r\nshort",
	} {
		c := &connClient{br: bufio.NewReader(strings.NewReader(resp))}
		if code, _, err := c.readResponse(); err == nil {
			t.Errorf("%q: read as %d without an error", resp, code)
		}
	}
}

// TestArrowBodiesDecode: the Arrow mode's bodies, built in reused column
// buffers, are IPC streams of the rows they claim, and a body does not
// change the one before it in place once sent (each is read back whole).
func TestArrowBodiesDecode(t *testing.T) {
	g := &bodyGen{mode: httpBenchMode{Format: "arrow", Batch: 50}, prefix: "p-", pool: contentPool(), content: 100, rng: rand.New(rand.NewPCG(1, 2))}
	for req := range 3 {
		body, ctype, err := g.next()
		if err != nil || ctype != "application/vnd.apache.arrow.stream" {
			t.Fatal(ctype, err)
		}
		r, err := ipc.NewReader(bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		rows := 0
		for r.Next() {
			rec := r.RecordBatch()
			ids := rec.Column(0).(*array.String)
			texts := rec.Column(3).(*array.LargeString)
			for i := range int(rec.NumRows()) {
				want := fmt.Sprintf("p-%d", req*50+rows+i)
				if ids.Value(i) != want || texts.ValueLen(i) < 80 || rec.Column(2).(*array.Int32).Value(i) != int32((req*50+rows+i)%16) {
					t.Fatalf("request %d row %d: id %q (want %q), %d content bytes", req, i, ids.Value(i), want, texts.ValueLen(i))
				}
			}
			rows += int(rec.NumRows())
		}
		if r.Err() != nil || rows != 50 {
			t.Fatalf("request %d: %d rows, %v", req, rows, r.Err())
		}
		r.Release()
	}
}
