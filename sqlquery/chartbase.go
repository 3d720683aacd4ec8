//go:build cgo

package sqlquery

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	duckdb "github.com/duckdb/duckdb-go/v2"

	"github.com/lance-context/lance-context/rollout"
)

// A chart base is the base table's part of the charts' inputs, kept in a
// sandboxed DuckDB database of its own (the same settings as a query's),
// as two tables:
//
//	cb (id, reward, policy_version, us, arr, len, addr)  every base row; len is num_output_tokens of a response
//	cc (id, us, len, addr)                               responses without num_output_tokens; len is the content length
//
// addr is the row's address in the base table (fragment id << 32 | offset).
// It is valid for one base table: the version the store reads (or the
// version a checkout pins) and that version's commit time, which tells a
// store deleted and created again apart (baseIdent). Charts of all add the
// pending rows (one scan of the WAL tier, at the same base version: checked
// with baseIdent after the scan) and drop the base rows whose id a pending
// row writes (newest write wins, as a scan of all does); so the charts are
// those of a scan of the store, and a change of the WAL alone costs a scan
// of the pending rows.
//
// A chart base is read from one version of the base table itself (opened
// once; every row with its address), and remembers that version's
// fragments: data files, physical rows and deleted offsets (baseState).
// Any other change of the base (merge, compaction, delete, checkout) gives
// a new identity, and the request that first sees it updates the chart
// base when the new version's fragments are the old ones with more
// deletions, some gone and some added: it deletes the rows of the
// fragments gone and the newly deleted rows, and reads the new fragments
// alone (updateBase). It builds a new one instead when that cannot be
// exact (the chart columns' ids or types changed, a fragment id names
// other data files, a deleted row is live again) or would not be cheaper
// (the rows to read and delete pass half the chart base's). A base table
// holding a chart column in another type than the store's scan gives (an
// older or reference table) is read through the store's scan, without
// addresses, bracketed by baseIdent, and is built again on every change.
type chartBase struct {
	store, ident string
	db           *sql.DB
	conn         *sql.Conn // the one connection: uses are serialized by mu
	cur          atomic.Pointer[query]

	mu       sync.Mutex // held by the request using the database
	closed   bool       // under mu
	rows     int64      // rows of cb
	bytes    int64      // estimated storage of cb and cc (under chartBases.mu once kept)
	kept     bool       // in the cache (under chartBases.mu)
	lastUsed uint64     // under chartBases.mu

	// Under mu: the base table's fragments, when the chart base was read
	// from the table itself with row addresses (nil: through the store's
	// scan, and it cannot follow a new version); the rows updates deleted
	// from its tables; the rows the last update read, by fragment (tests).
	state    *baseState
	dead     int64
	lastRead map[uint64]int64
}

// maxChartBases bounds the chart bases kept, whatever their size: each is
// a DuckDB instance with its own threads.
const maxChartBases = 32

// errBaseMoved ends a use of a chart base whose base table changed during
// the request: the charts are then computed by a scan of the store.
var errBaseMoved = errors.New("sqlquery: the base table changed during the charts")

// baseUnmoved returns errBaseMoved when the store's base table is no
// longer the one identified by ident (a merge or compaction committed).
func baseUnmoved(ctx context.Context, bs baseStore, ident string) error {
	now, err := baseIdent(ctx, bs)
	if err != nil {
		return fmt.Errorf("sqlquery: base table: %w", err)
	}
	if now != ident {
		return errBaseMoved
	}
	return nil
}

// Per-row storage estimate of the chart base tables: DuckDB's fixed-width
// vectors (a string is 16 bytes, plus its bytes when longer than 12) and
// validity, rounded up. A chart base counts the larger of this estimate and
// DuckDB's own account of its memory (duckdb_memory(), in whole blocks): at
// 1M rows of the charts-timing store 89 MB and 79 MB.
const (
	cbRowBytes = 16 + 8 + 16 + 8 + 8 + 8 + 2
	ccRowBytes = 16 + 8 + 8 + 1
)

