package coord

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"time"

	"github.com/google/uuid"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// Task states.
const (
	StateQueued  = "queued"
	StateRunning = "running"
	StateDone    = "done"
	StateFailed  = "failed"
)

// Task kinds.
const (
	KindMerge   = "merge"
	KindCompact = "compact"
	// KindIndex brings a store's BTree indexes up to date (one segment per
	// column); the scheduler enqueues it after each compaction.
	KindIndex = "index"
	// KindCleanup removes a store's old base versions and the files only
	// they reference; the scheduler enqueues it after each compaction and
	// on a period.
	KindCleanup = "cleanup"
)

// Task is a maintenance task.
type Task struct {
	ID        string          `json:"id"`
	Kind      string          `json:"kind"`
	Store     string          `json:"store"`
	State     string          `json:"state"`
	Attempts  int             `json:"attempts"`
	Error     string          `json:"error,omitempty"`
	Result    json.RawMessage `json:"result,omitempty"`
	Source    string          `json:"source"` // "api" or "scheduler"
	CreatedAt time.Time       `json:"created_at"`
	UpdatedAt time.Time       `json:"updated_at"`
	NotBefore time.Time       `json:"not_before"`
}

// ErrNoTask is returned for an unknown task id.
var ErrNoTask = errors.New("coord: no such task")

// ErrClaimLost is returned by Finish when the caller no longer holds the
// task's claim: its lease lapsed and the task was requeued (and perhaps
// claimed by another runner). The outcome is not recorded.
var ErrClaimLost = errors.New("coord: task claim lost")

// MaxAttempts is how often a task runs before it fails for good.
const MaxAttempts = 3

// Cooldown is how long the scheduler leaves (kind, store) alone after a
// task failed for good.
const Cooldown = 10 * time.Minute

func (c *Coord) taskKey(id string) string { return c.key("tasks", id) }
func (c *Coord) liveKey(kind, store string) string {
	return c.key("tasks-live", kind, store)
}
func (c *Coord) claimKey(id string) string { return c.key("tasks-claim", id) }
func (c *Coord) cooldownKey(kind, store string) string {
	return c.key("tasks-cooldown", kind, store)
}

// Enqueue adds a task unless one of the same kind and store is queued or
// running; then it returns that one and created=false.
func (c *Coord) Enqueue(ctx context.Context, kind, store, source string) (*Task, bool, error) {
	now := time.Now().UTC()
	t := &Task{ID: uuid.Must(uuid.NewV7()).String(), Kind: kind, Store: store, State: StateQueued, Source: source, CreatedAt: now, UpdatedAt: now}
	b, _ := json.Marshal(t)
	live := c.liveKey(kind, store)
	resp, err := c.cli.Txn(ctx).
		If(clientv3.Compare(clientv3.CreateRevision(live), "=", 0)).
		Then(clientv3.OpPut(c.taskKey(t.ID), string(b)), clientv3.OpPut(live, t.ID)).
		Else(clientv3.OpGet(live)).Commit()
	if err != nil {
		return nil, false, fmt.Errorf("coord: enqueue %s %s: %w", kind, store, err)
	}
	if resp.Succeeded {
		return t, true, nil
	}
	kvs := resp.Responses[0].GetResponseRange().Kvs
	if len(kvs) == 0 {
		return nil, false, fmt.Errorf("coord: enqueue %s %s: live task vanished; retry", kind, store)
	}
	existing, err := c.GetTask(ctx, string(kvs[0].Value))
	return existing, false, err
}

// InCooldown reports whether the scheduler should leave (kind, store) alone.
func (c *Coord) InCooldown(ctx context.Context, kind, store string) bool {
	resp, err := c.cli.Get(ctx, c.cooldownKey(kind, store), clientv3.WithCountOnly())
	return err == nil && resp.Count > 0
}

