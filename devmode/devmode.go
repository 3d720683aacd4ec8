// Package devmode runs everything in one process for a first run on one
// machine: an embedded etcd, a worker, a master and the web UI, all served
// on one address.
package devmode

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.etcd.io/etcd/server/v3/embed"

	"github.com/lance-context/lance-context/buildinfo"
	"github.com/lance-context/lance-context/coord"
	"github.com/lance-context/lance-context/httpapi"
	"github.com/lance-context/lance-context/master"
	"github.com/lance-context/lance-context/objstore"
	"github.com/lance-context/lance-context/rollout"
	"github.com/lance-context/lance-context/web"
	"github.com/lance-context/lance-context/worker"
)

// Options configures dev mode.
type Options struct {
	DataDir string // local directory (or s3://); the embedded etcd keeps its data in a local directory beside it
	Listen  string
	// Ready, if set, receives the URL once serving.
	Ready func(url string)
}

// StartEtcd starts an embedded single-member etcd in dir on free loopback
// ports and returns it and its client URL.
func StartEtcd(dir string) (*embed.Etcd, string, error) { return startEtcd(dir, etcdLogger(os.Stderr)) }

// startEtcd is StartEtcd with etcd's logger built by logger.
func startEtcd(dir string, logger func(*embed.Config) error) (*embed.Etcd, string, error) {
	cfg := embed.NewConfig()
	cfg.Dir = dir
	cfg.LogLevel = "error"
	cfg.ZapLoggerBuilder = logger
	client, err := freeURL()
	if err != nil {
		return nil, "", err
	}
	peer, err := freeURL()
	if err != nil {
		return nil, "", err
	}
	cfg.ListenClientUrls, cfg.AdvertiseClientUrls = []url.URL{*client}, []url.URL{*client}
	cfg.ListenPeerUrls, cfg.AdvertisePeerUrls = []url.URL{*peer}, []url.URL{*peer}
	cfg.InitialCluster = cfg.Name + "=" + peer.String()
	e, err := embed.StartEtcd(cfg)
	if err != nil {
		return nil, "", fmt.Errorf("start embedded etcd: %w", err)
	}
	select {
	case <-e.Server.ReadyNotify():
	case <-time.After(60 * time.Second):
		e.Close()
		return nil, "", fmt.Errorf("embedded etcd did not become ready")
	}
	return e, client.String(), nil
}

func freeURL() (*url.URL, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	addr := ln.Addr().String()
	_ = ln.Close()
	return &url.URL{Scheme: "http", Host: addr}, nil
}

// Run serves until ctx ends.
func Run(ctx context.Context, o Options) error {
	etcdDir := filepath.Join(o.DataDir, "_etcd")
	if u, err := url.Parse(o.DataDir); err == nil && u.Scheme == "s3" {
		etcdDir = filepath.Join(os.TempDir(), "lance-context-dev-etcd")
	}
	e, etcdURL, err := StartEtcd(etcdDir)
	if err != nil {
		return err
	}
	defer e.Close()
	c, err := coord.Connect(ctx, coord.Config{Endpoints: []string{etcdURL}})
	if err != nil {
		return err
	}
	defer c.Close()

	wcfg, err := worker.FromEnv()
	if err != nil {
		return err
	}
	wcfg.DataDir, wcfg.Listen = o.DataDir, o.Listen
	if os.Getenv("INSTANCE_ID") == "" {
		wcfg.InstanceID = "dev"
	}
	root, err := objstore.Open(ctx, o.DataDir)
	if err != nil {
		return err
	}
	catalog := rollout.NewCatalog(root, rollout.ShardID(wcfg.InstanceID), wcfg.StoreOptions())
	reg := worker.NewRegistry()
	ws := worker.NewServer(wcfg, catalog, reg)
	ws.Registry = c
	mcfg, err := master.ConfigFromEnv()
	if err != nil {
		return err
	}
	m := master.New(mcfg, c, catalog, reg)

	r := chi.NewRouter()
	r.Use(m.Metrics().Middleware)
	r.NotFound(httpapi.NotFound)
	r.MethodNotAllowed(httpapi.MethodNotAllowed)
	r.Use(httpapi.Auth(wcfg.APIToken, httpapi.UIExempt))
	ws.Mount(r)
	m.Mount(r, false)
	ws.MountProbes(r)
	r.Method(http.MethodGet, "/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	r.Handle("/*", web.Handler())

	ln, err := net.Listen("tcp", o.Listen)
	if err != nil {
		return err
	}
	if _, err := httpapi.ServeDebugFromEnv(ctx); err != nil {
		return err
	}
	base := "http://" + ln.Addr().String()
	info := coord.WorkerInfo{InstanceID: wcfg.InstanceID, ShardID: catalog.Shard(), Endpoint: base, Version: buildinfo.Version()}
	slog.Info("lance-context dev is up", "url", base, "data_dir", o.DataDir, "etcd", etcdURL)
	fmt.Printf("lance-context dev: open %s (data in %s)\n", base, o.DataDir)
	if o.Ready != nil {
		o.Ready(base)
	}
	return worker.Serve(ctx, ln, wcfg, r, catalog,
		ws.RunSweepers,
		ws.Startup(), // recovery, then the start-up warm, as a worker's
		func(ctx context.Context) { _ = c.RegisterWorker(ctx, info, 10) },
		m.Run,
	)
}
