package faults

import (
	"context"
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/ipc"

	"github.com/lance-context/lance-context/api"
)

// Feed consumers: each is a consumer group that reads the feed (Arrow, to
// see each row's lc_shard and lc_seq) and commits, and "crashes" at random
// between a read and its commit, or with a commit whose answer it never
// saw. Its ledger holds the rows of the batches it committed: a batch
// counts once its commit is known to have landed (a consumer that lost the
// answer reads its group's position back, as a restarted one would). The
// final check wants every (shard, seq) once per group, each shard's in
// ascending order, and every row the store holds at the end delivered.

// fedRow is one row a consumer group processed.
type fedRow struct {
	shard, seq int64
	id         string
	write      uint64 // the write sequence in its content
}

type consumer struct {
	group   string
	mu      sync.Mutex
	rows    []fedRow
	crashes int
	reads   int
	open    *openCommit // a commit whose outcome is unknown
	trail   []string    // each read and commit, for a failure's report
}

// note adds a line to the trail.
func (c *consumer) note(format string, a ...any) {
	c.mu.Lock()
	c.trail = append(c.trail, time.Now().Format("15:04:05.000")+" "+fmt.Sprintf(format, a...))
	c.mu.Unlock()
}

// seqSpan is the first and last (position:row) of rows.
func seqSpan(rows []fedRow) string {
	if len(rows) == 0 {
		return "none"
	}
	lo, hi := rows[0].seq, rows[0].seq
	for _, r := range rows {
		lo, hi = min(lo, r.seq), max(hi, r.seq)
	}
	return seqText(lo) + ".." + seqText(hi)
}

// seqText shows a sequence number as its WAL position and row (wal.Seq).
func seqText(seq int64) string { return fmt.Sprintf("%d:%d", seq>>24, seq&(1<<24-1)) }

// decodePosition shows a feed position (rollout.Position.String: "f1."
// and base64url of uvarint shard key and seq pairs) as its seqs.
func decodePosition(pos string) string {
	b, err := base64.RawURLEncoding.DecodeString(strings.TrimPrefix(pos, "f1."))
	if err != nil || !strings.HasPrefix(pos, "f1.") {
		return fmt.Sprintf("%q", pos)
	}
	var out []string
	for len(b) > 0 {
		_, n := binary.Uvarint(b)
		if n <= 0 {
			break
		}
		seq, m := binary.Uvarint(b[n:])
		if m <= 0 {
			break
		}
		b = b[n+m:]
		out = append(out, seqText(int64(seq)))
	}
	return "[" + strings.Join(out, " ") + "]"
}

// feedBatch reads one answer of the feed for a group (from its committed
// position) as Arrow.
func (r *run) feedBatch(ctx context.Context, group string, limit int) ([]fedRow, string, error) {
	return r.feedRead(ctx, url.Values{"group": {group}, "limit": {fmt.Sprint(limit)}, "wait_ms": {"500"}})
}

// feedFrom reads one answer of the feed after position pos.
func (r *run) feedFrom(ctx context.Context, pos string, limit int) ([]fedRow, string, error) {
	return r.feedRead(ctx, url.Values{"position": {pos}, "limit": {fmt.Sprint(limit)}})
}