// chartsCached computes the charts of a fragments or all source from the
// chart base of the store's current base table, building it when there is
// none. false (and no error) when the cache is off or cannot serve: the
// store is not a rollout store, its base table changed during the request,
// or a storage read failed (the scan of the store reports it).
func (e *Engine) chartsCached(ctx context.Context, store string, src rollout.Source, ch *Charts) (bool, error) {
	e.bases.mu.Lock()
	capBytes := e.bases.capBytes
	e.bases.mu.Unlock()
	if capBytes <= 0 || (src != rollout.SourceFragments && src != rollout.SourceAll) {
		return false, nil
	}
	t, err := e.open(ctx, store)
	if err != nil {
		return false, nil
	}
	bs, ok := t.(baseStore)
	if !ok {
		return false, nil
	}
	ident, err := baseIdent(ctx, bs)
	if err != nil {
		return false, nil
	}
	how := BaseCached
	var read int64                 // rows an update of the chart base read
	b := e.bases.get(store, ident) // locked
	if b == nil {
		// The store's chart base of another base table follows this one
		// when it can, at a cost below a rebuild's.
		if old := e.bases.stale(store); old != nil {
			var (
				n   int64
				ok  bool
				err error
			)
			if old.ident == ident {
				ok = true // updated by the request this one waited for
			} else if n, ok, err = e.updateBase(ctx, store, bs, old); ok {
				how = BaseUpdated
			}
			switch {
			case err != nil:
				e.bases.release(old)
				return false, err
			case ok:
				b, read = old, n
			default:
				e.bases.release(old)
			}
		}
	}
	if b == nil {
		// A base table whose rows alone would pass the cap is not built
		// only to be dropped: the scan costs less.
		if st, ok := t.(statser); ok {
			if stats, err := st.Stats(ctx); err == nil && stats.BaseRows*cbRowBytes > capBytes {
				return false, nil
			}
		}
		how = BaseBuilt
		if b, err = e.buildBase(ctx, store, bs); err != nil || b == nil {
			return false, err
		}
	}
	defer e.bases.release(b)
	ident = b.ident // that of the table an update or a build read
	q, err := b.use(ctx, e, store, src, func(ctx context.Context, c *duckdb.Conn, q *query) error {
		q.scanned.Add(b.rows + read)
		if err := combine(ctx, c, q, bs, src, ident); err != nil {
			return err
		}
		return aggregate(ctx, c, ch)
	})
	if errors.Is(err, errBaseMoved) {
		return false, nil
	}
	var le *LimitError
	if errors.As(err, &le) || errors.Is(err, context.Canceled) {
		return false, err
	}
	if err != nil {
		// A failed use may have left the database unusable (DuckDB
		// invalidates a database after a fatal error): the next charts
		// build a new one, and these scan the store, which reports a
		// storage fault again.
		e.bases.drop(b)
		return false, nil
	}
	ch.RowsScanned = q.scanned.Load()
	ch.Base = how
	return true, nil
}

// combine makes the views or temporary tables base and clen that aggregate
// reads: the chart base alone (fragments, or all with nothing pending), or
// with the pending rows, which replace the base rows of their ids.
func combine(ctx context.Context, c *duckdb.Conn, q *query, bs baseStore, src rollout.Source, ident string) error {
	pending := int64(0)
	if src == rollout.SourceAll {
		// One scan of the WAL tier gives every input of the pending rows;
		// their content is read for all of them (few, and in memory).
		q.source = rollout.SourceWAL
		if err := exec(ctx, c, `CREATE TEMP TABLE w AS SELECT id, `+rewardExpr+` AS reward, policy_version,
			epoch_us(created_at) AS us, `+arrivalExpr+` AS arr, `+lenExpr+` AS len,
			CASE WHEN `+clenWhere+` THEN length(content)::BIGINT END AS clen FROM records`); err != nil {
			return err
		}
		if err := baseUnmoved(ctx, bs, ident); err != nil {
			return err
		}
		n, err := all(ctx, c, `SELECT count(*) FROM w`)
		if err != nil {
			return err
		}
		pending = asInt(n[0][0])
	}
	if pending == 0 {
		if err := exec(ctx, c, `CREATE TEMP VIEW base AS SELECT reward, policy_version, us, arr, len FROM cb`); err != nil {
			return err
		}
		return exec(ctx, c, `CREATE TEMP VIEW clen AS SELECT us, len FROM cc`)
	}
	// The base rows a pending row replaces, by position (few; their ids
	// are looked up once, not by every chart query).
	if err := exec(ctx, c, `CREATE TEMP TABLE sup AS SELECT rowid AS r FROM cb WHERE id IN (SELECT id FROM w)`); err != nil {
		return err
	}
	if err := exec(ctx, c, `CREATE TEMP TABLE supc AS SELECT rowid AS r FROM cc WHERE id IN (SELECT id FROM w)`); err != nil {
		return err
	}
	n, err := all(ctx, c, `SELECT (SELECT count(*) FROM sup), (SELECT count(*) FROM supc)`)
	if err != nil {
		return err
	}
	cbRows, ccRows := "cb", "cc"
	if asInt(n[0][0]) > 0 {
		cbRows = "cb WHERE rowid NOT IN (SELECT r FROM sup)"
	}
	if asInt(n[0][1]) > 0 {
		ccRows = "cc WHERE rowid NOT IN (SELECT r FROM supc)"
	}
	if err := exec(ctx, c, `CREATE TEMP VIEW base AS SELECT reward, policy_version, us, arr, len FROM `+cbRows+`
		UNION ALL SELECT reward, policy_version, us, arr, len FROM w`); err != nil {
		return err
	}
	return exec(ctx, c, `CREATE TEMP VIEW clen AS SELECT us, len FROM `+ccRows+`
		UNION ALL SELECT us, clen FROM w WHERE clen IS NOT NULL`)
}

