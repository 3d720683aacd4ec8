package rollout

import (
	"cmp"
	"container/heap"
	"context"
	"encoding/binary"
	"fmt"
	"hash/fnv"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/lance-context/lance-context/api"
	"github.com/lance-context/lance-context/lance/pb"
	"github.com/lance-context/lance-context/lance/table"
	"github.com/lance-context/lance-context/wal"
)

// The group sampler: a batch of complete groups (every record of one key
// inside a window of policy versions), drawn from the all view, optionally
// weighted, without replacement per consumer group (sample_ledger.go), and
// reproducible from a seed. The per-fragment summaries it reads the base
// through are in sample_cache.go.

// SampleOptions is a sample request (the wire type: one statement of the
// fields and their rules, which validate enforces with the fields' JSON
// names).
type SampleOptions = api.SampleRequest

// PolicyWindow is SampleOptions' window of policy versions.
type PolicyWindow = api.PolicyWindow

// Limits of one sample.
const (
	SampleMaxGroups   = 10_000  // n
	SampleMaxRows     = 100_000 // rows of one batch
	SampleMaxVersions = 10_000  // policy_versions.in / .last
)

// sampleMaxRows is SampleMaxRows (tests lower it).
var sampleMaxRows = SampleMaxRows

// The weightings.
const (
	WeightUniform   = "uniform"
	WeightRecency   = "recency"
	WeightRewardStd = "reward_std"
)

// sampleKeyColumn reports whether a column may be a group key: a text
// column of Schema that is not a long text (content, model strings).
func sampleKeyColumn(name string) bool {
	i, ok := schemaIndex[name]
	return ok && columns[i].typ.ID() == arrow.STRING
}

// validateSample checks o and fills its defaults; every message names the
// field to fix.
func validateSample(o *SampleOptions) error {
	if o.N < 1 || o.N > SampleMaxGroups {
		return invalid("n must be between 1 and %d, got %d", SampleMaxGroups, o.N)
	}
	if o.GroupBy == "" {
		o.GroupBy = ColProblemID
	}
	if !sampleKeyColumn(o.GroupBy) {
		var keys []string
		for _, c := range columns {
			if sampleKeyColumn(c.name) {
				keys = append(keys, c.name)
			}
		}
		return invalid("group_by %q is not a key column; use one of %s", o.GroupBy, strings.Join(keys, ", "))
	}
	if w := o.PolicyVersions; w != nil {
		switch {
		case w.Last != nil && w.In != nil:
			return invalid("policy_versions: give last or in, not both")
		case w.Last == nil && w.In == nil:
			return invalid(`policy_versions: give {"last": K} or {"in": [versions]}`)
		case w.Last != nil && (*w.Last < 1 || *w.Last > SampleMaxVersions):
			return invalid("policy_versions.last must be between 1 and %d, got %d", SampleMaxVersions, *w.Last)
		case w.In != nil && len(w.In) == 0:
			return invalid("policy_versions.in must name at least one version")
		case len(w.In) > SampleMaxVersions:
			return invalid("policy_versions.in names %d versions; at most %d", len(w.In), SampleMaxVersions)
		}
		for i, v := range w.In {
			if v == "" {
				return invalid("policy_versions.in[%d] is empty", i)
			}
		}
	}
	if o.Group != "" && !validName(o.Group) {
		return invalid("group %q is not a consumer group name: use 1-128 of A-Z a-z 0-9 . _ -, starting with a letter or digit", o.Group)
	}
	if m := o.MaxTimesSampled; m != nil {
		if o.Group == "" {
			return invalid("max_times_sampled needs group: without a consumer group nothing is counted")
		}
		if *m < 1 || *m > math.MaxInt32 {
			return invalid("max_times_sampled must be >= 1, got %d", *m)
		}
	}
	switch o.Weighting {
	case "":
		o.Weighting = WeightUniform
	case WeightUniform, WeightRecency, WeightRewardStd:
	default:
		return invalid("weighting %q is not one of %s, %s, %s", o.Weighting, WeightUniform, WeightRecency, WeightRewardStd)
	}
	return nil
}

