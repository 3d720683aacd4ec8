// Command latencyproxy fronts an object-store server (versitygw, an S3
// service, fake-gcs-server, Azurite) with a fixed latency per request and
// counts the requests, and injects random faults at set rates (see package
// latencyproxy).
//
//	latencyproxy -target http://127.0.0.1:7070 -listen 127.0.0.1:7071 -admin 127.0.0.1:7072 -delay 20ms
//	latencyproxy -target http://127.0.0.1:7070 -error503 0.05 -reset 0.005 -tear 0.01 -stall 0.002 -stall-for 3s -seed 1
//	curl -s 127.0.0.1:7072/__stats; curl -s -X POST 127.0.0.1:7072/__reset
//	curl -s -X POST 127.0.0.1:7072/__faults   # faults off
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/lance-context/lance-context/test/latencyproxy"
)

func main() {
	target := flag.String("target", "", "server to forward to, e.g. http://127.0.0.1:7070")
	listen := flag.String("listen", "127.0.0.1:7071", "address clients use as their endpoint")
	admin := flag.String("admin", "127.0.0.1:7072", "address of /__stats, /__reset, /__delay, /__lose, /__tear, /__faults")
	delay := flag.Duration("delay", 0, "latency added to every request")
	var f latencyproxy.Faults
	flag.Float64Var(&f.Error503, "error503", 0, "fraction of requests answered 503 SlowDown without being forwarded")
	flag.Float64Var(&f.Reset, "reset", 0, "fraction of requests whose connection is dropped without an answer (half before, half after the server carried them out)")
	flag.Float64Var(&f.Tear, "tear", 0, "fraction of answers whose body is cut at a random byte")
	flag.Float64Var(&f.Stall, "stall", 0, "fraction of requests held for -stall-for (before forwarding, or mid-body)")
	flag.DurationVar(&f.StallFor, "stall-for", 3*time.Second, "how long a stall lasts")
	flag.Uint64Var(&f.Seed, "seed", 1, "seed of the fault draws")
	flag.Parse()
	u, err := url.Parse(*target)
	if err != nil || u.Scheme == "" || u.Host == "" {
		fmt.Fprintln(os.Stderr, "latencyproxy: -target must be a URL such as http://127.0.0.1:7070")
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if f.Error503 < 0 || f.Reset < 0 || f.Tear < 0 || f.Stall < 0 || f.Error503+f.Reset+f.Tear+f.Stall > 1 {
		fmt.Fprintln(os.Stderr, "latencyproxy: the fault rates are fractions of requests, together at most 1")
		os.Exit(2)
	}
	p := latencyproxy.New(u, *delay)
	p.SetFaults(f)
	slog.Info("latencyproxy", "target", u.String(), "listen", *listen, "admin", *admin, "delay", delay.String(),
		"error503", f.Error503, "reset", f.Reset, "tear", f.Tear, "stall", f.Stall, "stall_for", f.StallFor.String(), "seed", f.Seed)
	if err := p.Serve(ctx, *listen, *admin); err != nil {
		slog.Error("latencyproxy", "err", err)
		os.Exit(1)
	}
}
