package rollout

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lance-context/lance-context/objstore"
)

// sampleFixture is a store with groups of problems over policy versions,
// part merged into the base and part pending, and the records it holds
// (the all view), for an oracle to compare the sampler with.
type sampleFixture struct {
	root objstore.Store
	c    *Catalog
	s    *Store
}

var t0 = time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)

// groupRecs returns rows rows of problem p under version v, created at
// minute min (plus a second per row), with rewards from reward(i).
func groupRecs(p, v string, minute, rows int, reward func(i int) *float32) []Record {
	out := make([]Record, rows)
	for i := range out {
		at := t0.Add(time.Duration(minute)*time.Minute + time.Duration(i)*time.Second)
		out[i] = Record{ID: fmt.Sprintf("%s-%s-%d", p, v, i), RolloutID: fmt.Sprintf("ro-%s-%s-%d", p, v, i), ProblemID: p,
			PolicyVersion: ptr(v), CreatedAt: &at, Reward: reward(i), Content: ptr("c")}
	}
	return out
}

func varied(i int) *float32 { return ptr(float32(i % 3)) }
func flat(int) *float32     { return ptr(float32(1)) }

// newSampleFixture: versions by first appearance "v1" (oldest) .. "v4";
// "v10" is older than "v9" in time though newer by name: first appearance
// decides, not the name. Per version 6 problems of 4 rows; problems
// p0..p5 of v1 and v2 and "v10" are merged, v3, "v9" and v4 pending.
// Problem q-* rows of version v4 have zero variance (all rewards 1).
func newSampleFixture(t *testing.T) *sampleFixture {
	t.Helper()
	ctx := context.Background()
	root := objstore.NewMemory()
	c := newCatalog(t, root, "w1", Options{})
	s := mustStore(t, c, "exp")
	add := func(v string, minute int, merge bool) {
		var rs []Record
		for p := 0; p < 6; p++ {
			rw := varied
			name := fmt.Sprintf("p%d-%s", p, v)
			if v == "v4" && p%2 == 0 {
				rw, name = flat, fmt.Sprintf("q%d-%s", p, v)
			}
			rs = append(rs, groupRecs(name, v, minute+p, 4, rw)...)
		}
		appendFlush(t, s, rs)
		if merge {
			if _, err := s.Merge(ctx); err != nil {
				t.Fatal(err)
			}
		}
	}
	add("v1", 0, true)
	add("v10", 100, true)
	add("v2", 200, true)
	add("v9", 300, false)
	add("v3", 400, false)
	add("v4", 500, false)
	// A problem spread over two versions: its group in a window holding
	// both is every row of both.
	appendFlush(t, s, groupRecs("span", "v3", 401, 2, varied))
	appendFlush(t, s, groupRecs("span", "v4", 501, 2, varied))
	return &sampleFixture{root, c, s}
}

// view returns every record of the all view.
func (f *sampleFixture) view(t *testing.T) []Record {
	t.Helper()
	var out []Record
	o := ListOptions{Source: SourceAll, Limit: 1000}
	for {
		res, err := f.s.List(context.Background(), o)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, res.Records...)
		if !res.HasMore {
			return out
		}
		o.After, _ = DecodeCursor(res.NextCursor)
	}
}

// oracle groups the view's records by problem inside window (nil: all).
func oracle(recs []Record, window []string) map[string][]string {
	out := map[string][]string{}
	for _, r := range recs {
		if window != nil && (r.PolicyVersion == nil || !slices.Contains(window, *r.PolicyVersion)) {
			continue
		}
		out[r.ProblemID] = append(out[r.ProblemID], r.ID)
	}
	for _, ids := range out {
		slices.Sort(ids)
	}
	return out
}

func zeroVariance(recs []Record, ids []string) bool {
	var rs []float32
	for _, r := range recs {
		if slices.Contains(ids, r.ID) && r.Reward != nil {
			rs = append(rs, *r.Reward)
		}
	}
	return len(rs) < 2 || slices.Min(rs) == slices.Max(rs)
}

