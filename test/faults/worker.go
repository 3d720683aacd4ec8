package faults

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"
)

// proc keeps one `lance-context worker` running: started again with the
// same environment (so the same INSTANCE_ID and shard) whenever it exits,
// whether killed on purpose (a kill) or not (a crash).
type proc struct {
	bin  string
	env  []string
	url  string
	logw io.Writer
	logf func(string, ...any)

	mu      sync.Mutex
	cmd     *exec.Cmd
	exited  chan struct{} // closed when cmd has exited
	up      chan struct{} // closed while the worker answers its health check
	gen     int           // incremented at each start
	planned bool          // the next exit is a kill of ours
	kills   int
	crashes int
	tail    tailBuffer // the end of its log, for a crash report
	restart []time.Duration
	fatal   error // the worker could not be started again
}

// workerEnvPrefixes are the variables of the worker a developer's shell
// may hold; the child gets only the values the run sets.
var workerEnvPrefixes = []string{"DATA_DIR=", "LISTEN=", "INSTANCE_ID=", "AWS_ENDPOINT_URL=", "AWS_ENDPOINT_URL_S3=", "LC_", "ROLLOUT_", "GOMEMLIMIT=", "GOGC="}

func newProc(bin string, env []string, logw io.Writer, logf func(string, ...any)) (*proc, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("a port for the worker: %w", err)
	}
	addr := ln.Addr().String()
	ln.Close()
	var full []string
	for _, kv := range os.Environ() {
		keep := true
		for _, p := range workerEnvPrefixes {
			if strings.HasPrefix(kv, p) {
				keep = false
			}
		}
		if keep {
			full = append(full, kv)
		}
	}
	full = append(full, "LISTEN="+addr)
	full = append(full, env...)
	if logw == nil {
		logw = io.Discard
	}
	return &proc{bin: bin, env: full, url: "http://" + addr, logw: logw, logf: logf, up: make(chan struct{})}, nil
}

// supervise starts the worker and starts it again after every exit until
// ctx ends. A start that fails for startBudget is fatal: waitUp reports it.
func (p *proc) supervise(ctx context.Context, ready chan<- error) {
	const startBudget = 2 * time.Minute
	first := true
	for ctx.Err() == nil {
		began := time.Now()
		var exited chan struct{}
		for {
			var err error
			exited, err = p.startOnce(ctx)
			if err == nil {
				break
			}
			if ctx.Err() != nil {
				return
			}
			if time.Since(began) > startBudget {
				p.mu.Lock()
				p.fatal = fmt.Errorf("the worker did not start again within %v: %w", startBudget, err)
				close(p.up) // wake the waiters: they see fatal
				p.mu.Unlock()
				if first {
					ready <- p.fatal
				}
				return
			}
			p.logf("worker start failed (trying again): %v", err)
			time.Sleep(time.Second)
		}
		p.mu.Lock()
		if !first {
			p.restart = append(p.restart, time.Since(began))
		}
		close(p.up)
		p.mu.Unlock()
		if first {
			ready <- nil
			first = false
		}
		<-exited
		p.mu.Lock()
		p.up = make(chan struct{})
		planned := p.planned
		p.planned = false
		if planned {
			p.kills++
		} else if ctx.Err() == nil {
			p.crashes++
			p.logf("the worker exited without being killed (%v); the end of its log:\n%s", p.cmd.ProcessState, p.tail.String())
		}
		p.mu.Unlock()
	}
}

// startOnce starts the worker and waits until it answers its health check.
func (p *proc) startOnce(ctx context.Context) (chan struct{}, error) {
	cmd := exec.Command(p.bin, "worker")
	cmd.Env = p.env
	out := io.MultiWriter(p.logw, &p.tail)
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting %s worker: %w", p.bin, err)
	}
	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(exited)
	}()
	p.mu.Lock()
	p.cmd, p.exited = cmd, exited
	p.gen++
	p.mu.Unlock()
	hc := &http.Client{Timeout: 2 * time.Second}
	deadline := time.Now().Add(time.Minute)
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, p.url+"/api/v1/health", nil)
		if err != nil {
			return nil, err
		}
		if resp, err := hc.Do(req); err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return exited, nil
			}
		}
		select {
		case <-exited:
			return nil, fmt.Errorf("the worker exited at startup (%v); the end of its log:\n%s", cmd.ProcessState, p.tail.String())
		case <-ctx.Done():
			_ = cmd.Process.Kill()
			<-exited
			return nil, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			_ = cmd.Process.Kill()
			<-exited
			return nil, errors.New("the worker did not answer its health check within a minute")
		}
	}
}

// waitUp waits until the worker answers, ctx ends or it cannot be started.
func (p *proc) waitUp(ctx context.Context) error {
	p.mu.Lock()
	up := p.up
	p.mu.Unlock()
	select {
	case <-up:
	case <-ctx.Done():
		return ctx.Err()
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.fatal
}

// generation names the worker's current life, and whether it is up: an
// operation that saw two different answers spanned a kill or crash.
func (p *proc) generation() (int, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	select {
	case <-p.up:
		return p.gen, p.fatal == nil
	default:
		return p.gen, false
	}
}

// kill sends SIGKILL to the running worker (supervise starts it again).
// It reports false when the worker was not up.
func (p *proc) kill() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	select {
	case <-p.up:
	default:
		return false
	}
	if p.fatal != nil || p.cmd == nil {
		return false
	}
	p.planned = true
	if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		p.planned = false
		return false
	}
	return true
}

// stop ends the worker for good: supervise's ctx must have ended first.
func (p *proc) stop() {
	p.mu.Lock()
	cmd, exited := p.cmd, p.exited
	p.planned = true
	p.mu.Unlock()
	if cmd == nil {
		return
	}
	_ = cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-exited:
	case <-time.After(20 * time.Second):
		_ = cmd.Process.Kill()
		<-exited
	}
}

// pid is the running worker's process id (0 before the first start).
func (p *proc) pid() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil || p.cmd.Process == nil {
		return 0
	}
	return p.cmd.Process.Pid
}

func (p *proc) counts() (kills, crashes int, restarts []time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.kills, p.crashes, append([]time.Duration(nil), p.restart...)
}

// tailBuffer keeps the last 16 KiB written to it.
type tailBuffer struct {
	mu sync.Mutex
	b  []byte
}

func (t *tailBuffer) Write(b []byte) (int, error) {
	const keep = 16 << 10
	t.mu.Lock()
	defer t.mu.Unlock()
	t.b = append(t.b, b...)
	if len(t.b) > keep {
		t.b = append(t.b[:0], t.b[len(t.b)-keep:]...)
	}
	return len(b), nil
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.b)
}