// buildBase scans the base table into a new chart base, locked, and keeps
// it in the cache when it fits. nil (and no error) when the base table
// changed during the scans or the database could not be opened.
//
// A base table holding the chart columns in the store's types is read
// directly (one version, with row addresses: the chart base can follow
// later versions, see updateBase); any other through the store's scan,
// bracketed by the base's identity.
func (e *Engine) buildBase(ctx context.Context, store string, bs baseStore) (*chartBase, error) {
	d, ident, err := openBase(ctx, bs)
	if err != nil {
		return nil, nil
	}
	b := &chartBase{store: store, ident: ident}
	sig, direct := chartSig(d)
	if direct {
		if b.state, err = stateOf(ctx, d, sig); err != nil {
			return nil, nil
		}
	}
	db, conn, err := sandbox(ctx, e.limits, b.cur.Load)
	if err != nil {
		return nil, nil
	}
	b.db, b.conn = db, conn
	b.mu.Lock()
	_, err = b.use(ctx, e, store, rollout.SourceFragments, func(ctx context.Context, c *duckdb.Conn, q *query) error {
		if direct {
			q.direct = &directScan{d: d}
			if err := fillBase(ctx, c, q, store, "CREATE TABLE"); err != nil {
				return err
			}
		} else if err := buildFromStore(ctx, c, q, bs, ident); err != nil {
			return err
		}
		var err error
		b.rows, b.bytes, err = measure(ctx, c)
		return err
	})
	if err != nil {
		b.close()
		b.mu.Unlock()
		if errors.Is(err, errBaseMoved) {
			return nil, nil
		}
		return nil, err
	}
	e.bases.put(b)
	return b, nil
}

// buildFromStore fills cb and cc through the store's own scan (which
// converts the columns of an older or reference table), without row
// addresses; errBaseMoved when the base table changed meanwhile.
func buildFromStore(ctx context.Context, c *duckdb.Conn, q *query, bs baseStore, ident string) error {
	if err := exec(ctx, c, `CREATE TABLE cb AS SELECT id, `+rewardExpr+` AS reward, policy_version,
		epoch_us(created_at) AS us, `+arrivalExpr+` AS arr, `+lenExpr+` AS len, NULL::UBIGINT AS addr FROM records`); err != nil {
		return err
	}
	nulls, err := all(ctx, c, `SELECT count(*) FILTER (WHERE len IS NULL) FROM cb`)
	if err != nil {
		return err
	}
	if asInt(nulls[0][0]) == 0 {
		err = exec(ctx, c, `CREATE TABLE cc (id VARCHAR, us BIGINT, len BIGINT, addr UBIGINT)`)
	} else {
		err = hinted(q, clenHints, func() error {
			return exec(ctx, c, `CREATE TABLE cc AS SELECT id, epoch_us(created_at) AS us, length(content)::BIGINT AS len,
				NULL::UBIGINT AS addr FROM records WHERE `+clenWhere)
		})
	}
	if err != nil {
		return err
	}
	return baseUnmoved(ctx, bs, ident)
}

// use runs fn on the chart base's database for one request, as session
// runs it on a fresh one: within the time limit, the scans serving a query
// of its own, and its failure classified. Temporary tables and views fn
// creates are dropped when it returns. b.mu is held.
func (b *chartBase) use(ctx context.Context, e *Engine, store string, src rollout.Source, fn func(context.Context, *duckdb.Conn, *query) error) (*query, error) {
	qctx, cancel := context.WithTimeout(ctx, e.limits.MaxTime)
	q := &query{ctx: qctx, open: e.open, source: src, store: store, limits: e.limits}
	b.cur.Store(q)
	defer func() {
		cancel()
		q.wg.Wait()
		b.cur.Store(nil)
	}()
	err := raw(b.conn, func(c *duckdb.Conn) error {
		defer dropTemp(c)
		return fn(qctx, c, q)
	})
	if err != nil {
		if errors.Is(err, errBaseMoved) {
			return nil, err
		}
		return nil, q.classify(ctx, qctx, err)
	}
	return q, nil
}

