package worker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/lance-context/lance-context/buildinfo"
	"github.com/lance-context/lance-context/coord"
	"github.com/lance-context/lance-context/httpapi"
	"github.com/lance-context/lance-context/objstore"
	"github.com/lance-context/lance-context/rollout"
)

// StoreOptions maps the configuration to store options.
func (c Config) StoreOptions() rollout.Options {
	o := rollout.Options{
		MergeMaxGenerations: c.MergeMaxGenerations, MergeMaxBytes: c.MergeMaxBytes,
		PendingWarn: c.PendingWarn, PendingMax: c.PendingMax,
		IndexColumns: c.IndexColumns, ReadConsistencyInterval: c.ReadConsistencyInterval,
		InstanceID: c.InstanceID, HeartbeatInterval: c.ShardHeartbeat, HeartbeatTTL: c.ShardHeartbeatTTL,
		BufferedLog: !c.WALDirectIO,
	}
	// In the environment 0 means "no cap"; in rollout.Options it means default.
	if o.MergeMaxGenerations == 0 {
		o.MergeMaxGenerations = -1
	}
	if o.MergeMaxBytes == 0 {
		o.MergeMaxBytes = -1
	}
	return o
}

// NewRegistry returns a Prometheus registry with the Go and process
// collectors (httpapi.NewRegistry).
func NewRegistry() *prometheus.Registry { return httpapi.NewRegistry() }

// Run serves the worker until ctx ends (SIGTERM), then stops admitting
// requests, waits for those in flight, seals every memtable and returns.
func Run(ctx context.Context, cfg Config) error {
	root, err := objstore.Open(ctx, cfg.DataDir)
	if err != nil {
		return fmt.Errorf("open data dir %s: %w", cfg.DataDir, err)
	}
	catalog := rollout.NewCatalog(root, rollout.ShardID(cfg.InstanceID), cfg.StoreOptions())
	srv := NewServer(cfg, catalog, NewRegistry())
	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return err
	}
	if _, err := httpapi.ServeDebugFromEnv(ctx); err != nil {
		return err
	}
	background := []func(context.Context){srv.RunSweepers, srv.Startup()}
	if len(cfg.Etcd) > 0 {
		ec := coord.ConfigFromEnv()
		ec.Endpoints = cfg.Etcd
		c, err := coord.Connect(ctx, ec)
		if err != nil {
			return err
		}
		defer c.Close()
		srv.Registry = c
		adv := cfg.Advertise
		if adv == "" {
			adv = "http://" + ln.Addr().String()
		}
		info := coord.WorkerInfo{InstanceID: cfg.InstanceID, ShardID: catalog.Shard(), Endpoint: adv, Version: buildinfo.Version()}
		background = append(background, func(ctx context.Context) { _ = c.RegisterWorker(ctx, info, 10) })
	}
	slog.Info("worker listening", "url", "http://"+ln.Addr().String(), "data_dir", cfg.DataDir, "instance_id", cfg.InstanceID, "shard_id", catalog.Shard())
	return Serve(ctx, ln, cfg, srv.Handler(), catalog, background...)
}

// Startup returns what a process serving s runs once at start, in the
// background: recover the shard's WAL, then the start-up warm. /readyz
// waits for it from this call on.
func (s *Server) Startup() func(context.Context) {
	warm := s.StartupWarm()
	return func(ctx context.Context) {
		// Rows a crashed predecessor acknowledged become readable now, not
		// at the next write to their store.
		if err := s.catalog.Recover(ctx); err != nil {
			slog.Warn("recovering this shard's WAL at startup", "err", err)
		}
		// Then the caches, with the rows the recovery made readable.
		warm(ctx)
	}
}

// Serve runs handler on ln with the configured timeouts and background
// loops until ctx ends, then shuts down gracefully and closes the catalog.
func Serve(ctx context.Context, ln net.Listener, cfg Config, handler http.Handler, catalog *rollout.Catalog, background ...func(context.Context)) error {
	hs := &http.Server{Handler: handler, ReadTimeout: cfg.ReadTimeout, WriteTimeout: cfg.WriteTimeout, IdleTimeout: cfg.IdleTimeout, ReadHeaderTimeout: 10 * time.Second}
	bgCtx, stopBG := context.WithCancel(context.WithoutCancel(ctx))
	for _, fn := range background {
		go func() { fn(bgCtx) }()
	}
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(ln) }()
	var serveErr error
	select {
	case <-ctx.Done():
	case serveErr = <-errc:
	}
	slog.Info("shutting down: no new requests; sealing buffered rows")
	shutCtx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := hs.Shutdown(shutCtx); err != nil {
		slog.Warn("http shutdown", "err", err)
	}
	stopBG()
	if err := catalog.Close(shutCtx); err != nil {
		return fmt.Errorf("seal on shutdown: %w", err)
	}
	if serveErr != nil && !errors.Is(serveErr, http.ErrServerClosed) {
		return serveErr
	}
	slog.Info("stopped cleanly")
	return nil
}
