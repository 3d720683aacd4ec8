package coord_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lance-context/lance-context/coord"
)

// fakeClock is a settable clock for cooldowns.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (f *fakeClock) now() time.Time { f.mu.Lock(); defer f.mu.Unlock(); return f.t }
func (f *fakeClock) advance(d time.Duration) {
	f.mu.Lock()
	f.t = f.t.Add(d)
	f.mu.Unlock()
}

// TestTaskCooldownEscalates: three failed attempts in a row on a (kind,
// store) start a cooldown of Base, each further failure doubles it up to
// Max, the clock running out ends it, and a success clears the count.
func TestTaskCooldownEscalates(t *testing.T) {
	each(t, func(t *testing.T, e env) {
		ctx := context.Background()
		c := e.connect(t)
		clock := &fakeClock{t: time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)}
		c.SetClock(clock.now)
		c.SetCooldownPolicy(coord.CooldownPolicy{AfterFailures: 3, Base: 600 * time.Second, Max: 21600 * time.Second})
		lease := grant(t, c, 60)
		// run runs the live (compact, s) task once (a new one when the last
		// failed for good), with the outcome runErr.
		run := func(runErr error) {
			t.Helper()
			tk, _, err := c.Enqueue(ctx, coord.KindCompact, "s", "api")
			if err != nil {
				t.Fatal(err)
			}
			rewind(t, c, e.prefix, tk.ID)
			got, err := c.Claim(ctx, lease)
			if err != nil || got == nil || got.ID != tk.ID {
				t.Fatalf("claim %+v %v, want %s", got, err, tk.ID)
			}
			if err := c.Finish(ctx, got, nil, runErr); err != nil {
				t.Fatal(err)
			}
		}
		record := func() *coord.CooldownRecord {
			t.Helper()
			cs, err := c.Cooldowns(ctx)
			if err != nil {
				t.Fatal(err)
			}
			for i := range cs {
				if cs[i].Kind == coord.KindCompact && cs[i].Target == "s" {
					return &cs[i]
				}
			}
			return nil
		}
		want := []time.Duration{0, 0, 600, 1200, 2400, 4800, 9600, 19200, 21600, 21600}
		for i, secs := range want {
			run(fmt.Errorf("disk on fire %d", i+1))
			r := record()
			if r == nil || r.Failures != i+1 || r.LastError != fmt.Sprintf("disk on fire %d", i+1) {
				t.Fatalf("after failure %d: %+v", i+1, r)
			}
			if secs == 0 {
				if r.UntilMS != nil || r.Active || c.InCooldown(ctx, coord.KindCompact, "s") {
					t.Fatalf("after failure %d (below the threshold): %+v", i+1, r)
				}
				continue
			}
			wantUntil := clock.now().Add(secs * time.Second).UnixMilli()
			if r.UntilMS == nil || *r.UntilMS != wantUntil || !r.Active || !c.InCooldown(ctx, coord.KindCompact, "s") {
				t.Fatalf("after failure %d: %+v, want until %d (+%ds) and active", i+1, r, wantUntil, secs)
			}
			if c.InCooldown(ctx, coord.KindMerge, "s") || c.InCooldown(ctx, coord.KindCompact, "other") {
				t.Fatal("cooldown leaks to another (kind, store)")
			}
		}
		clock.advance(21600*time.Second + time.Millisecond)
		if r := record(); r == nil || r.Active || c.InCooldown(ctx, coord.KindCompact, "s") {
			t.Fatalf("after the cooldown ran out: %+v", r)
		}
		run(nil)
		if r := record(); r != nil || c.InCooldown(ctx, coord.KindCompact, "s") {
			t.Fatalf("a success left the count: %+v", r)
		}
		run(errors.New("once more"))
		if r := record(); r == nil || r.Failures != 1 || r.UntilMS != nil {
			t.Fatalf("the count after a success starts again: %+v", r)
		}
	})
}

