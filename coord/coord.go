package coord

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"sort"
	"strings"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// Config says how to reach etcd.
type Config struct {
	Endpoints  []string
	Prefix     string // default /lance-context
	Username   string
	Password   string
	CACert     string // file paths, for TLS
	ClientCert string
	ClientKey  string
}

// ConfigFromEnv reads ETCD_ENDPOINTS (comma-separated), ETCD_PREFIX,
// ETCD_USERNAME, ETCD_PASSWORD, ETCD_CA_CERT, ETCD_CLIENT_CERT, ETCD_CLIENT_KEY.
func ConfigFromEnv() Config {
	c := Config{
		Prefix: os.Getenv("ETCD_PREFIX"), Username: os.Getenv("ETCD_USERNAME"), Password: os.Getenv("ETCD_PASSWORD"),
		CACert: os.Getenv("ETCD_CA_CERT"), ClientCert: os.Getenv("ETCD_CLIENT_CERT"), ClientKey: os.Getenv("ETCD_CLIENT_KEY"),
	}
	if v := os.Getenv("ETCD_ENDPOINTS"); v != "" {
		c.Endpoints = strings.Split(v, ",")
	}
	return c
}

// Coord is a connection to etcd under a key prefix.
type Coord struct {
	cli    *clientv3.Client
	prefix string

	mu       sync.Mutex
	clock    func() time.Time // cooldowns' clock; nil: time.Now
	cooldown CooldownPolicy   // zero: DefaultCooldownPolicy
}

// Connect dials etcd.
func Connect(ctx context.Context, cfg Config) (*Coord, error) {
	if len(cfg.Endpoints) == 0 {
		return nil, errors.New("coord: no etcd endpoints (set --etcd or ETCD_ENDPOINTS)")
	}
	if cfg.Prefix == "" {
		cfg.Prefix = "/lance-context"
	}
	cc := clientv3.Config{Endpoints: cfg.Endpoints, DialTimeout: 5 * time.Second, Username: cfg.Username, Password: cfg.Password, Context: ctx,
		// Errors only: the client warns of every retry, and a clean
		// shutdown's session revokes, cut short by design, read as faults.
		Logger: zap.New(zapcore.NewCore(zapcore.NewJSONEncoder(zap.NewProductionEncoderConfig()), zapcore.Lock(os.Stderr), zapcore.ErrorLevel))}
	if cfg.CACert != "" || cfg.ClientCert != "" {
		t := &tls.Config{MinVersion: tls.VersionTLS12}
		if cfg.CACert != "" {
			pem, err := os.ReadFile(cfg.CACert)
			if err != nil {
				return nil, fmt.Errorf("coord: read CA cert: %w", err)
			}
			pool := x509.NewCertPool()
			if !pool.AppendCertsFromPEM(pem) {
				return nil, fmt.Errorf("coord: no certificates in %s", cfg.CACert)
			}
			t.RootCAs = pool
		}
		if cfg.ClientCert != "" {
			kp, err := tls.LoadX509KeyPair(cfg.ClientCert, cfg.ClientKey)
			if err != nil {
				return nil, fmt.Errorf("coord: load client cert: %w", err)
			}
			t.Certificates = []tls.Certificate{kp}
		}
		cc.TLS = t
	}
	cli, err := clientv3.New(cc)
	if err != nil {
		return nil, fmt.Errorf("coord: connect to etcd %v: %w", cfg.Endpoints, err)
	}
	// Fail fast when etcd is unreachable rather than at the first call.
	sctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if _, err := cli.Get(sctx, cfg.Prefix+"/ping"); err != nil {
		_ = cli.Close()
		return nil, fmt.Errorf("coord: etcd %v not answering: %w", cfg.Endpoints, err)
	}
	return &Coord{cli: cli, prefix: strings.TrimSuffix(cfg.Prefix, "/")}, nil
}

// Close closes the connection.
func (c *Coord) Close() error { return c.cli.Close() }

// Client returns the etcd client.
func (c *Coord) Client() *clientv3.Client { return c.cli }

func (c *Coord) key(parts ...string) string { return c.prefix + "/" + strings.Join(parts, "/") }

// StoreInfo is a registered store.
type StoreInfo struct {
	Name      string    `json:"name"`
	CreatedAt time.Time `json:"created_at"`
}