func sample(t *testing.T, s *Store, o SampleOptions) (*SampleResult, [][]Record) {
	t.Helper()
	res, err := s.Sample(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(res.Release)
	groups, err := res.Records()
	if err != nil {
		t.Fatal(err)
	}
	return res, groups
}

func groupIDs(rs []Record) []string {
	out := make([]string, len(rs))
	for i, r := range rs {
		out[i] = r.ID
	}
	slices.Sort(out)
	return out
}

func TestSampleGroupsCompleteAndInsideTheWindow(t *testing.T) {
	f := newSampleFixture(t)
	view := f.view(t)
	for _, tc := range []struct {
		name   string
		window *PolicyWindowOpt
		want   []string // versions of the window
	}{
		{"last 2", &PolicyWindowOpt{Last: ptr(2)}, []string{"v4", "v3"}},
		// v9 first appeared after v2 though it sorts after it by name.
		{"last 4", &PolicyWindowOpt{Last: ptr(4)}, []string{"v4", "v3", "v9", "v2"}},
		{"last 5 spans base and pending", &PolicyWindowOpt{Last: ptr(5)}, []string{"v4", "v3", "v9", "v2", "v10"}},
		{"in", &PolicyWindowOpt{In: []string{"v1", "v3"}}, []string{"v1", "v3"}},
		{"everything", nil, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res, groups := sample(t, f.s, SampleOptions{N: 1000, PolicyVersions: tc.window, Seed: ptr(uint64(7))})
			if tc.want != nil && !slices.Equal(res.Window, tc.want) {
				t.Fatalf("window %v, want %v", res.Window, tc.want)
			}
			want := oracle(view, tc.want)
			if len(groups) != len(want) || res.Eligible != len(want) {
				t.Fatalf("%d groups (eligible %d), want all %d of the window", len(groups), res.Eligible, len(want))
			}
			rows := 0
			for i, g := range groups {
				key := res.Groups[i].Key
				if got := groupIDs(g); !slices.Equal(got, want[key]) {
					t.Fatalf("group %q: %v, want every record of the key in the window: %v", key, got, want[key])
				}
				for _, r := range g {
					if r.ProblemID != key {
						t.Fatalf("group %q holds a record of %q", key, r.ProblemID)
					}
				}
				rows += len(g)
			}
			if int(res.Batch.NumRows()) != rows {
				t.Fatalf("batch of %d rows, groups hold %d", res.Batch.NumRows(), rows)
			}
		})
	}
	// The group spread over v3 and v4: both halves in a window of both,
	// one half in a window of one.
	_, groups := sample(t, f.s, SampleOptions{N: 1000, PolicyVersions: &PolicyWindowOpt{In: []string{"v4"}}})
	for _, g := range groups {
		if g[0].ProblemID == "span" && len(g) != 2 {
			t.Fatalf("span in window v4: %d rows, want 2", len(g))
		}
	}
}

// PolicyWindowOpt is the window type, for brevity.
type PolicyWindowOpt = PolicyWindow

func TestSampleReturnsMinOfNAndEligibleThenNone(t *testing.T) {
	f := newSampleFixture(t)
	o := SampleOptions{N: 4, PolicyVersions: &PolicyWindowOpt{Last: ptr(1)}, Group: "learner", Seed: ptr(uint64(1))}
	// v4: 6 problems and span = 7 groups.
	res, _ := sample(t, f.s, o)
	if len(res.Groups) != 4 || res.Eligible != 7 {
		t.Fatalf("first call: %d groups of %d eligible, want 4 of 7", len(res.Groups), res.Eligible)
	}
	res, _ = sample(t, f.s, o)
	if len(res.Groups) != 3 || res.Eligible != 3 {
		t.Fatalf("second call: %d groups of %d eligible, want the 3 left", len(res.Groups), res.Eligible)
	}
	res, _ = sample(t, f.s, o)
	if len(res.Groups) != 0 || res.Batch.NumRows() != 0 {
		t.Fatalf("used up: %d groups, want none (and no error)", len(res.Groups))
	}
}