// TestTaskDependsOn: a task is not claimed before the tasks it depends on
// are done; one whose dependency failed (or is gone) fails without
// running, naming it, and so does a chain behind it.
func TestTaskDependsOn(t *testing.T) {
	each(t, func(t *testing.T, e env) {
		ctx := context.Background()
		c := e.connect(t)
		lease := grant(t, c, 60)
		if _, _, err := c.EnqueueOpts(ctx, coord.KindCompact, "s", "api", coord.EnqueueOptions{DependsOn: []string{"no-such-task"}}); !errors.Is(err, coord.ErrNoTask) {
			t.Fatalf("dependency on an unknown task: %v, want ErrNoTask", err)
		}
		merge, _, _ := c.Enqueue(ctx, coord.KindMerge, "s", "api")
		compact, created, err := c.EnqueueOpts(ctx, coord.KindCompact, "s", "api", coord.EnqueueOptions{DependsOn: []string{merge.ID}})
		if err != nil || !created || len(compact.DependsOn) != 1 || compact.DependsOn[0] != merge.ID {
			t.Fatalf("dependent %+v %v %v", compact, created, err)
		}
		index, _, _ := c.EnqueueOpts(ctx, coord.KindIndex, "s", "api", coord.EnqueueOptions{DependsOn: []string{compact.ID}})
		// A dependent task is a step of its chain, not the live (kind, store).
		if live, created, _ := c.Enqueue(ctx, coord.KindCompact, "s", "api"); !created || live.ID == compact.ID {
			t.Fatalf("enqueue of (compact, s): %+v", live)
		} else if _, err := c.Client().Delete(ctx, e.prefix+"/tasks/"+live.ID); err != nil { // out of the way
			t.Fatal(err)
		}
		for i, want := range []*coord.Task{merge, compact, index} {
			got, err := c.Claim(ctx, lease)
			if err != nil || got == nil {
				t.Fatalf("step %d: claim %+v %v", i, got, err)
			}
			if got.ID != want.ID {
				t.Fatalf("step %d: claimed %s %s, want %s %s", i, got.Kind, got.ID, want.Kind, want.ID)
			}
			if got.StartedAt == nil {
				t.Fatalf("step %d: no started_at: %+v", i, got)
			}
			if again, err := c.Claim(ctx, lease); err != nil || again != nil {
				t.Fatalf("step %d: claimed %+v while its dependency runs", i, again)
			}
			time.Sleep(2 * time.Millisecond)
			if err := c.Finish(ctx, got, nil, nil); err != nil {
				t.Fatal(err)
			}
			done := getTask(t, c, got.ID)
			if done.State != coord.StateDone || done.FinishedAt == nil || done.DurationMS == nil || *done.DurationMS != *done.FinishedAt-*done.StartedAt || done.Target != "s" || done.EnqueuedAt == 0 {
				t.Fatalf("step %d: finished %+v", i, done)
			}
		}
		// Failure propagates down a chain.
		root, _, _ := c.Enqueue(ctx, coord.KindMerge, "f", "api")
		mid, _, _ := c.EnqueueOpts(ctx, coord.KindCompact, "f", "api", coord.EnqueueOptions{DependsOn: []string{root.ID}})
		leaf, _, _ := c.EnqueueOpts(ctx, coord.KindIndex, "f", "api", coord.EnqueueOptions{DependsOn: []string{mid.ID}})
		for attempt := 1; attempt <= coord.MaxAttempts; attempt++ {
			rewind(t, c, e.prefix, root.ID)
			got, err := c.Claim(ctx, lease)
			if err != nil || got == nil || got.ID != root.ID {
				t.Fatalf("attempt %d: claim %+v %v", attempt, got, err)
			}
			if err := c.Finish(ctx, got, nil, errors.New("merge exploded")); err != nil {
				t.Fatal(err)
			}
		}
		if got, err := c.Claim(ctx, lease); err != nil || got != nil {
			t.Fatalf("claimed %+v after its dependency failed", got)
		}
		m, l := getTask(t, c, mid.ID), getTask(t, c, leaf.ID)
		if m.State != coord.StateFailed || !strings.Contains(m.Error, root.ID) || !strings.Contains(m.Error, "merge exploded") || m.Attempts != 0 {
			t.Fatalf("dependent of a failed task: %+v", m)
		}
		if l.State != coord.StateFailed || !strings.Contains(l.Error, mid.ID) {
			t.Fatalf("second step of a failed chain: %+v", l)
		}
		// A task that depends on a finished one is kept by pruning while
		// the dependent waits.
		lone, _, _ := c.Enqueue(ctx, coord.KindMerge, "p", "api")
		got, _ := c.Claim(ctx, lease)
		if got == nil || got.ID != lone.ID {
			t.Fatalf("claim %+v", got)
		}
		blocker, _, _ := c.Enqueue(ctx, coord.KindMerge, "q", "api") // queued: blocks nothing
		waiting, _, _ := c.EnqueueOpts(ctx, coord.KindCompact, "p", "api", coord.EnqueueOptions{DependsOn: []string{lone.ID, blocker.ID}})
		if err := c.Finish(ctx, got, nil, nil); err != nil {
			t.Fatal(err)
		}
		if _, err := c.PruneTasks(ctx, 0); err != nil {
			t.Fatal(err)
		}
		if _, err := c.GetTask(ctx, lone.ID); err != nil {
			t.Fatalf("pruned a task that %s depends on: %v", waiting.ID, err)
		}
	})
}