func (r *run) feedRead(ctx context.Context, q url.Values) ([]fedRow, string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, r.proc.url+"/api/v1/rollouts/"+store+"/feed?"+q.Encode(), nil)
	if err != nil {
		return nil, "", err
	}
	req.Header.Set("Accept", api.ArrowStream)
	resp, err := (&http.Client{Transport: r.seen, Timeout: time.Minute}).Do(req)
	if err != nil {
		return nil, "", err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, "", fmt.Errorf("feed: status %d", resp.StatusCode)
	}
	pos := resp.Header.Get(api.FeedPositionHeader)
	rd, err := ipc.NewReader(resp.Body)
	if err != nil {
		return nil, "", err
	}
	defer rd.Release()
	var out []fedRow
	for rd.Next() {
		b := rd.RecordBatch()
		col := func(name string) int { return b.Schema().FieldIndices(name)[0] }
		ids := b.Column(col("id")).(*array.String)
		contents := b.Column(col("content")).(interface{ Value(int) string }) // large_utf8
		shards := b.Column(col("lc_shard")).(*array.Int64)
		seqs := b.Column(col("lc_seq")).(*array.Int64)
		for i := 0; i < ids.Len(); i++ {
			w, _ := seqOf(contents.Value(i))
			out = append(out, fedRow{shards.Value(i), seqs.Value(i), ids.Value(i), w})
		}
	}
	if err := rd.Err(); err != nil {
		return nil, "", err
	}
	return out, pos, nil
}

// consume runs one consumer group until ctx ends.
func (r *run) consume(ctx context.Context, c *consumer, crash float64, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, 5000))
	for ctx.Err() == nil {
		if _, err := r.consumeOnce(ctx, c, rng, crash); err != nil && ctx.Err() == nil {
			r.fail("feed", err, 0)
			sleep(ctx, 200*time.Millisecond)
		}
	}
}

// consumeOnce settles a commit whose outcome is open, then reads and
// commits one batch; it returns the rows it added to the ledger.
func (r *run) consumeOnce(ctx context.Context, c *consumer, rng *rand.Rand, crash float64) (int, error) {
	settled := 0
	if c.open != nil {
		// The read starts from the group's position, which the open
		// commit may have moved: settle it first.
		n, err := r.settle(ctx, c)
		if err != nil {
			return 0, err
		}
		settled = n
	}
	rows, pos, err := r.feedBatch(ctx, c.group, 50+rng.IntN(300))
	if err != nil {
		c.note("read failed: %v", err)
		return settled, err
	}
	c.note("read %d rows %s, position %s", len(rows), seqSpan(rows), decodePosition(pos))
	c.mu.Lock()
	c.reads++
	c.mu.Unlock()
	if len(rows) == 0 {
		return settled, nil
	}
	if rng.Float64() < crash {
		// Killed after reading, before committing: the rows come again.
		c.mu.Lock()
		c.crashes++
		c.mu.Unlock()
		return settled, nil
	}
	_, err = r.cl.CommitFeed(ctx, store, c.group, pos)
	if err == nil && rng.Float64() >= crash {
		c.keep(rows, pos)
		return settled + len(rows), nil
	}
	// The answer is lost (or the consumer died right after the call).
	c.mu.Lock()
	c.crashes++
	c.mu.Unlock()
	c.open = &openCommit{rows: rows, pos: pos}
	n, err := r.settle(ctx, c)
	return settled + n, err
}

// openCommit is a batch whose commit's outcome the consumer does not know.
type openCommit struct {
	rows []fedRow
	pos  string
}

// settle learns whether the open commit landed: the group's position says
// so once no late write of it can land any more. Committing the position
// read takes the next commit's name, which a late put of ours then finds
// taken (rollout/feedgroups.go), so what was read stays true. Until it
// knows (the worker is down, or the load ended mid-commit), the batch
// stays open: a batch dropped from the ledger while its commit landed
// would count its rows as never delivered (the suite's own bug, seen in CI).
func (r *run) settle(ctx context.Context, c *consumer) (int, error) {
	o := c.open
	var now string
	if err := retry(ctx, func() error {
		gs, err := r.cl.FeedGroups(ctx, store)
		if err != nil {
			return err
		}
		now = ""
		for i := range gs {
			if gs[i].Group == c.group {
				now = gs[i].Position
			}
		}
		_, err = r.cl.CommitFeed(ctx, store, c.group, now)
		return err
	}); err != nil {
		return 0, fmt.Errorf("settle a commit: %w", err)
	}
	c.open = nil
	if now != o.pos {
		c.note("commit did not land (position %s)", decodePosition(now))
		return 0, nil
	}
	c.keep(o.rows, o.pos)
	return len(o.rows), nil
}