// SampledGroup is one group of a SampleResult: its key, how many of the
// batch's rows it holds (contiguous, in the result's order) and the mean
// and population standard deviation of its non-null rewards (NaN when it
// has none).
type SampledGroup struct {
	Key        string
	Rows       int
	RewardMean float64
	RewardStd  float64
}

// SampleResult is a drawn batch. Batch holds the rows of every group (the
// columns of ScanColumns), group after group in Groups' order, each
// group's rows ordered by rollout_id, sequence_order, id. Release it.
type SampleResult struct {
	Batch    arrow.RecordBatch
	Groups   []SampledGroup
	GroupBy  string
	Window   []string // the window's versions (newest first for last; as given for in)
	Eligible int      // groups that could be drawn
	Seed     uint64
	Version  uint64 // the base table's version read
}

// Release frees the batch.
func (r *SampleResult) Release() {
	if r.Batch != nil {
		r.Batch.Release()
		r.Batch = nil
	}
}

// Records decodes the batch, one slice of records per group.
func (r *SampleResult) Records() ([][]Record, error) {
	recs, err := recordsFromBatch(r.Batch)
	if err != nil {
		return nil, err
	}
	out := make([][]Record, len(r.Groups))
	at := 0
	for i, g := range r.Groups {
		out[i] = recs[at : at+g.Rows : at+g.Rows]
		at += g.Rows
	}
	return out, nil
}

// Sample draws a batch of complete groups from the all view.
//
// A group is every record of its key (o.GroupBy) whose policy_version is
// in the window, and its reward variance is taken over those records
// (non-null rewards). The last K versions are the K newest by first
// appearance: the smallest created_at of the version's rows in the view
// (ties: the larger version string is newer). Eligible groups are those
// not dropped for zero variance and, with a consumer group, served fewer
// than max_times_sampled times to it. The draw takes min(n, eligible)
// groups by weighted sampling without replacement (Efraimidis-Spirakis:
// the n largest u^(1/w), u a uniform variate hashed from the seed and the
// key), so it depends only on the seed, the snapshot and the counts, never
// on the order groups are found in. With a consumer group the served keys
// are recorded before the answer, under a put-if-absent chain that makes
// concurrent callers (any process) re-draw instead of overwriting each
// other: no key is ever served more than max_times_sampled times.
func (s *Store) Sample(ctx context.Context, o SampleOptions) (*SampleResult, error) {
	if err := validateSample(&o); err != nil {
		return nil, err
	}
	seed := uint64(0)
	if o.Seed != nil {
		seed = *o.Seed
	} else {
		seed = rand.Uint64() >> 11 // 53 bits: exact in every JSON reader
	}
	var res *SampleResult
	err := s.readView(ctx, true, readPlan{files: true}, func(v *view) error {
		var err error
		res, err = s.sample(ctx, v, &o, seed)
		return err
	})
	return res, err
}

// rewardStats are the count, mean, sum of squared deviations, minimum and
// maximum of non-null rewards, mergeable (Chan et al.'s pairwise update),
// so that a group's statistics come from its parts' without a pass over
// its rows.
type rewardStats struct {
	n        int
	mean, m2 float64
	lo, hi   float64
}

func (a *rewardStats) add(r float32) {
	if math.IsNaN(float64(r)) {
		return
	}
	x := float64(r)
	if a.n == 0 {
		a.lo, a.hi = x, x
	}
	a.n++
	d := x - a.mean
	a.mean += d / float64(a.n)
	a.m2 += d * (x - a.mean)
	a.lo, a.hi = min(a.lo, x), max(a.hi, x)
}

func (a *rewardStats) merge(b rewardStats) {
	switch {
	case b.n == 0:
		return
	case a.n == 0:
		*a = b
		return
	}
	n := a.n + b.n
	d := b.mean - a.mean
	a.m2 += b.m2 + d*d*float64(a.n)*float64(b.n)/float64(n)
	a.mean += d * float64(b.n) / float64(n)
	a.n = n
	a.lo, a.hi = min(a.lo, b.lo), max(a.hi, b.hi)
}

// partRef is a group's rows in one base fragment and version (vr: the
// version's rank in the window, 0 = newest).
type partRef struct {
	fid uint64
	p   *groupPart
	vr  int
}