// GetTask returns one task.
func (c *Coord) GetTask(ctx context.Context, id string) (*Task, error) {
	resp, err := c.cli.Get(ctx, c.taskKey(id))
	if err != nil {
		return nil, fmt.Errorf("coord: get task: %w", err)
	}
	if len(resp.Kvs) == 0 {
		return nil, fmt.Errorf("%w: %s", ErrNoTask, id)
	}
	t := &Task{}
	if err := json.Unmarshal(resp.Kvs[0].Value, t); err != nil {
		return nil, fmt.Errorf("coord: decode task %s: %w", id, err)
	}
	return t, nil
}

// ListTasks returns tasks, newest first, at most limit.
func (c *Coord) ListTasks(ctx context.Context, limit int) ([]*Task, error) {
	resp, err := c.cli.Get(ctx, c.key("tasks")+"/", clientv3.WithPrefix(), clientv3.WithSort(clientv3.SortByKey, clientv3.SortDescend), clientv3.WithLimit(int64(limit)))
	if err != nil {
		return nil, fmt.Errorf("coord: list tasks: %w", err)
	}
	out := make([]*Task, 0, len(resp.Kvs))
	for _, kv := range resp.Kvs {
		t := &Task{}
		if json.Unmarshal(kv.Value, t) == nil {
			out = append(out, t)
		}
	}
	return out, nil
}

// Claim takes the oldest runnable queued task for a runner holding lease:
// the claim key is bound to the lease, so a runner that dies releases it.
// It returns nil when there is nothing to run.
func (c *Coord) Claim(ctx context.Context, lease clientv3.LeaseID) (*Task, error) {
	resp, err := c.cli.Get(ctx, c.key("tasks")+"/", clientv3.WithPrefix())
	if err != nil {
		return nil, fmt.Errorf("coord: claim: %w", err)
	}
	type cand struct {
		t   *Task
		rev int64
	}
	var cands []cand
	now := time.Now()
	for _, kv := range resp.Kvs {
		t := &Task{}
		if json.Unmarshal(kv.Value, t) == nil && t.State == StateQueued && !now.Before(t.NotBefore) {
			cands = append(cands, cand{t, kv.ModRevision})
		}
	}
	sort.Slice(cands, func(i, j int) bool { return cands[i].t.ID < cands[j].t.ID })
	for _, cd := range cands {
		t := cd.t
		t.State, t.Attempts, t.UpdatedAt = StateRunning, t.Attempts+1, time.Now().UTC()
		b, _ := json.Marshal(t)
		k := c.taskKey(t.ID)
		tr, err := c.cli.Txn(ctx).
			If(clientv3.Compare(clientv3.ModRevision(k), "=", cd.rev), clientv3.Compare(clientv3.CreateRevision(c.claimKey(t.ID)), "=", 0)).
			Then(clientv3.OpPut(k, string(b)), clientv3.OpPut(c.claimKey(t.ID), claimToken(t), clientv3.WithLease(lease))).Commit()
		if err != nil {
			return nil, fmt.Errorf("coord: claim: %w", err)
		}
		if tr.Succeeded {
			return t, nil
		}
	}
	return nil, nil
}

// claimToken identifies one claim of a task: every successful Claim bumps
// the attempts, so the attempt number tells the claims of a task apart.
func claimToken(t *Task) string { return strconv.Itoa(t.Attempts) }