// keep adds the rows of a batch whose commit landed to the ledger.
func (c *consumer) keep(rows []fedRow, pos string) {
	c.note("committed %s", decodePosition(pos))
	c.mu.Lock()
	c.rows = append(c.rows, rows...)
	c.mu.Unlock()
}

// drainFeed reads a group to the end of the store (faults off, after the
// final flush), committing as it goes.
func (r *run) drainFeed(ctx context.Context, c *consumer) error {
	rng := rand.New(rand.NewPCG(1, 6000))
	for empty := 0; empty < 2; {
		n, err := r.consumeOnce(ctx, c, rng, 0)
		if err != nil {
			if ctx.Err() != nil {
				return err
			}
			sleep(ctx, 200*time.Millisecond)
			continue
		}
		if n == 0 {
			empty++
		} else {
			empty = 0
		}
	}
	return nil
}

// feedTally is the final check of one group.
type feedTally struct {
	delivered, duplicated, outOfOrder, missing, phantom int64
	missingIDs                                          map[string]bool // the first few
}

// checkFeed compares a group's ledger with the store's rows at the end
// (id -> contents of the source=all walk).
func checkFeed(ws []*writer, c *consumer, all map[string][]string, example func(kind, s string)) feedTally {
	var t feedTally
	seen := map[[2]int64]bool{}
	last := map[int64]int64{}
	got := map[string]map[uint64]bool{}
	for _, row := range c.rows {
		t.delivered++
		k := [2]int64{row.shard, row.seq}
		if seen[k] {
			t.duplicated++
			example("feed_duplicated", fmt.Sprintf("%s: %s (shard %x seq %d) delivered twice", c.group, row.id, row.shard, row.seq))
		}
		seen[k] = true
		if row.seq <= last[row.shard] {
			t.outOfOrder++
			example("feed_out_of_order", fmt.Sprintf("%s: shard %x seq %d after %d", c.group, row.shard, row.seq, last[row.shard]))
		}
		last[row.shard] = max(last[row.shard], row.seq)
		if g, i, ok := parseID(row.id); !ok || g >= len(ws) || i >= ws[g].sent() {
			t.phantom++
			example("feed_phantom", c.group+": "+row.id)
		}
		if got[row.id] == nil {
			got[row.id] = map[uint64]bool{}
		}
		got[row.id][row.write] = true
	}
	for id, contents := range all {
		w, ok := seqOf(contents[0])
		if !ok || !got[id][w] {
			t.missing++
			if len(t.missingIDs) < 5 {
				if t.missingIDs == nil {
					t.missingIDs = map[string]bool{}
				}
				t.missingIDs[id] = true
			}
			example("feed_missing", fmt.Sprintf("%s: %s write %d is in the store, never delivered", c.group, id, w))
		}
	}
	return t
}

// explainMissing logs where rows a group never got sit in the feed, and
// the end of the group's trail, so a failure shows which read or commit
// passed them.
func (r *run) explainMissing(ctx context.Context, c *consumer, ids map[string]bool) {
	pos := ""
	for {
		rows, next, err := r.feedFrom(ctx, pos, 100_000)
		if err != nil {
			r.cfg.Logf("feed group %s: reading the feed from the start: %v", c.group, err)
			break
		}
		for _, row := range rows {
			if ids[row.id] {
				r.cfg.Logf("feed group %s never got %s write %d at %s", c.group, row.id, row.write, seqText(row.seq))
			}
		}
		if len(rows) == 0 || next == pos {
			break
		}
		pos = next
	}
	c.mu.Lock()
	trail := c.trail[max(0, len(c.trail)-60):]
	c.mu.Unlock()
	r.cfg.Logf("feed group %s, the end of its trail:\n%s", c.group, strings.Join(trail, "\n"))
}