// dropTemp drops the temporary tables and views of a use of a chart base.
func dropTemp(c *duckdb.Conn) {
	ctx := context.Background() // also after the request's context ended
	objs, err := all(ctx, c, `SELECT table_name, table_type FROM information_schema.tables WHERE table_catalog = 'temp'`)
	if err != nil {
		return
	}
	for _, o := range objs {
		kind := "TABLE"
		if o[1] == "VIEW" {
			kind = "VIEW"
		}
		_ = exec(ctx, c, fmt.Sprintf(`DROP %s IF EXISTS temp.main."%s"`, kind, o[0]))
	}
}

// close releases the database. b.mu is held.
func (b *chartBase) close() {
	if b.closed {
		return
	}
	b.closed = true
	if b.conn != nil {
		_ = b.conn.Close()
	}
	if b.db != nil {
		_ = b.db.Close()
	}
}

// get returns the cached chart base of store at ident, locked; nil when
// there is none.
func (c *chartBases) get(store, ident string) *chartBase {
	c.mu.Lock()
	b := c.m[store]
	if b == nil || b.ident != ident {
		c.mu.Unlock()
		return nil
	}
	c.tick++
	b.lastUsed = c.tick
	c.mu.Unlock()
	b.mu.Lock()
	// Evicted while this request waited, or updated to another base table
	// (b.ident changes under both locks).
	if b.closed || b.ident != ident {
		b.mu.Unlock()
		return nil
	}
	return b
}

// stale returns the cached chart base of store, locked, when it can follow
// another base table (it was read with row addresses); nil otherwise.
func (c *chartBases) stale(store string) *chartBase {
	c.mu.Lock()
	b := c.m[store]
	c.mu.Unlock()
	if b == nil {
		return nil
	}
	b.mu.Lock()
	if b.closed || b.state == nil {
		b.mu.Unlock()
		return nil
	}
	return b
}

// moved records that b (locked) now holds the base table ident, in bytes
// of storage, evicting the least recently used others, or b itself, when
// the cache passes its cap.
func (c *chartBases) moved(b *chartBase, ident string, bytes int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	b.ident = ident
	if !b.kept {
		b.bytes = bytes
		return
	}
	c.used += bytes - b.bytes
	b.bytes = bytes
	c.tick++
	b.lastUsed = c.tick
	for c.used > c.capBytes && len(c.m) > 1 {
		var lru *chartBase
		for _, o := range c.m {
			if o != b && (lru == nil || o.lastUsed < lru.lastUsed) {
				lru = o
			}
		}
		c.evict(lru)
	}
	if c.used > c.capBytes {
		c.evict(b) // used by this request only (release closes it)
	}
}

// put keeps b when it fits the cap, replacing the store's older chart base
// and evicting the least recently used others as needed.
func (c *chartBases) put(b *chartBase) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if old := c.m[b.store]; old != nil {
		c.evict(old)
	}
	if b.bytes > c.capBytes {
		return // used by this request only (release closes it)
	}
	for len(c.m) > 0 && (c.used+b.bytes > c.capBytes || len(c.m) >= maxChartBases) {
		var lru *chartBase
		for _, o := range c.m {
			if lru == nil || o.lastUsed < lru.lastUsed {
				lru = o
			}
		}
		c.evict(lru)
	}
	if c.m == nil {
		c.m = map[string]*chartBase{}
	}
	c.tick++
	b.kept, b.lastUsed = true, c.tick
	c.m[b.store] = b
	c.used += b.bytes
}

// evict drops o from the cache and closes it once no request uses it.
// c.mu is held.
func (c *chartBases) evict(o *chartBase) {
	delete(c.m, o.store)
	c.used -= o.bytes
	o.kept = false
	go func() {
		o.mu.Lock()
		defer o.mu.Unlock()
		o.close()
	}()
}

// drop evicts b if it is cached.
func (c *chartBases) drop(b *chartBase) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m[b.store] == b {
		c.evict(b)
	}
}

// release ends a request's use of b, closing it when it is not cached.
func (c *chartBases) release(b *chartBase) {
	c.mu.Lock()
	kept := b.kept
	c.mu.Unlock()
	if !kept {
		b.close()
	}
	b.mu.Unlock()
}

// Close releases the cached chart bases; the engine keeps working without
// them until new ones are built.
func (e *Engine) Close() {
	e.bases.mu.Lock()
	defer e.bases.mu.Unlock()
	for _, b := range e.bases.m {
		e.bases.evict(b)
	}
}

// chartBaseStats is what the cache holds, for tests.
func (e *Engine) chartBaseStats() (n int, bytes int64) {
	e.bases.mu.Lock()
	defer e.bases.mu.Unlock()
	return len(e.bases.m), e.bases.used
}