// candGroup is a group of the window: its base parts and pending rows.
type candGroup struct {
	key   string
	parts []partRef
	pend  []int32 // indices into the call's pending rows
	newer int     // window versions newer than the group's newest (recency)
	st    rewardStats
	mean  float64
	std   float64
	zero  bool // zero variance: fewer than two rewards, or all equal
}

func (s *Store) sample(ctx context.Context, v *view, o *SampleOptions, seed uint64) (*SampleResult, error) {
	snap := v.snap
	pend, err := s.pendingSampleRows(ctx, snap, o.GroupBy)
	if err != nil {
		return nil, err
	}
	sup, err := s.supersededRows(ctx, v, pend.gens)
	if err != nil {
		return nil, err
	}
	sc := samplerFor(s)
	frags := snap.base.Fragments()
	stats, err := sc.versionStats(ctx, s, snap.base, frags)
	if err != nil {
		return nil, err
	}
	// The window, and each of its versions' rank (0 = newest).
	var window []string
	rank := map[string]int{}
	needOrder := o.Weighting == WeightRecency || (o.PolicyVersions != nil && o.PolicyVersions.Last != nil)
	var order []string // every version, newest first
	if needOrder {
		if order, err = s.versionOrder(ctx, snap, frags, stats, sup, pend); err != nil {
			return nil, err
		}
	}
	switch w := o.PolicyVersions; {
	case w == nil:
		window = order // the ranks of recency; the window itself is everything
	case w.Last != nil:
		window = order[:min(*w.Last, len(order))]
	default:
		window = slices.Clone(w.In)
	}
	for i, v := range window {
		if _, ok := rank[v]; !ok {
			rank[v] = i
		}
	}
	if w := o.PolicyVersions; w != nil && w.In != nil && o.Weighting == WeightRecency {
		// Ranks by first appearance, not by the order given.
		for v := range rank {
			rank[v] = len(order)
		}
		i := 0
		for _, v := range order {
			if _, ok := rank[v]; ok {
				rank[v] = i
				i++
			}
		}
	}
	inWindow := func(v string, null bool) (int, bool) {
		if o.PolicyVersions == nil {
			if null {
				return len(order), true
			}
			r, ok := rank[v]
			if !ok {
				r = len(order)
			}
			return r, true
		}
		if null {
			return 0, false
		}
		r, ok := rank[v]
		return r, ok
	}

	var need []int // fragments holding a version of the window
	for i := range frags {
		for v := range stats[i].first {
			if _, ok := inWindow(v, false); ok {
				need = append(need, i)
				break
			}
		}
		if o.PolicyVersions == nil && stats[i].nulls > 0 && !slices.Contains(need, i) {
			need = append(need, i)
		}
	}
	parts, err := sc.groupParts(ctx, s, snap.base, frags, need, o.GroupBy)
	if err != nil {
		return nil, err
	}
	// The window's groups in the base (cached per base version, key
	// column and window), then what the pending tier changes: its rows,
	// and the base rows it rewrites. Groups it touches are copies.
	ranks := make([]string, 0, len(rank))
	for v, r := range rank {
		ranks = append(ranks, v+"\x00"+strconv.Itoa(r))
	}
	slices.Sort(ranks)
	wkey := fmt.Sprintf("w:%d:%s:%t:%s", snap.base.Version(), o.GroupBy, o.PolicyVersions == nil, strings.Join(ranks, "\x01"))
	combo := sc.baseGroups(s.root, wkey, frags, need, parts, inWindow)
	touched := map[string]*candGroup{}
	var isTouched []bool
	touch := func(key string) *candGroup {
		if g, ok := touched[key]; ok {
			return g
		}
		g := &candGroup{key: key}
		if i, ok := combo.byKey[key]; ok {
			if isTouched == nil {
				isTouched = make([]bool, len(combo.groups))
			}
			isTouched[i] = true
			g.parts = slices.Clone(combo.groups[i].parts)
		}
		touched[key] = g
		return g
	}
	for k, i := range need {
		fid := frags[i].GetId()
		fsup := sup[fid]
		if fsup == nil {
			continue
		}
		for _, vp := range parts[k].vers {
			vr, ok := inWindow(vp.version, vp.null)
			if !ok {
				continue
			}
			for _, p := range vp.parts {
				q := p.without(fsup)
				if q == p {
					continue
				}
				g := touch(p.key)
				j := slices.IndexFunc(g.parts, func(r partRef) bool { return r.fid == fid && r.p == p })
				if q == nil {
					g.parts = slices.Delete(g.parts, j, j+1)
				} else {
					g.parts[j] = partRef{fid, q, vr}
				}
			}
		}
	}
	for i, r := range pend.rows {
		if r.keyNull {
			continue
		}
		if _, ok := inWindow(r.version, r.versionNull); ok {
			g := touch(r.key)
			g.pend = append(g.pend, int32(i))
		}
	}
	for _, g := range touched {
		g.newer, g.st = math.MaxInt, rewardStats{}
		for _, p := range g.parts {
			g.st.merge(p.p.st)
			g.newer = min(g.newer, p.vr)
		}
		for _, i := range g.pend {
			r := pend.rows[i]
			g.st.add(r.reward)
			vr, _ := inWindow(r.version, r.versionNull)
			g.newer = min(g.newer, vr)
		}
		g.finish()
	}

	res := &SampleResult{GroupBy: o.GroupBy, Window: window, Seed: seed, Version: snap.base.Version()}
	if o.PolicyVersions == nil {
		res.Window = []string{}
	}
	if res.Window == nil {
		res.Window = []string{}
	}
	// Eligibility without the consumer group's counts (in no order: the
	// draw does not depend on one).
	cands := make([]*candGroup, 0, len(combo.groups)+len(touched))
	for i := range combo.groups {
		if g := &combo.groups[i]; !(o.DropZeroVariance && g.zero) && (isTouched == nil || !isTouched[i]) {
			cands = append(cands, g)
		}
	}
	for _, g := range touched {
		if !(o.DropZeroVariance && g.zero) && g.rows() > 0 {
			cands = append(cands, g)
		}
	}

	draw := func(served func(key string) bool) ([]*candGroup, int) {
		eligible := cands
		if served != nil {
			eligible = make([]*candGroup, 0, len(cands))
			for _, g := range cands {
				if !served(g.key) {
					eligible = append(eligible, g)
				}
			}
		}
		return drawGroups(eligible, o.N, seed, o.Weighting), len(eligible)
	}
	if o.Group == "" {
		chosen, eligible := draw(nil)
		res.Eligible = eligible
		if err := s.fillSample(ctx, snap, res, chosen, pend); err != nil {
			return nil, err
		}
		return res, nil
	}
	maxTimes := 1
	if o.MaxTimesSampled != nil {
		maxTimes = *o.MaxTimesSampled
	}
	err = sc.ledger(s, o.Group).serve(ctx, s, func(counts map[string]uint32) ([]string, error) {
		chosen, eligible := draw(func(key string) bool { return int64(counts[key]) >= int64(maxTimes) })
		res.Eligible = eligible
		res.Release()
		if err := s.fillSample(ctx, snap, res, chosen, pend); err != nil {
			return nil, err
		}
		keys := make([]string, len(chosen))
		for i, g := range chosen {
			keys[i] = g.key
		}
		return keys, nil
	}, res.Version)
	if err != nil {
		res.Release()
		return nil, err
	}
	return res, nil
}