func TestSampleDropsZeroVarianceGroups(t *testing.T) {
	f := newSampleFixture(t)
	view := f.view(t)
	win := &PolicyWindowOpt{In: []string{"v4"}}
	want := oracle(view, []string{"v4"})
	nonZero := 0
	for _, ids := range want {
		if !zeroVariance(view, ids) {
			nonZero++
		}
	}
	if nonZero == len(want) || nonZero == 0 {
		t.Fatalf("fixture: %d of %d groups with variance; want some of each", nonZero, len(want))
	}
	res, groups := sample(t, f.s, SampleOptions{N: 100, PolicyVersions: win, DropZeroVariance: true})
	if len(groups) != nonZero {
		t.Fatalf("%d groups, want the %d with variance", len(groups), nonZero)
	}
	for i, g := range groups {
		if zeroVariance(view, groupIDs(g)) || res.Groups[i].RewardStd == 0 {
			t.Fatalf("group %q has zero variance", res.Groups[i].Key)
		}
	}
	res, _ = sample(t, f.s, SampleOptions{N: 100, PolicyVersions: win})
	if len(res.Groups) != len(want) {
		t.Fatalf("without drop: %d groups, want %d", len(res.Groups), len(want))
	}
}

func TestSampleSameSeedSameBatch(t *testing.T) {
	f := newSampleFixture(t)
	o := SampleOptions{N: 5, PolicyVersions: &PolicyWindowOpt{Last: ptr(3)}, Seed: ptr(uint64(42))}
	batch := func(o SampleOptions) []string {
		_, groups := sample(t, f.s, o)
		var out []string
		for _, g := range groups {
			for _, r := range g {
				out = append(out, r.ID) // the order matters too
			}
		}
		return out
	}
	a, b := batch(o), batch(o)
	if !slices.Equal(a, b) || len(a) == 0 {
		t.Fatalf("same seed, same version: %v then %v", a, b)
	}
	// Two fresh consumer groups draw the same batch as no group.
	o.Group = "g1"
	c := batch(o)
	o.Group = "g2"
	d := batch(o)
	if !slices.Equal(a, c) || !slices.Equal(c, d) {
		t.Fatalf("fresh consumer groups: %v, %v; without: %v", c, d, a)
	}
	// Some other seed gives another batch (for 10 seeds, at least one).
	o.Group = ""
	differs := false
	for s := uint64(0); s < 10 && !differs; s++ {
		o.Seed = ptr(s + 100)
		differs = !slices.Equal(batch(o), a)
	}
	if !differs {
		t.Fatal("every seed drew the same batch")
	}
	// No seed: a random one, sent back, that replays the draw.
	o.Seed = nil
	res, groups := sample(t, f.s, o)
	o.Seed = ptr(res.Seed)
	var first []string
	for _, g := range groups {
		first = append(first, groupIDs(g)...)
	}
	_, again := sample(t, f.s, o)
	var second []string
	for _, g := range again {
		second = append(second, groupIDs(g)...)
	}
	if !slices.Equal(first, second) {
		t.Fatalf("replay of seed %d: %v then %v", res.Seed, first, second)
	}
}

func TestSampleMaxTimesSampledPerConsumerGroup(t *testing.T) {
	f := newSampleFixture(t)
	win := &PolicyWindowOpt{Last: ptr(3)}
	all := len(oracle(f.view(t), []string{"v4", "v3", "v9"}))
	served := map[string]map[string]int{}
	for _, group := range []string{"a", "b"} {
		served[group] = map[string]int{}
		for call := 0; ; call++ {
			res, _ := sample(t, f.s, SampleOptions{N: 4, PolicyVersions: win, Group: group, MaxTimesSampled: ptr(2), Seed: ptr(uint64(call))})
			if len(res.Groups) == 0 {
				break
			}
			seen := map[string]bool{}
			for _, g := range res.Groups {
				if seen[g.Key] {
					t.Fatalf("call %d served %q twice", call, g.Key)
				}
				seen[g.Key] = true
				served[group][g.Key]++
			}
			if call > 100 {
				t.Fatal("never used up")
			}
		}
		for k, n := range served[group] {
			if n != 2 {
				t.Fatalf("group %s: key %q served %d times, want max_times_sampled 2", group, k, n)
			}
		}
		if len(served[group]) != all {
			t.Fatalf("group %s: %d keys served, want all %d", group, len(served[group]), all)
		}
	}
	// A new process reads the counts from the store.
	c2 := newCatalog(t, f.root, "w2", Options{})
	res, _ := sample(t, mustStore(t, c2, "exp"), SampleOptions{N: 4, PolicyVersions: win, Group: "a", MaxTimesSampled: ptr(2)})
	if len(res.Groups) != 0 {
		t.Fatalf("another process served %d more groups to a used-up consumer group", len(res.Groups))
	}
	res, _ = sample(t, mustStore(t, c2, "exp"), SampleOptions{N: 4, PolicyVersions: win, Group: "a", MaxTimesSampled: ptr(3)})
	if len(res.Groups) != 4 {
		t.Fatalf("a higher max_times_sampled: %d groups, want 4", len(res.Groups))
	}
}