// Finish records a task's outcome: done; or queued again with backoff; or
// failed for good after MaxAttempts, with a cooldown for the scheduler. It
// returns ErrClaimLost, recording nothing, when t's claim is no longer held
// (the runner's lease lapsed; the task was requeued or claimed again).
func (c *Coord) Finish(ctx context.Context, t *Task, result any, runErr error) error {
	t.UpdatedAt = time.Now().UTC()
	ops := []clientv3.Op{clientv3.OpDelete(c.claimKey(t.ID))}
	var cooldown clientv3.LeaseID
	switch {
	case runErr == nil:
		t.State, t.Error = StateDone, ""
		if result != nil {
			t.Result, _ = json.Marshal(result)
		}
		ops = append(ops, clientv3.OpDelete(c.liveKey(t.Kind, t.Store)))
	case t.Attempts < MaxAttempts:
		t.State, t.Error = StateQueued, runErr.Error()
		t.NotBefore = t.UpdatedAt.Add(time.Duration(1<<t.Attempts) * 5 * time.Second)
	default:
		t.State, t.Error = StateFailed, runErr.Error()
		ops = append(ops, clientv3.OpDelete(c.liveKey(t.Kind, t.Store)))
		if lease, err := c.cli.Grant(ctx, int64(Cooldown/time.Second)); err == nil {
			cooldown = lease.ID
			ops = append(ops, clientv3.OpPut(c.cooldownKey(t.Kind, t.Store), t.ID, clientv3.WithLease(lease.ID)))
		}
	}
	b, _ := json.Marshal(t)
	ops = append(ops, clientv3.OpPut(c.taskKey(t.ID), string(b)))
	// A missing claim key fails a value comparison, so a lapsed claim and
	// another runner's claim are both refused.
	resp, err := c.cli.Txn(ctx).If(clientv3.Compare(clientv3.Value(c.claimKey(t.ID)), "=", claimToken(t))).Then(ops...).Commit()
	if err == nil && !resp.Succeeded {
		err = fmt.Errorf("%w: task %s attempt %d", ErrClaimLost, t.ID, t.Attempts)
	}
	if err != nil {
		if cooldown != 0 {
			_, _ = c.cli.Revoke(context.WithoutCancel(ctx), cooldown)
		}
		if errors.Is(err, ErrClaimLost) {
			return err
		}
		return fmt.Errorf("coord: finish task %s: %w", t.ID, err)
	}
	return nil
}

// RequeueOrphans puts running tasks whose claim is gone (their runner died)
// back in the queue.
func (c *Coord) RequeueOrphans(ctx context.Context) error {
	resp, err := c.cli.Get(ctx, c.key("tasks")+"/", clientv3.WithPrefix())
	if err != nil {
		return err
	}
	for _, kv := range resp.Kvs {
		t := &Task{}
		if json.Unmarshal(kv.Value, t) != nil || t.State != StateRunning {
			continue
		}
		cr, err := c.cli.Get(ctx, c.claimKey(t.ID), clientv3.WithCountOnly())
		if err != nil || cr.Count > 0 {
			continue
		}
		t.State, t.UpdatedAt = StateQueued, time.Now().UTC()
		b, _ := json.Marshal(t)
		_, _ = c.cli.Txn(ctx).If(clientv3.Compare(clientv3.ModRevision(string(kv.Key)), "=", kv.ModRevision)).
			Then(clientv3.OpPut(string(kv.Key), string(b))).Commit()
	}
	return nil
}

// PruneTasks deletes finished (done or failed) tasks beyond the keep newest
// ones, so the queue that Claim scans stays small.
func (c *Coord) PruneTasks(ctx context.Context, keep int) (int, error) {
	resp, err := c.cli.Get(ctx, c.key("tasks")+"/", clientv3.WithPrefix(), clientv3.WithSort(clientv3.SortByKey, clientv3.SortDescend))
	if err != nil {
		return 0, fmt.Errorf("coord: prune tasks: %w", err)
	}
	pruned, finished := 0, 0
	for _, kv := range resp.Kvs {
		t := &Task{}
		if json.Unmarshal(kv.Value, t) != nil || (t.State != StateDone && t.State != StateFailed) {
			continue
		}
		if finished++; finished <= keep {
			continue
		}
		// Only if unchanged since read: never delete a task someone requeued.
		tr, err := c.cli.Txn(ctx).If(clientv3.Compare(clientv3.ModRevision(string(kv.Key)), "=", kv.ModRevision)).
			Then(clientv3.OpDelete(string(kv.Key))).Commit()
		if err != nil {
			return pruned, fmt.Errorf("coord: prune tasks: %w", err)
		}
		if tr.Succeeded {
			pruned++
		}
	}
	return pruned, nil
}