// finish computes the reward mean, standard deviation and zero variance
// of a group over its non-null rewards.
func (g *candGroup) finish() {
	st := g.st
	// Exactly equal rewards are zero variance, whatever rounding left in m2.
	g.zero = st.n < 2 || st.lo == st.hi
	if st.n == 0 {
		g.mean, g.std = math.NaN(), math.NaN()
		return
	}
	g.mean = st.mean
	if !g.zero {
		g.std = math.Sqrt(max(st.m2, 0) / float64(st.n))
	}
}

// rows is the group's row count.
func (g *candGroup) rows() int {
	n := len(g.pend)
	for _, p := range g.parts {
		n += len(p.p.offs)
	}
	return n
}

// weight is a group's weight under a weighting.
func (g *candGroup) weight(weighting string) float64 {
	switch weighting {
	case WeightRecency:
		if g.newer >= 1024 {
			return 0
		}
		return math.Ldexp(1, -g.newer)
	case WeightRewardStd:
		if g.zero {
			return 0
		}
		return g.std
	}
	return 1
}

// sampleUniform is the group's uniform variate in (0, 1): a hash of the
// seed and the key, so that a group's chance never depends on which other
// groups exist or in what order they were found.
func sampleUniform(seed uint64, key string) float64 {
	h := fnv.New64a()
	var b [8]byte
	binary.LittleEndian.PutUint64(b[:], seed)
	h.Write(b[:])
	h.Write([]byte(key))
	x := h.Sum64()
	// splitmix64's finalizer: FNV's low bits mix poorly.
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return (float64(x>>11) + 0.5) / (1 << 53)
}

