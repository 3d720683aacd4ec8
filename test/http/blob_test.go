package httpe2e

import (
	"bytes"
	"crypto/sha256"
	"fmt"
	"io"
	"math/rand/v2"
	"mime/multipart"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lance-context/lance-context/internal/gctune"
)

// noiseReader yields n pseudo-random bytes, made as they are read.
type noiseReader struct {
	rng *rand.ChaCha8
	n   int64
}

func (r *noiseReader) Read(p []byte) (int, error) {
	if r.n <= 0 {
		return 0, io.EOF
	}
	p = p[:min(int64(len(p)), r.n)]
	r.rng.Read(p)
	r.n -= int64(len(p))
	return len(p), nil
}

// TestGiBPayloadStreamsWithBoundedRSS: a 1 GiB payload part is uploaded to
// the worker binary as a multipart append and downloaded again, byte for
// byte, while the worker's anonymous RSS grows by less than 64 MiB: the
// part streams into an object of its own and back out a window at a time,
// never whole in memory.
func TestGiBPayloadStreamsWithBoundedRSS(t *testing.T) {
	if testing.Short() {
		t.Skip("a gigabyte each way (-short)")
	}
	const size = 1 << 30
	w := startWorker(t, t.TempDir(), nil)
	c := newClient(t, w)
	c.createStore("big")
	c.must(201, c.appendJSON("big", "", map[string]any{"id": "warm", "rollout_id": "r"}), "append")
	pid := w.cmd.Process.Pid
	base := gctune.ProcKiB(fmt.Sprintf("/proc/%d/status", pid), "RssAnon") << 10
	if base == 0 {
		t.Skip("no RssAnon in /proc here")
	}
	var peak atomic.Int64
	stop := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		for {
			peak.Store(max(peak.Load(), gctune.ProcKiB(fmt.Sprintf("/proc/%d/status", pid), "RssAnon")<<10))
			select {
			case <-stop:
				return
			case <-time.After(20 * time.Millisecond):
			}
		}
	}()

	// Upload: the body is written as it is sent (no Content-Length).
	seed := [32]byte{1}
	sent := sha256.New()
	pr, pw := io.Pipe()
	mw := multipart.NewWriter(pw)
	go func() {
		meta, _ := mw.CreateFormField("metadata")
		meta.Write([]byte(fmt.Sprintf(`{"records":[{"id":"gib","rollout_id":"r","payload_size":%d,"content_type":"application/octet-stream"}]}`, size)))
		part, _ := mw.CreateFormFile("0", "gib.bin")
		_, err := io.Copy(io.MultiWriter(part, sent), &noiseReader{rng: rand.NewChaCha8(seed), n: size})
		if err == nil {
			err = mw.Close()
		}
		pw.CloseWithError(err)
	}()
	began := time.Now()
	req, _ := http.NewRequest("POST", c.base+"/api/v1/rollouts/big/records?flush=true", pr)
	req.Header.Set("Content-Type", mw.FormDataContentType())
	hc := &http.Client{Timeout: 10 * time.Minute}
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 201 {
		t.Fatalf("upload: %d %s", resp.StatusCode, body)
	}
	up := time.Since(began)

	// Download.
	began = time.Now()
	resp, err = hc.Get(c.base + "/api/v1/rollouts/big/records/gib/blob")
	if err != nil {
		t.Fatal(err)
	}
	got := sha256.New()
	n, err := io.Copy(got, resp.Body)
	resp.Body.Close()
	if err != nil || resp.StatusCode != 200 || n != size {
		t.Fatalf("download: %d, %d bytes, %v", resp.StatusCode, n, err)
	}
	if !bytes.Equal(got.Sum(nil), sent.Sum(nil)) {
		t.Fatal("the downloaded payload differs from the uploaded one")
	}
	down := time.Since(began)
	close(stop)
	<-sampled
	growth := peak.Load() - base
	t.Logf("1 GiB up in %v, down in %v; anonymous RSS %d MiB before, peak %d MiB (+%d MiB)",
		up.Round(time.Millisecond), down.Round(time.Millisecond), base>>20, peak.Load()>>20, growth>>20)
	if growth >= 64<<20 {
		t.Fatalf("anonymous RSS grew by %d MiB moving a 1 GiB payload (bound: 64 MiB)", growth>>20)
	}
}
