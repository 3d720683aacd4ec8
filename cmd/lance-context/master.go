package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/lance-context/lance-context/coord"
	"github.com/lance-context/lance-context/httpapi"
	"github.com/lance-context/lance-context/internal/gctune"
	"github.com/lance-context/lance-context/master"
	"github.com/lance-context/lance-context/objstore"
	"github.com/lance-context/lance-context/rollout"
)

func newMasterCmd() *cobra.Command {
	var dataDir, etcd, listen string
	cmd := &cobra.Command{
		Use:   "master",
		Short: "Serve the control plane: registry, scheduler, data browser API and web UI",
		Long: `Serve the control plane. Masters are stateless replicas; one leads the scheduler.

Environment: DATA_DIR, ETCD_ENDPOINTS, ETCD_PREFIX (/lance-context), ETCD_USERNAME,
ETCD_PASSWORD, ETCD_CA_CERT, ETCD_CLIENT_CERT, ETCD_CLIENT_KEY, LC_API_TOKEN,
LC_MAINTENANCE (on|off), LC_MERGE_THRESHOLD_GENERATIONS (8), LC_MERGE_AFTER_AGE_SECS (60; 0 = off), LC_COMPACT_MIN_FRAGMENTS (16),
LC_CLEANUP_EVERY_SECS (3600), LC_CLEANUP_OLDER_THAN_SECS (7200), LC_CLEANUP_READ_GRACE_SECS (180),
LC_STATS_REFRESH_SECS (10).
SQL (POST .../query, GET .../charts): LC_SQL_MAX_ROWS_SCANNED (100000000: rows the scans deliver after index and filters),
LC_SQL_MAX_ROWS_RETURNED (10000), LC_SQL_TIMEOUT_SECS (30), LC_SQL_MEMORY_MB (512),
LC_SQL_THREADS (2), LC_SQL_MAX_CONCURRENT (4), LC_CHARTS_MAX_ROWS_SCANNED (10000000),
LC_CHARTS_CACHE_MB (a sixteenth of the memory budget, at most 256; the charts' cached base tables),
LC_MEMORY_BUDGET_BYTES (3/4 of the container's memory: nine tenths of it is the Go memory limit), GOGC (300).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			// The master's caches (metadata, chart bases) are shares of its budget.
			if err := gctune.Tune(); err != nil {
				return err
			}
			if !cmd.Flags().Changed("data-dir") && os.Getenv("DATA_DIR") != "" {
				dataDir = os.Getenv("DATA_DIR")
			}
			if !cmd.Flags().Changed("listen") && os.Getenv("LISTEN") != "" {
				listen = os.Getenv("LISTEN")
			}
			ec := coord.ConfigFromEnv()
			if cmd.Flags().Changed("etcd") || len(ec.Endpoints) == 0 {
				ec.Endpoints = strings.Split(etcd, ",")
			}
			c, err := coord.Connect(ctx, ec)
			if err != nil {
				return err
			}
			defer c.Close()
			root, err := objstore.Open(ctx, dataDir)
			if err != nil {
				return err
			}
			mcfg, err := master.ConfigFromEnv()
			if err != nil {
				return err
			}
			host, _ := os.Hostname()
			catalog := rollout.NewCatalog(root, rollout.ShardID("master:"+host), mcfg.Store)
			reg := httpapi.NewRegistry()
			m := master.New(mcfg, c, catalog, reg)
			ln, err := net.Listen("tcp", listen)
			if err != nil {
				return err
			}
			if _, err := httpapi.ServeDebugFromEnv(ctx); err != nil {
				return err
			}
			slog.Info("master listening", "url", "http://"+ln.Addr().String(), "data_dir", dataDir, "etcd", ec.Endpoints)
			go m.Run(ctx)
			return serveHTTP(ctx, ln, m.Handler(reg, os.Getenv("LC_API_TOKEN")))
		},
	}
	cmd.Flags().StringVar(&dataDir, "data-dir", "./lance-data", "data directory: a path or s3://bucket/prefix (env DATA_DIR)")
	cmd.Flags().StringVar(&etcd, "etcd", "http://127.0.0.1:2379", "etcd endpoints, comma-separated (env ETCD_ENDPOINTS)")
	cmd.Flags().StringVar(&listen, "listen", "127.0.0.1:8090", "address to serve on (env LISTEN)")
	return cmd
}

// serveHTTP serves h until ctx ends, then shuts down gracefully.
func serveHTTP(ctx context.Context, ln net.Listener, h http.Handler) error {
	hs := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second, ReadTimeout: time.Minute, WriteTimeout: 2 * time.Minute, IdleTimeout: 2 * time.Minute}
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(ln) }()
	select {
	case <-ctx.Done():
	case err := <-errc:
		if !errors.Is(err, http.ErrServerClosed) {
			return fmt.Errorf("serve: %w", err)
		}
	}
	sctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	return hs.Shutdown(sctx)
}