// Concurrent samplers of one consumer group, in two processes (two
// catalogs on one storage) and several goroutines each: every key served
// exactly once in all (max_times_sampled 1), whoever wins each entry.
func TestSampleConcurrentCallersNeverOverServe(t *testing.T) {
	f := newSampleFixture(t)
	c2 := newCatalog(t, f.root, "w2", Options{})
	stores := []*Store{f.s, mustStore(t, c2, "exp")}
	want := oracle(f.view(t), nil)
	var mu sync.Mutex
	served := map[string]int{}
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for w := 0; w < 8; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for call := 0; call < 100; call++ {
				res, err := stores[w%2].Sample(context.Background(), SampleOptions{N: 3, Group: "shared", Seed: ptr(uint64(w*1000 + call))})
				if err != nil {
					errs <- err
					return
				}
				mu.Lock()
				for _, g := range res.Groups {
					served[g.Key]++
				}
				mu.Unlock()
				res.Release()
				if len(res.Groups) == 0 {
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	for k, n := range served {
		if n != 1 {
			t.Fatalf("key %q served %d times to one consumer group (max 1)", k, n)
		}
	}
	if !slices.Equal(slices.Sorted(maps.Keys(served)), slices.Sorted(maps.Keys(want))) {
		t.Fatalf("served %d keys, want all %d", len(served), len(want))
	}
}

// The ledger's checkpoints: a process that reads a long chain for the
// first time reads its newest checkpoint and what follows, and gets the
// same counts as the process that wrote it.
func TestSampleLedgerCheckpointsAcrossProcesses(t *testing.T) {
	ctx := context.Background()
	root := objstore.NewMemory()
	s := mustStore(t, newCatalog(t, root, "w1", Options{}), "exp")
	var rs []Record
	for p := 0; p < ledgerCheckpointEvery+10; p++ {
		rs = append(rs, groupRecs(fmt.Sprintf("p%03d", p), "v1", p, 2, varied)...)
	}
	appendFlush(t, s, rs)
	for call := 0; call < ledgerCheckpointEvery+5; call++ {
		res, _ := sample(t, s, SampleOptions{N: 1, Group: "g", Seed: ptr(uint64(call))})
		if len(res.Groups) != 1 {
			t.Fatalf("call %d: %d groups", call, len(res.Groups))
		}
	}
	objs, err := root.List(ctx, "exp.rollout.lance/"+ledgerPrefix("g"))
	if err != nil || len(objs) != ledgerCheckpointEvery+5 {
		t.Fatalf("%d ledger entries (%v), want one per call", len(objs), err)
	}
	s2 := mustStore(t, newCatalog(t, root, "w2", Options{}), "exp")
	res, _ := sample(t, s2, SampleOptions{N: 100, Group: "g"})
	if len(res.Groups) != 5 {
		t.Fatalf("a new process sees %d groups left, want 5", len(res.Groups))
	}
}

func TestSampleNewestWriteWins(t *testing.T) {
	f := newSampleFixture(t)
	ctx := context.Background()
	// Rewrite a merged row of p0-v1 (base) as a row of problem moved-v1
	// with another reward: the view holds only the rewrite.
	moved := groupRecs("p0-v1", "v1", 0, 1, func(int) *float32 { return ptr(float32(9)) })
	moved[0].ProblemID = "moved"
	appendFlush(t, f.s, moved)
	_, groups := sample(t, f.s, SampleOptions{N: 1000, PolicyVersions: &PolicyWindowOpt{In: []string{"v1"}}})
	seen := map[string]int{}
	for _, g := range groups {
		for _, r := range g {
			seen[r.ID]++
			if r.ID == moved[0].ID && (r.ProblemID != "moved" || *r.Reward != 9) {
				t.Fatalf("the base row won over its rewrite: %+v", r)
			}
		}
	}
	if seen[moved[0].ID] != 1 {
		t.Fatalf("rewritten id served %d times", seen[moved[0].ID])
	}
	if _, err := f.s.Merge(ctx); err != nil {
		t.Fatal(err)
	}
	_, groups = sample(t, f.s, SampleOptions{N: 1000, PolicyVersions: &PolicyWindowOpt{In: []string{"v1"}}})
	for _, g := range groups {
		for _, r := range g {
			if r.ID == moved[0].ID && r.ProblemID != "moved" {
				t.Fatalf("after the merge the old row is back: %+v", r)
			}
		}
	}
}

// Rewriting the row that set a version's first appearance moves it.
func TestSampleFirstAppearanceFollowsRewrites(t *testing.T) {
	f := newSampleFixture(t)
	res, _ := sample(t, f.s, SampleOptions{N: 1, PolicyVersions: &PolicyWindowOpt{Last: ptr(6)}})
	if want := []string{"v4", "v3", "v9", "v2", "v10", "v1"}; !slices.Equal(res.Window, want) {
		t.Fatalf("window %v, want %v", res.Window, want)
	}
	// Every row of v1 (merged) rewritten as created after v4: v1 is now
	// the newest version.
	var rs []Record
	for p := 0; p < 6; p++ {
		rs = append(rs, groupRecs(fmt.Sprintf("p%d-v1", p), "v1", 900+p, 4, varied)...)
	}
	appendFlush(t, f.s, rs)
	res, _ = sample(t, f.s, SampleOptions{N: 1, PolicyVersions: &PolicyWindowOpt{Last: ptr(1)}})
	if !slices.Equal(res.Window, []string{"v1"}) {
		t.Fatalf("window %v after v1's rows were rewritten later, want [v1]", res.Window)
	}
}

func TestSampleRecencyWeighting(t *testing.T) {
	f := newSampleFixture(t)
	win := &PolicyWindowOpt{In: []string{"v1", "v2"}} // both merged; v2 newer
	newer := 0
	total := 0
	for seed := uint64(0); seed < 200; seed++ {
		res, groups := sample(t, f.s, SampleOptions{N: 3, PolicyVersions: win, Weighting: WeightRecency, Seed: ptr(seed)})
		for _, g := range groups {
			if *g[0].PolicyVersion == "v2" {
				newer++
			}
		}
		total += len(res.Groups)
	}
	// Weight 1 against 1/2: uniform would give half.
	if frac := float64(newer) / float64(total); frac < 0.58 {
		t.Fatalf("recency: %.2f of the groups from the newer version, want well above 0.5", frac)
	}
	// reward_std: zero-variance groups come only after all others.
	res, _ := sample(t, f.s, SampleOptions{N: 3, PolicyVersions: &PolicyWindowOpt{In: []string{"v4"}}, Weighting: WeightRewardStd, Seed: ptr(uint64(3))})
	for _, g := range res.Groups {
		if g.RewardStd == 0 || math.IsNaN(g.RewardStd) {
			t.Fatalf("reward_std drew zero-variance group %q while others were left", g.Key)
		}
	}
}

func TestSampleBadRequestsNameTheFieldAndStoreNothing(t *testing.T) {
	f := newSampleFixture(t)
	ctx := context.Background()
	for _, tc := range []struct {
		o     SampleOptions
		field string
	}{
		{SampleOptions{N: 0}, "n "},
		{SampleOptions{N: SampleMaxGroups + 1}, "n "},
		{SampleOptions{N: 1, GroupBy: "content"}, "group_by"},
		{SampleOptions{N: 1, GroupBy: "nope"}, "group_by"},
		{SampleOptions{N: 1, PolicyVersions: &PolicyWindowOpt{}}, "policy_versions"},
		{SampleOptions{N: 1, PolicyVersions: &PolicyWindowOpt{Last: ptr(0)}}, "policy_versions.last"},
		{SampleOptions{N: 1, PolicyVersions: &PolicyWindowOpt{Last: ptr(1), In: []string{"v1"}}}, "policy_versions"},
		{SampleOptions{N: 1, PolicyVersions: &PolicyWindowOpt{In: []string{}}}, "policy_versions.in"},
		{SampleOptions{N: 1, PolicyVersions: &PolicyWindowOpt{In: []string{"v1", ""}}}, "policy_versions.in[1]"},
		{SampleOptions{N: 1, MaxTimesSampled: ptr(1)}, "max_times_sampled needs group"},
		{SampleOptions{N: 1, Group: "g", MaxTimesSampled: ptr(0)}, "max_times_sampled"},
		{SampleOptions{N: 1, Group: "_reserved"}, "group"},
		{SampleOptions{N: 1, Group: "a/b"}, "group"},
		{SampleOptions{N: 1, Weighting: "heavy"}, "weighting"},
	} {
		_, err := f.s.Sample(ctx, tc.o)
		var ve *ValidationError
		if !errors.As(err, &ve) || !strings.Contains(ve.Msg, tc.field) {
			t.Errorf("%+v: %v, want a ValidationError naming %q", tc.o, err, tc.field)
		}
	}
	objs, err := f.root.List(ctx, "exp.rollout.lance/"+sampleDir)
	if err != nil || len(objs) != 0 {
		t.Fatalf("bad requests stored %d objects (%v)", len(objs), err)
	}
}

// A batch larger than SampleMaxRows is refused before anything is
// counted.
func TestSampleTooManyRowsCountsNothing(t *testing.T) {
	f := newSampleFixture(t)
	ctx := context.Background()
	defer func(n int) { sampleMaxRows = n }(sampleMaxRows)
	sampleMaxRows = 10 // v4 holds 26 rows
	_, err := f.s.Sample(ctx, SampleOptions{N: 100, Group: "g", PolicyVersions: &PolicyWindowOpt{In: []string{"v4"}}})
	var ve *ValidationError
	if !errors.As(err, &ve) || !strings.Contains(ve.Msg, "fewer groups") {
		t.Fatalf("%v, want a ValidationError asking for fewer groups", err)
	}
	objs, _ := f.root.List(ctx, "exp.rollout.lance/"+sampleDir)
	if len(objs) != 0 {
		t.Fatalf("a refused batch stored %d ledger entries", len(objs))
	}
}

// The window's base groups are cached and shared: what pending rows add
// to a group (and the base rows they rewrite) goes into a copy, never
// into the cached group, or the next call (another pending tier, another
// consumer) would see rows twice or lose them.
func TestRegression_SampleOverlayLeavesCachedGroupsAlone(t *testing.T) {
	f := newSampleFixture(t)
	win := &PolicyWindowOpt{In: []string{"v1"}} // merged: base only
	count := func() int {
		_, groups := sample(t, f.s, SampleOptions{N: 1000, PolicyVersions: win})
		for _, g := range groups {
			if g[0].ProblemID == "p1-v1" {
				return len(g)
			}
		}
		return 0
	}
	if n := count(); n != 4 {
		t.Fatalf("p1-v1: %d rows, want 4", n)
	}
	// One more row of p1-v1 (pending) and a rewrite of one of its base
	// rows under another problem.
	more := groupRecs("p1-v1", "v1", 1, 5, varied)[4:]
	more[0].ID = "p1-v1-extra"
	moved := groupRecs("p1-v1", "v1", 1, 1, varied)
	moved[0].ProblemID = "elsewhere"
	appendFlush(t, f.s, append(more, moved...))
	for range 3 {
		if n := count(); n != 4 { // +1 pending, -1 rewritten away
			t.Fatalf("p1-v1 with the pending tier: %d rows, want 4", n)
		}
	}
	for _, v := range sampleLRU.entries {
		if c, ok := v.Value.(*sampleCacheEntry).v.(*baseCombo); ok {
			if i, ok := c.byKey["p1-v1"]; ok && (c.groups[i].rows() != 4 || len(c.groups[i].pend) != 0) {
				t.Fatalf("the cached base group changed: %d rows, %d pending", c.groups[i].rows(), len(c.groups[i].pend))
			}
		}
	}
}
