package coord

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// Store statistics, kept so that a restarted master serves its listing
// before it has read every store again (the values are marked stale until
// it has).

// PutStats records a store's statistics (an opaque JSON document).
func (c *Coord) PutStats(ctx context.Context, store string, doc []byte) error {
	if _, err := c.cli.Put(ctx, c.key("stats", store), string(doc)); err != nil {
		return fmt.Errorf("coord: put stats of %s: %w", store, err)
	}
	return nil
}

// DeleteStats forgets a store's statistics.
func (c *Coord) DeleteStats(ctx context.Context, store string) error {
	if _, err := c.cli.Delete(ctx, c.key("stats", store)); err != nil {
		return fmt.Errorf("coord: delete stats of %s: %w", store, err)
	}
	return nil
}

// LoadStats returns every recorded store's statistics, by store.
func (c *Coord) LoadStats(ctx context.Context) (map[string][]byte, error) {
	p := c.key("stats") + "/"
	resp, err := c.cli.Get(ctx, p, clientv3.WithPrefix())
	if err != nil {
		return nil, fmt.Errorf("coord: load stats: %w", err)
	}
	out := make(map[string][]byte, len(resp.Kvs))
	for _, kv := range resp.Kvs {
		out[string(kv.Key[len(p):])] = kv.Value
	}
	return out, nil
}

// keepRepairs is how many repair records are kept per store.
const keepRepairs = 20

// RecordRepair keeps the record (any JSON document) of a repair of store
// at atMS, and drops the store's records beyond the newest keepRepairs.
func (c *Coord) RecordRepair(ctx context.Context, store string, atMS int64, rec any) error {
	b, err := json.Marshal(rec)
	if err != nil {
		return err
	}
	if _, err := c.cli.Put(ctx, c.key("repairs", store, fmt.Sprintf("%020d", atMS)), string(b)); err != nil {
		return fmt.Errorf("coord: record repair of %s: %w", store, err)
	}
	p := c.key("repairs", store) + "/"
	resp, err := c.cli.Get(ctx, p, clientv3.WithPrefix(), clientv3.WithKeysOnly(), clientv3.WithSort(clientv3.SortByKey, clientv3.SortDescend))
	if err == nil {
		for i, kv := range resp.Kvs {
			if i >= keepRepairs {
				_, _ = c.cli.Delete(ctx, string(kv.Key))
			}
		}
	}
	return nil
}

// Repairs returns the recorded repairs, newest first; of one store when
// store is not empty.
func (c *Coord) Repairs(ctx context.Context, store string) ([]json.RawMessage, error) {
	p := c.key("repairs") + "/"
	if store != "" {
		p = c.key("repairs", store) + "/"
	}
	resp, err := c.cli.Get(ctx, p, clientv3.WithPrefix())
	if err != nil {
		return nil, fmt.Errorf("coord: list repairs: %w", err)
	}
	type rec struct {
		at  string
		doc json.RawMessage
	}
	recs := make([]rec, 0, len(resp.Kvs))
	for _, kv := range resp.Kvs {
		k := string(kv.Key)
		recs = append(recs, rec{at: k[len(k)-20:], doc: json.RawMessage(kv.Value)})
	}
	sort.SliceStable(recs, func(i, j int) bool { return recs[i].at > recs[j].at })
	out := make([]json.RawMessage, len(recs))
	for i, r := range recs {
		out[i] = r.doc
	}
	return out, nil
}