// RegisterStore records a store (idempotent: an existing entry is kept).
func (c *Coord) RegisterStore(ctx context.Context, name string) error {
	b, _ := json.Marshal(StoreInfo{Name: name, CreatedAt: time.Now().UTC()})
	k := c.key("stores", name)
	_, err := c.cli.Txn(ctx).If(clientv3.Compare(clientv3.CreateRevision(k), "=", 0)).Then(clientv3.OpPut(k, string(b))).Commit()
	if err != nil {
		return fmt.Errorf("coord: register store %s: %w", name, err)
	}
	return nil
}

// UnregisterStore removes a store from the registry.
func (c *Coord) UnregisterStore(ctx context.Context, name string) error {
	if _, err := c.cli.Delete(ctx, c.key("stores", name)); err != nil {
		return fmt.Errorf("coord: unregister store %s: %w", name, err)
	}
	return nil
}

// ListStores returns the registered stores, by name.
func (c *Coord) ListStores(ctx context.Context) ([]StoreInfo, error) {
	resp, err := c.cli.Get(ctx, c.key("stores")+"/", clientv3.WithPrefix())
	if err != nil {
		return nil, fmt.Errorf("coord: list stores: %w", err)
	}
	out := make([]StoreInfo, 0, len(resp.Kvs))
	for _, kv := range resp.Kvs {
		var s StoreInfo
		if json.Unmarshal(kv.Value, &s) == nil {
			out = append(out, s)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// WorkerInfo is a live worker.
type WorkerInfo struct {
	InstanceID   string    `json:"instance_id"`
	ShardID      string    `json:"shard_id"`
	Endpoint     string    `json:"endpoint"`
	Version      string    `json:"version"`
	RegisteredAt time.Time `json:"registered_at"`
}

// RegisterWorker keeps w registered under a lease until ctx ends or the
// session is lost (then it registers again with a new lease).
func (c *Coord) RegisterWorker(ctx context.Context, w WorkerInfo, ttl int) error {
	w.RegisteredAt = time.Now().UTC()
	b, _ := json.Marshal(w)
	for ctx.Err() == nil {
		sess, err := concurrency.NewSession(c.cli, concurrency.WithTTL(ttl), concurrency.WithContext(ctx))
		if err == nil {
			_, err = c.cli.Put(ctx, c.key("workers", w.InstanceID), string(b), clientv3.WithLease(sess.Lease()))
			if err == nil {
				select {
				case <-ctx.Done():
					// Leave promptly: revoke so the master sees us gone now.
					rctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
					_, _ = c.cli.Revoke(rctx, sess.Lease())
					cancel()
					_ = sess.Close()
					return nil
				case <-sess.Done():
				}
			}
			_ = sess.Close()
		}
		select {
		case <-ctx.Done():
		case <-time.After(time.Second):
		}
	}
	return nil
}

// ListWorkers returns the live workers.
func (c *Coord) ListWorkers(ctx context.Context) ([]WorkerInfo, error) {
	resp, err := c.cli.Get(ctx, c.key("workers")+"/", clientv3.WithPrefix())
	if err != nil {
		return nil, fmt.Errorf("coord: list workers: %w", err)
	}
	out := make([]WorkerInfo, 0, len(resp.Kvs))
	for _, kv := range resp.Kvs {
		var w WorkerInfo
		if json.Unmarshal(kv.Value, &w) == nil {
			out = append(out, w)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].InstanceID < out[j].InstanceID })
	return out, nil
}

// Lead campaigns for leadership and calls fn while this process leads; fn's
// context ends when leadership is lost. It returns when ctx ends.
func (c *Coord) Lead(ctx context.Context, id string, fn func(ctx context.Context)) {
	for ctx.Err() == nil {
		sess, err := concurrency.NewSession(c.cli, concurrency.WithTTL(10), concurrency.WithContext(ctx))
		if err != nil {
			sleepCtx(ctx, time.Second)
			continue
		}
		el := concurrency.NewElection(sess, c.key("election"))
		if err := el.Campaign(ctx, id); err != nil {
			_ = sess.Close()
			sleepCtx(ctx, time.Second)
			continue
		}
		lctx, cancel := context.WithCancel(ctx)
		go func() {
			select {
			case <-sess.Done():
			case <-lctx.Done():
			}
			cancel()
		}()
		fn(lctx)
		cancel()
		rctx, rcancel := context.WithTimeout(context.Background(), 2*time.Second)
		_ = el.Resign(rctx)
		rcancel()
		_ = sess.Close()
	}
}

func sleepCtx(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}