// drawItem is a group with its sort key: log(u)/w (larger first), then u,
// then the key, so that zero-weight groups (key -Inf) come last in an
// order the seed still decides.
type drawItem struct {
	g    *candGroup
	k, u float64
}

func (a drawItem) less(b drawItem) bool {
	if a.k != b.k {
		return a.k < b.k
	}
	if a.u != b.u {
		return a.u < b.u
	}
	return a.g.key > b.g.key
}

type drawHeap []drawItem // a min-heap: the weakest of the chosen on top

func (h drawHeap) Len() int           { return len(h) }
func (h drawHeap) Less(i, j int) bool { return h[i].less(h[j]) }
func (h drawHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *drawHeap) Push(x any)        { *h = append(*h, x.(drawItem)) }
func (h *drawHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// drawGroups draws min(n, len(gs)) groups without replacement,
// Efraimidis-Spirakis: each group's key is u^(1/w) (as log(u)/w), the n
// largest win, in decreasing key order.
func drawGroups(gs []*candGroup, n int, seed uint64, weighting string) []*candGroup {
	h := make(drawHeap, 0, min(n, len(gs)))
	for _, g := range gs {
		u := sampleUniform(seed, g.key)
		w := g.weight(weighting)
		k := math.Inf(-1)
		if w > 0 {
			k = math.Log(u) / w
		}
		it := drawItem{g, k, u}
		if len(h) < n {
			heap.Push(&h, it)
		} else if h[0].less(it) {
			h[0] = it
			heap.Fix(&h, 0)
		}
	}
	out := make([]*candGroup, len(h))
	for i := len(h) - 1; i >= 0; i-- {
		out[i] = heap.Pop(&h).(drawItem).g
	}
	return out
}

// pendingSample is the pending rows of a snapshot as the sampler reads
// them: one per id (the newest write), with the columns it needs.
type pendingSample struct {
	gens []*wal.LoadedGeneration
	rows []pendingSampleRow
}

type pendingSampleRow struct {
	w                    walRow
	key, version         string
	keyNull, versionNull bool
	created              int64 // microseconds
	reward               float32
}

func (s *Store) pendingSampleRows(ctx context.Context, snap *snapshot, groupBy string) (*pendingSample, error) {
	// Generations are immutable: their rows, as the sampler reads them,
	// are cached per set of pending generations and key column.
	refs := snap.pendingRefs()
	var kb strings.Builder
	kb.WriteString("p:" + groupBy)
	for _, r := range refs {
		kb.WriteString("|" + r.Key())
	}
	ck := sampleCacheKey{s.root, kb.String()}
	if v, ok := sampleLRU.get(ck); ok {
		return v.(*pendingSample), nil
	}
	gens, err := s.loadPending(ctx, snap)
	if err != nil {
		return nil, err
	}
	out := &pendingSample{gens: gens}
	if len(gens) == 0 {
		return out, nil
	}
	defer func() {
		bytes := int64(kb.Len()) + 96*int64(len(out.rows))
		for _, g := range gens {
			bytes += g.Bytes() // held here too, whatever the generation cache evicts
		}
		sampleLRU.put(ck, out, bytes)
	}()
	rows, _ := wal.NewestRows(gens)
	// The columns read, by generation (the cache keeps a large
	// generation's narrow columns only, so positions differ).
	type sampleCols struct{ key, ver, at, rew arrow.Array }
	colsOf := map[*wal.LoadedGeneration]sampleCols{}
	out.rows = make([]pendingSampleRow, len(rows))
	for i, r := range rows {
		c, ok := colsOf[r.Gen]
		if !ok {
			rec := r.Gen.Rec
			c = sampleCols{columnOf(rec, groupBy), columnOf(rec, "policy_version"), columnOf(rec, ColCreatedAt), columnOf(rec, "reward")}
			colsOf[r.Gen] = c
		}
		p := pendingSampleRow{w: walRow{r.Gen, r.Row}, reward: float32(math.NaN())}
		p.key, p.keyNull = stringAt(c.key, r.Row)
		p.version, p.versionNull = stringAt(c.ver, r.Row)
		if c, ok := c.at.(*array.Timestamp); ok && !c.IsNull(r.Row) {
			p.created = int64(c.Value(r.Row))
		} else {
			p.created = math.MaxInt64
		}
		if c, ok := c.rew.(*array.Float32); ok && !c.IsNull(r.Row) {
			p.reward = c.Value(r.Row)
		}
		out.rows[i] = p
	}
	return out, nil
}

// stringAt reads row i of a text column; null is true for a null (or a
// column of another type, which reads as null).
func stringAt(a arrow.Array, i int) (v string, null bool) {
	switch c := a.(type) {
	case *array.String:
		if c.IsNull(i) {
			return "", true
		}
		return c.Value(i), false
	case *array.LargeString:
		if c.IsNull(i) {
			return "", true
		}
		return c.Value(i), false
	}
	return "", true
}

// versionOrder returns every policy version of the view, newest first by
// first appearance (the smallest created_at of its rows; ties: the larger
// version string is newer).
func (s *Store) versionOrder(ctx context.Context, snap *snapshot, frags []*pb.DataFragment, stats []*fragVersions, sup map[uint64]*offsetSet, pend *pendingSample) ([]string, error) {
	first := map[string]int64{}
	note := func(v string, at int64) {
		if cur, ok := first[v]; !ok || at < cur {
			first[v] = at
		}
	}
	for i, st := range stats {
		fsup := sup[frags[i].GetId()]
		exact := st
		for _, f := range st.first {
			if fsup != nil && fsup.Contains(f.off) {
				// The row that set a first appearance was rewritten by a
				// pending write: this fragment's figures without the
				// superseded rows (rare, not cached).
				var err error
				if exact, err = scanVersionStats(ctx, snap.base, frags[i], fsup); err != nil {
					return nil, err
				}
				break
			}
		}
		for v, f := range exact.first {
			note(v, f.at)
		}
	}
	for _, r := range pend.rows {
		if !r.versionNull {
			note(r.version, r.created)
		}
	}
	out := make([]string, 0, len(first))
	for v := range first {
		out = append(out, v)
	}
	slices.SortFunc(out, func(a, b string) int {
		if c := cmp.Compare(first[b], first[a]); c != 0 {
			return c
		}
		return strings.Compare(b, a)
	})
	return out, nil
}

// supersededRows returns, per base fragment, the rows v hides: those whose
// id has a pending write (the all view shows the pending row instead).
// The view finds them (hiddenBaseRows), one generation at a time, each
// answer cached per base version (sample_cache.go).
func (s *Store) supersededRows(ctx context.Context, v *view, gens []*wal.LoadedGeneration) (map[uint64]*offsetSet, error) {
	out := map[uint64]*offsetSet{}
	if len(gens) == 0 || v.base().CountRows() == 0 {
		return out, nil
	}
	sc := samplerFor(s)
	for _, g := range gens {
		addrs, err := sc.genSuperseded(ctx, v, g)
		if err != nil {
			return nil, err
		}
		for _, a := range addrs {
			set := out[a>>32]
			if set == nil {
				set = &offsetSet{}
				out[a>>32] = set
			}
			set.Add(uint32(a))
		}
	}
	return out, nil
}

// fillSample reads the chosen groups' records into res: base rows in one
// take, pending rows from the generation cache, then every row put in
// group order.
func (s *Store) fillSample(ctx context.Context, snap *snapshot, res *SampleResult, chosen []*candGroup, pend *pendingSample) error {
	res.Groups = make([]SampledGroup, len(chosen))
	total := 0
	for _, g := range chosen {
		total += g.rows()
	}
	if total > sampleMaxRows {
		return invalid("n: the %d groups drawn hold %d rows, more than %d a batch may hold; ask for fewer groups", len(chosen), total, sampleMaxRows)
	}
	var addrs []table.RowAddr
	for _, g := range chosen {
		for _, p := range g.parts {
			for _, off := range p.p.offs {
				addrs = append(addrs, table.RowAddr{Fragment: p.fid, Offset: off})
			}
		}
	}
	slices.SortFunc(addrs, func(a, b table.RowAddr) int { return a.Compare(b) })
	// parts: the base rows (in address order), then each pending row.
	var parts []arrow.RecordBatch
	defer func() {
		for _, p := range parts {
			p.Release()
		}
	}()
	if len(addrs) > 0 {
		b, err := snap.base.TakeRows(ctx, addrs, baseColumns(snap.base, listColumns))
		if err != nil {
			return err
		}
		p, err := project(b, listColumns)
		b.Release()
		if err != nil {
			return err
		}
		parts = append(parts, p)
	}
	pendAt := map[int32]int{} // pending row -> its row in the concatenation
	n := len(addrs)
	var pendRows []walRow
	for _, g := range chosen {
		for _, pi := range g.pend {
			pendRows = append(pendRows, pend.rows[pi].w)
			pendAt[pi] = n
			n++
		}
	}
	if len(pendRows) > 0 {
		p, err := s.pendingRows(ctx, pendRows, listColumns)
		if err != nil {
			return err
		}
		parts = append(parts, p)
	}
	all, err := concatSchemaBatches(listColumns, parts)
	if err != nil {
		return err
	}
	defer all.Release()
	// The order: group by group, each by rollout_id, sequence_order, id.
	rollout := all.Column(slices.Index(listColumns, ColRolloutID)).(*array.String)
	seq := all.Column(slices.Index(listColumns, ColSequenceOrder)).(*array.Int32)
	ids := all.Column(slices.Index(listColumns, ColID)).(*array.String)
	idx := make([]int64, 0, total)
	for gi, g := range chosen {
		start := len(idx)
		for _, p := range g.parts {
			for _, off := range p.p.offs {
				i, _ := slices.BinarySearchFunc(addrs, table.RowAddr{Fragment: p.fid, Offset: off}, table.RowAddr.Compare)
				idx = append(idx, int64(i))
			}
		}
		for _, pi := range g.pend {
			idx = append(idx, int64(pendAt[pi]))
		}
		rows := idx[start:]
		slices.SortFunc(rows, func(a, b int64) int {
			if c := strings.Compare(rollout.Value(int(a)), rollout.Value(int(b))); c != 0 {
				return c
			}
			if c := cmp.Compare(seq.Value(int(a)), seq.Value(int(b))); c != 0 {
				return c
			}
			return strings.Compare(ids.Value(int(a)), ids.Value(int(b)))
		})
		res.Groups[gi] = SampledGroup{Key: g.key, Rows: len(rows), RewardMean: g.mean, RewardStd: g.std}
	}
	res.Batch, err = takeBatch(ctx, all, idx, res)
	return err
}

// takeBatch returns the rows idx of b, in that order, with the sample's
// schema metadata (the group key column and each group's row count).
func takeBatch(ctx context.Context, b arrow.RecordBatch, idx []int64, res *SampleResult) (arrow.RecordBatch, error) {
	rows := make([]string, len(res.Groups))
	for i, g := range res.Groups {
		rows[i] = strconv.Itoa(g.Rows)
	}
	md := arrow.NewMetadata([]string{api.SampleMetaGroupBy, api.SampleMetaGroupRows}, []string{res.GroupBy, strings.Join(rows, ",")})
	schema := arrow.NewSchema(b.Schema().Fields(), &md)
	taken, err := takeRows(ctx, b, idx)
	if err != nil {
		return nil, fmt.Errorf("rollout: sample: %w", err)
	}
	defer taken.Release()
	out := array.NewRecordBatch(schema, taken.Columns(), taken.NumRows())
	return out, nil
}