// TestTaskStoreLock: two tasks of one store never run at once: while one
// runs, the other is not claimed (by any runner), and tasks of other
// stores are.
func TestTaskStoreLock(t *testing.T) {
	each(t, func(t *testing.T, e env) {
		ctx := context.Background()
		c, other := e.connect(t), e.connect(t)
		merge, _, _ := c.Enqueue(ctx, coord.KindMerge, "s", "api")
		compact, _, _ := c.Enqueue(ctx, coord.KindCompact, "s", "api")
		elsewhere, _, _ := c.Enqueue(ctx, coord.KindCompact, "t", "api")
		first, err := c.Claim(ctx, grant(t, c, 60))
		if err != nil || first == nil || first.ID != merge.ID {
			t.Fatalf("first claim %+v %v", first, err)
		}
		second, err := other.Claim(ctx, grant(t, other, 60))
		if err != nil || second == nil || second.ID != elsewhere.ID {
			t.Fatalf("second claim %+v %v, want the other store's task %s (not %s)", second, err, elsewhere.ID, compact.ID)
		}
		if got, err := other.Claim(ctx, grant(t, other, 60)); err != nil || got != nil {
			t.Fatalf("claimed %+v while a task of its store runs", got)
		}
		if err := c.Finish(ctx, first, nil, nil); err != nil {
			t.Fatal(err)
		}
		if got, err := other.Claim(ctx, grant(t, other, 60)); err != nil || got == nil || got.ID != compact.ID {
			t.Fatalf("after the first finished: %+v %v", got, err)
		}
		// A runner that dies releases the store with its lease.
		dying := grant(t, c, 60)
		d1, _, _ := c.Enqueue(ctx, coord.KindMerge, "u", "api")
		d2, _, _ := c.Enqueue(ctx, coord.KindCompact, "u", "api")
		if got, _ := c.Claim(ctx, dying); got == nil || got.ID != d1.ID {
			t.Fatalf("claim %+v", got)
		}
		if _, err := c.Client().Revoke(ctx, dying); err != nil {
			t.Fatal(err)
		}
		if err := c.RequeueOrphans(ctx); err != nil {
			t.Fatal(err)
		}
		if got, _ := c.Claim(ctx, grant(t, c, 60)); got == nil || (got.ID != d1.ID && got.ID != d2.ID) {
			t.Fatalf("after the runner died: %+v", got)
		}
	})
}
