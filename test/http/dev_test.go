package httpe2e

import (
	"encoding/json"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// devProc is one running `lance-context dev` on dataDir.
type devProc struct {
	cmd  *exec.Cmd
	base string
	log  strings.Builder
}

// startDev starts `lance-context dev` on dataDir and a free port, with
// env added to this process's environment, and waits until it answers.
// It is killed when the test ends.
func startDev(t *testing.T, dataDir string, env ...string) *devProc {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	d := &devProc{base: "http://" + addr}
	d.cmd = exec.Command(binary, "dev", "--data-dir", dataDir, "--listen", addr)
	d.cmd.Env = append(os.Environ(), env...)
	d.cmd.Stdout, d.cmd.Stderr = &d.log, &d.log
	if err := d.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = d.cmd.Process.Kill()
		_ = d.cmd.Wait()
		if t.Failed() {
			t.Logf("dev log:\n%s", d.log.String())
		}
	})
	d.waitFor(t, "/api/v1/health")
	return d
}

// waitFor polls path until it answers 200.
func (d *devProc) waitFor(t *testing.T, path string) {
	t.Helper()
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		if resp, err := http.Get(d.base + path); err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("dev: %s never answered 200", path)
		}
	}
}

// TestRegression_DevRecoversAcknowledgedRowsAtStart: `lance-context dev`
// restarted after a kill -9 makes the rows its predecessor acknowledged
// (and never sealed) readable at start, as a worker does, and /readyz
// says when. Before, dev ran no recovery: the rows stayed invisible until
// the next write to their store, and /readyz answered at once.
func TestRegression_DevRecoversAcknowledgedRowsAtStart(t *testing.T) {
	dir := t.TempDir()
	// No sweeper seal during the test: only a recovery makes rows readable.
	noSweep := "ROLLOUT_FLUSH_INTERVAL_SECS=3600"
	d := startDev(t, dir, noSweep)
	post := func(path, body string) {
		t.Helper()
		resp, err := http.Post(d.base+path, "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 201 {
			t.Fatalf("POST %s: %d", path, resp.StatusCode)
		}
	}
	post("/api/v1/rollouts", `{"name":"crash"}`)
	post("/api/v1/rollouts/crash/records", `{"records":[{"id":"a1","rollout_id":"r"},{"id":"a2","rollout_id":"r"}]}`)
	_ = d.cmd.Process.Kill()
	_ = d.cmd.Wait()

	d = startDev(t, dir, noSweep)
	d.waitFor(t, "/readyz")
	resp, err := http.Get(d.base + "/api/v1/rollouts/crash/records?source=all")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var page struct {
		Records []struct {
			ID string `json:"id"`
		} `json:"records"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&page); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range page.Records {
		got = append(got, r.ID)
	}
	if strings.Join(got, " ") != "a1 a2" {
		t.Fatalf("after kill -9 and a restart, with no write: %v, want a1 a2", got)
	}
}
