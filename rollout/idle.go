package rollout

import (
	"context"
	"slices"
	"time"
)

// Open stores cost this process memory and, once written, a shard writer
// that renews its heartbeat every few seconds (an object-store put each).
// A store nobody uses is closed: the maintainer asks the catalog to close
// the stores idle longer than MaintainPolicy.IdleClose, and the least
// recently used ones past MaintainPolicy.MaxOpenStores (closeIdle). The
// next Open opens it again, replaying nothing: only quiescent stores are
// closed.
//
// Use is counted by Catalog.Open: each call marks its store used and holds
// it until the call's context is done (a request's ends with its handler),
// so a store is never closed under a request that opened it. A context that
// is never done marks the store used and holds nothing.

// storeUse is the catalog's record of one open store's use.
type storeUse struct {
	busy int       // Open calls whose contexts are not done
	last time.Time // the last Open, or the end of the last hold
}

// use marks name used now and holds it until ctx is done. Call with c.mu
// held.
func (c *Catalog) use(ctx context.Context, name string) {
	u := c.uses[name]
	if u == nil {
		u = &storeUse{}
		c.uses[name] = u
	}
	u.last = c.clock()
	if ctx.Done() == nil {
		return
	}
	u.busy++
	context.AfterFunc(ctx, func() {
		c.mu.Lock()
		defer c.mu.Unlock()
		u.busy--
		u.last = c.clock()
	})
}

func (c *Catalog) clock() time.Time {
	if c.now != nil {
		return c.now()
	}
	return time.Now()
}

// quiescent reports a store that closing loses nothing for: no rows
// waiting for a seal, no generation of its own waiting for a merge (its
// writer's merge policy would stop with it), no checkout pin (a lease this
// process renews).
func (s *Store) quiescent() bool {
	return s.UnflushedRows() == 0 && s.PendingOwn() <= 0 && s.pinned.Load() == 0
}

// closeIdle closes the open stores that are quiescent, not held and not
// skipped, and either idle for at least idle (0: never for age) or the
// least recently used beyond max open stores (0: no bound). It returns
// the names closed.
func (c *Catalog) closeIdle(ctx context.Context, idle time.Duration, max int, skip func(*Store) bool) []string {
	now := c.clock()
	type cand struct {
		name string
		s    *Store
		last time.Time
	}
	var cands []cand
	c.mu.Lock()
	for name, s := range c.stores {
		u := c.uses[name]
		if u == nil {
			u = &storeUse{last: now}
			c.uses[name] = u
		}
		if u.busy > 0 || (skip != nil && skip(s)) || !s.quiescent() {
			continue
		}
		cands = append(cands, cand{name, s, u.last})
	}
	slices.SortFunc(cands, func(a, b cand) int { return a.last.Compare(b.last) })
	excess := 0
	if max > 0 {
		excess = len(c.stores) - max
	}
	var closed []*Store
	for _, cd := range cands {
		if excess <= 0 && (idle <= 0 || now.Sub(cd.last) < idle) {
			continue
		}
		delete(c.stores, cd.name)
		delete(c.uses, cd.name)
		closed = append(closed, cd.s)
		excess--
	}
	c.mu.Unlock()
	names := make([]string, 0, len(closed))
	for _, s := range closed {
		if err := s.Close(ctx); err != nil {
			s.opts.Logger.Warn("closing an idle store", "store", s.name, "err", err)
		}
		names = append(names, s.name)
	}
	return names
}
