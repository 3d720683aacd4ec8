// Command latencyproxy fronts an object-store server (versitygw, an S3
// service, fake-gcs-server, Azurite) with a fixed latency per request and
// counts the requests (see package latencyproxy).
//
//	latencyproxy -target http://127.0.0.1:7070 -listen 127.0.0.1:7071 -admin 127.0.0.1:7072 -delay 20ms
//	curl -s 127.0.0.1:7072/__stats; curl -s -X POST 127.0.0.1:7072/__reset
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

	"github.com/lance-context/lance-context/test/latencyproxy"
)

func main() {
	target := flag.String("target", "", "server to forward to, e.g. http://127.0.0.1:7070")
	listen := flag.String("listen", "127.0.0.1:7071", "address clients use as their endpoint")
	admin := flag.String("admin", "127.0.0.1:7072", "address of /__stats, /__reset, /__delay, /__lose, /__tear")
	delay := flag.Duration("delay", 0, "latency added to every request")
	flag.Parse()
	u, err := url.Parse(*target)
	if err != nil || u.Scheme == "" || u.Host == "" {
		fmt.Fprintln(os.Stderr, "latencyproxy: -target must be a URL such as http://127.0.0.1:7070")
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	p := latencyproxy.New(u, *delay)
	slog.Info("latencyproxy", "target", u.String(), "listen", *listen, "admin", *admin, "delay", delay.String())
	if err := p.Serve(ctx, *listen, *admin); err != nil {
		slog.Error("latencyproxy", "err", err)
		os.Exit(1)
	}
}
