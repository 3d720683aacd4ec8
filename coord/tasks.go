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
	// KindRepair drops base fragments whose data files are missing from
	// storage, in one Lance commit. It runs only when asked for (a damaged
	// store is reported, never repaired behind the operator's back).
	KindRepair = "repair"
)

// Task is a maintenance task.
//
// Times in milliseconds (enqueued_at, started_at, finished_at, duration_ms)
// and target, detail and depends_on are the reference system's TaskRecord
// fields; created_at, updated_at and store are ours (store == target).
type Task struct {
	ID       string          `json:"id"`
	Kind     string          `json:"kind"`
	Store    string          `json:"store"`
	Target   string          `json:"target"`
	State    string          `json:"state"`
	Attempts int             `json:"attempts"`
	Error    string          `json:"error,omitempty"`
	Result   json.RawMessage `json:"result,omitempty"`
	// Detail is a one-line summary of what the task did (set when it
	// finished), e.g. "removed 3 / added 1 fragments".
	Detail string `json:"detail,omitempty"`
	Source string `json:"source"` // "api" or "scheduler"
	// DependsOn lists the tasks that must be done before this one is
	// claimed; if one fails (or is gone), this one fails naming it.
	DependsOn  []string  `json:"depends_on,omitempty"`
	CreatedAt  time.Time `json:"created_at"`
	UpdatedAt  time.Time `json:"updated_at"`
	NotBefore  time.Time `json:"not_before"`
	EnqueuedAt int64     `json:"enqueued_at"`          // Unix ms
	StartedAt  *int64    `json:"started_at,omitempty"` // Unix ms, of the latest attempt
	FinishedAt *int64    `json:"finished_at,omitempty"`
	DurationMS *int64    `json:"duration_ms,omitempty"` // finished_at - started_at
}

// decodeTask reads a stored task; records written before target and
// enqueued_at existed get them from store and created_at.
func decodeTask(b []byte) (*Task, error) {
	t := &Task{}
	if err := json.Unmarshal(b, t); err != nil {
		return nil, err
	}
	if t.Target == "" {
		t.Target = t.Store
	}
	if t.EnqueuedAt == 0 && !t.CreatedAt.IsZero() {
		t.EnqueuedAt = t.CreatedAt.UnixMilli()
	}
	return t, nil
}

// ErrNoTask is returned for an unknown task id.
var ErrNoTask = errors.New("coord: no such task")

// ErrClaimLost is returned by Finish when the caller no longer holds the
// task's claim: its lease lapsed and the task was requeued (and perhaps
// claimed by another runner). The outcome is not recorded.
var ErrClaimLost = errors.New("coord: task claim lost")

// MaxAttempts is how often a task runs before it fails for good.
const MaxAttempts = 3

// CooldownPolicy says when the scheduler leaves a (kind, store) alone:
// after AfterFailures failed attempts in a row, for Base, doubling with
// every further failure up to Max. A success clears the count; an
// explicit request (the API) is not held back by a cooldown.
type CooldownPolicy struct {
	AfterFailures int
	Base          time.Duration
	Max           time.Duration
}

// DefaultCooldownPolicy is 3 failures, then 600 s doubling to 21600 s.
var DefaultCooldownPolicy = CooldownPolicy{AfterFailures: 3, Base: 600 * time.Second, Max: 21600 * time.Second}

// duration is the cooldown after failures failed attempts in a row (0
// below the threshold).
func (p CooldownPolicy) duration(failures int) time.Duration {
	if failures < p.AfterFailures {
		return 0
	}
	d := p.Base
	for i := p.AfterFailures; i < failures && d < p.Max; i++ {
		d *= 2
	}
	return min(d, p.Max)
}

// CooldownRecord is the failure count of one (kind, store), in the
// reference's TaskCooldown shape: until_ms is null while the count is
// below the threshold. Active says whether the cooldown holds now.
type CooldownRecord struct {
	Kind       string `json:"kind"`
	Target     string `json:"target"`
	Failures   int    `json:"failures"`
	UntilMS    *int64 `json:"until_ms"`
	LastError  string `json:"last_error"`
	LastTaskID string `json:"last_task_id,omitempty"`
	Active     bool   `json:"active"`
}

// SetCooldownPolicy replaces the cooldown policy (zero fields keep the
// default's).
func (c *Coord) SetCooldownPolicy(p CooldownPolicy) {
	if p.AfterFailures <= 0 {
		p.AfterFailures = DefaultCooldownPolicy.AfterFailures
	}
	if p.Base <= 0 {
		p.Base = DefaultCooldownPolicy.Base
	}
	if p.Max <= 0 {
		p.Max = DefaultCooldownPolicy.Max
	}
	p.Max = max(p.Max, p.Base)
	c.mu.Lock()
	c.cooldown = p
	c.mu.Unlock()
}

// SetClock replaces the clock cooldowns are computed with (tests).
func (c *Coord) SetClock(now func() time.Time) {
	c.mu.Lock()
	c.clock = now
	c.mu.Unlock()
}

func (c *Coord) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.clock != nil {
		return c.clock()
	}
	return time.Now()
}

func (c *Coord) cooldownPolicy() CooldownPolicy {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cooldown.AfterFailures == 0 {
		return DefaultCooldownPolicy
	}
	return c.cooldown
}

func (c *Coord) taskKey(id string) string { return c.key("tasks", id) }
func (c *Coord) liveKey(kind, store string) string {
	return c.key("tasks-live", kind, store)
}
func (c *Coord) claimKey(id string) string { return c.key("tasks-claim", id) }
func (c *Coord) cooldownKey(kind, store string) string {
	return c.key("tasks-cooldown", kind, store)
}
func (c *Coord) lockKey(store string) string  { return c.key("tasks-lock", store) }
func (c *Coord) progressKey(id string) string { return c.key("tasks-progress", id) }
func msPtr(t time.Time) *int64                { ms := t.UnixMilli(); return &ms }
func (c *Coord) newTask(kind, store, source string) *Task {
	now := time.Now().UTC()
	return &Task{ID: uuid.Must(uuid.NewV7()).String(), Kind: kind, Store: store, Target: store, State: StateQueued,
		Source: source, CreatedAt: now, UpdatedAt: now, EnqueuedAt: now.UnixMilli()}
}

// Enqueue adds a task unless one of the same kind and store is queued or
// running; then it returns that one and created=false.
func (c *Coord) Enqueue(ctx context.Context, kind, store, source string) (*Task, bool, error) {
	return c.EnqueueOpts(ctx, kind, store, source, EnqueueOptions{})
}

// EnqueueOptions are the optional parts of an enqueue.
type EnqueueOptions struct {
	// DependsOn are tasks that must be done before this one is claimed.
	// A task with dependencies is not deduplicated against the live task
	// of its (kind, store): it is a step of a chain of its own.
	DependsOn []string
}

// EnqueueOpts is Enqueue with options. A dependency that does not exist
// is an error wrapping ErrNoTask.
func (c *Coord) EnqueueOpts(ctx context.Context, kind, store, source string, o EnqueueOptions) (*Task, bool, error) {
	t := c.newTask(kind, store, source)
	if len(o.DependsOn) > 0 {
		cmps := make([]clientv3.Cmp, 0, len(o.DependsOn))
		for _, d := range o.DependsOn {
			if d == "" {
				return nil, false, fmt.Errorf("%w: empty dependency id", ErrNoTask)
			}
			cmps = append(cmps, clientv3.Compare(clientv3.CreateRevision(c.taskKey(d)), ">", 0))
		}
		t.DependsOn = append([]string(nil), o.DependsOn...)
		b, _ := json.Marshal(t)
		// The dependencies must exist when the task is stored: one pruned in
		// between would fail it at once, which is at least reported.
		resp, err := c.cli.Txn(ctx).If(cmps...).Then(clientv3.OpPut(c.taskKey(t.ID), string(b))).Commit()
		if err != nil {
			return nil, false, fmt.Errorf("coord: enqueue %s %s: %w", kind, store, err)
		}
		if !resp.Succeeded {
			return nil, false, fmt.Errorf("%w: depends_on %v names a task that does not exist", ErrNoTask, o.DependsOn)
		}
		return t, true, nil
	}
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
	r, err := c.cooldownRecord(ctx, kind, store)
	return err == nil && r != nil && r.Active
}

func (c *Coord) cooldownRecord(ctx context.Context, kind, store string) (*CooldownRecord, error) {
	resp, err := c.cli.Get(ctx, c.cooldownKey(kind, store))
	if err != nil {
		return nil, err
	}
	if len(resp.Kvs) == 0 {
		return nil, nil
	}
	r := &CooldownRecord{}
	if json.Unmarshal(resp.Kvs[0].Value, r) != nil {
		return nil, nil // a record of an older version: no count to go on
	}
	r.Active = r.UntilMS != nil && c.now().UnixMilli() < *r.UntilMS
	return r, nil
}

// Cooldowns lists the (kind, store) pairs with failures counted, active
// cooldowns first, then by kind and store.
func (c *Coord) Cooldowns(ctx context.Context) ([]CooldownRecord, error) {
	resp, err := c.cli.Get(ctx, c.key("tasks-cooldown")+"/", clientv3.WithPrefix())
	if err != nil {
		return nil, fmt.Errorf("coord: list cooldowns: %w", err)
	}
	now := c.now().UnixMilli()
	out := []CooldownRecord{}
	for _, kv := range resp.Kvs {
		var r CooldownRecord
		if json.Unmarshal(kv.Value, &r) != nil || r.Failures == 0 {
			continue
		}
		r.Active = r.UntilMS != nil && now < *r.UntilMS
		out = append(out, r)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Active != out[j].Active {
			return out[i].Active
		}
		if out[i].Kind != out[j].Kind {
			return out[i].Kind < out[j].Kind
		}
		return out[i].Target < out[j].Target
	})
	return out, nil
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
	t, err := decodeTask(resp.Kvs[0].Value)
	if err != nil {
		return nil, fmt.Errorf("coord: decode task %s: %w", id, err)
	}
	return t, nil
}

// ListTasks returns tasks, newest first, at most limit (0: all).
func (c *Coord) ListTasks(ctx context.Context, limit int) ([]*Task, error) {
	resp, err := c.cli.Get(ctx, c.key("tasks")+"/", clientv3.WithPrefix(), clientv3.WithSort(clientv3.SortByKey, clientv3.SortDescend), clientv3.WithLimit(int64(limit)))
	if err != nil {
		return nil, fmt.Errorf("coord: list tasks: %w", err)
	}
	out := make([]*Task, 0, len(resp.Kvs))
	for _, kv := range resp.Kvs {
		if t, err := decodeTask(kv.Value); err == nil {
			out = append(out, t)
		}
	}
	return out, nil
}

// CountTasks returns how many tasks are stored (queued, running and the
// kept history).
func (c *Coord) CountTasks(ctx context.Context) (int, error) {
	resp, err := c.cli.Get(ctx, c.key("tasks")+"/", clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil {
		return 0, fmt.Errorf("coord: count tasks: %w", err)
	}
	return int(resp.Count), nil
}

// LatestTask returns the newest task of (kind, store): the live one if
// any, else the newest in the history; nil when there is none.
func (c *Coord) LatestTask(ctx context.Context, kind, store string) (*Task, error) {
	resp, err := c.cli.Get(ctx, c.liveKey(kind, store))
	if err != nil {
		return nil, fmt.Errorf("coord: latest task: %w", err)
	}
	if len(resp.Kvs) > 0 {
		if t, err := c.GetTask(ctx, string(resp.Kvs[0].Value)); err == nil {
			return t, nil
		}
	}
	ts, err := c.ListTasks(ctx, 0)
	if err != nil {
		return nil, err
	}
	for _, t := range ts {
		if t.Kind == kind && t.Store == store {
			return t, nil
		}
	}
	return nil, nil
}

// Claim takes the oldest runnable queued task for a runner holding lease:
// the claim key is bound to the lease, so a runner that dies releases it.
// A task is runnable when its backoff has passed, every task it depends on
// is done, and no other task of its store is running (the store's lock,
// taken with the claim and bound to the same lease). A queued task whose
// dependency failed or is gone fails here, naming it. Claim returns nil
// when there is nothing to run.
func (c *Coord) Claim(ctx context.Context, lease clientv3.LeaseID) (*Task, error) {
	resp, err := c.cli.Get(ctx, c.key("tasks")+"/", clientv3.WithPrefix())
	if err != nil {
		return nil, fmt.Errorf("coord: claim: %w", err)
	}
	locks, err := c.cli.Get(ctx, c.key("tasks-lock")+"/", clientv3.WithPrefix(), clientv3.WithKeysOnly())
	if err != nil {
		return nil, fmt.Errorf("coord: claim: %w", err)
	}
	locked := map[string]bool{}
	for _, kv := range locks.Kvs {
		locked[string(kv.Key)] = true
	}
	type cand struct {
		t   *Task
		rev int64
	}
	var cands []cand
	byID := map[string]*Task{}
	now := time.Now()
	for _, kv := range resp.Kvs {
		t, err := decodeTask(kv.Value)
		if err != nil {
			continue
		}
		byID[t.ID] = t
		if t.State == StateQueued && !now.Before(t.NotBefore) {
			cands = append(cands, cand{t, kv.ModRevision})
		}
	}
	sort.Slice(cands, func(i, j int) bool { return cands[i].t.ID < cands[j].t.ID })
	for _, cd := range cands {
		t := cd.t
		if blocked, failure := dependencyState(t, byID); failure != "" {
			// Fail it now; a chain behind it fails on this pass as well,
			// since tasks are visited oldest first.
			ft, ok, err := c.failQueued(ctx, t, cd.rev, failure)
			if err != nil {
				return nil, err
			}
			if ok {
				byID[t.ID] = ft
			}
			continue
		} else if blocked {
			continue
		}
		if locked[c.lockKey(t.Store)] {
			continue
		}
		start := time.Now().UTC()
		t.State, t.Attempts, t.UpdatedAt = StateRunning, t.Attempts+1, start
		t.StartedAt, t.FinishedAt, t.DurationMS = msPtr(start), nil, nil
		b, _ := json.Marshal(t)
		k := c.taskKey(t.ID)
		tr, err := c.cli.Txn(ctx).
			If(clientv3.Compare(clientv3.ModRevision(k), "=", cd.rev),
				clientv3.Compare(clientv3.CreateRevision(c.claimKey(t.ID)), "=", 0),
				clientv3.Compare(clientv3.CreateRevision(c.lockKey(t.Store)), "=", 0)).
			Then(clientv3.OpPut(k, string(b)),
				clientv3.OpPut(c.claimKey(t.ID), claimToken(t), clientv3.WithLease(lease)),
				clientv3.OpPut(c.lockKey(t.Store), t.ID, clientv3.WithLease(lease))).Commit()
		if err != nil {
			return nil, fmt.Errorf("coord: claim: %w", err)
		}
		if tr.Succeeded {
			return t, nil
		}
	}
	return nil, nil
}

// dependencyState says whether t waits for a dependency (blocked) or must
// fail because one failed or is gone (failure, the error to record).
func dependencyState(t *Task, byID map[string]*Task) (blocked bool, failure string) {
	for _, d := range t.DependsOn {
		dep, ok := byID[d]
		switch {
		case !ok:
			return false, fmt.Sprintf("dependency task %s no longer exists", d)
		case dep.State == StateFailed:
			msg := fmt.Sprintf("dependency task %s (%s of %s) failed", d, dep.Kind, dep.Store)
			if dep.Error != "" {
				msg += ": " + dep.Error
			}
			return false, msg
		case dep.State != StateDone:
			blocked = true
		}
	}
	return blocked, ""
}

// failQueued marks a queued task failed without running it, if it is
// unchanged since read (rev).
func (c *Coord) failQueued(ctx context.Context, queued *Task, rev int64, msg string) (*Task, bool, error) {
	now := time.Now().UTC()
	t := *queued
	t.State, t.Error, t.UpdatedAt, t.FinishedAt = StateFailed, msg, now, msPtr(now)
	b, _ := json.Marshal(&t)
	k := c.taskKey(t.ID)
	live := c.liveKey(t.Kind, t.Store)
	tr, err := c.cli.Txn(ctx).If(clientv3.Compare(clientv3.ModRevision(k), "=", rev)).
		Then(clientv3.OpPut(k, string(b)),
			clientv3.OpTxn([]clientv3.Cmp{clientv3.Compare(clientv3.Value(live), "=", t.ID)}, []clientv3.Op{clientv3.OpDelete(live)}, nil)).Commit()
	if err != nil {
		return nil, false, fmt.Errorf("coord: fail task %s: %w", t.ID, err)
	}
	return &t, tr.Succeeded, nil
}

// claimToken identifies one claim of a task: every successful Claim bumps
// the attempts, so the attempt number tells the claims of a task apart.
func claimToken(t *Task) string { return strconv.Itoa(t.Attempts) }

// maxErrorLen bounds the last error a cooldown record keeps.
const maxErrorLen = 1000

// Finish records a task's outcome: done; or queued again with backoff; or
// failed for good after MaxAttempts. A failure counts towards the
// (kind, store)'s cooldown, a success clears it. It returns ErrClaimLost,
// recording nothing, when t's claim is no longer held (the runner's lease
// lapsed; the task was requeued or claimed again).
func (c *Coord) Finish(ctx context.Context, t *Task, result any, runErr error) error {
	now := time.Now().UTC()
	t.UpdatedAt = now
	live := c.liveKey(t.Kind, t.Store)
	// The live key is this task's only if it holds its id (a task with
	// dependencies never took it).
	dropLive := clientv3.OpTxn([]clientv3.Cmp{clientv3.Compare(clientv3.Value(live), "=", t.ID)}, []clientv3.Op{clientv3.OpDelete(live)}, nil)
	ops := []clientv3.Op{clientv3.OpDelete(c.claimKey(t.ID)), clientv3.OpDelete(c.lockKey(t.Store)), clientv3.OpDelete(c.progressKey(t.ID))}
	finished := func() {
		t.FinishedAt = msPtr(now)
		if t.StartedAt != nil {
			d := max(0, *t.FinishedAt-*t.StartedAt)
			t.DurationMS = &d
		}
	}
	cdKey := c.cooldownKey(t.Kind, t.Store)
	switch {
	case runErr == nil:
		t.State, t.Error = StateDone, ""
		if result != nil {
			t.Result, _ = json.Marshal(result)
		}
		finished()
		ops = append(ops, dropLive, clientv3.OpDelete(cdKey))
	default:
		if t.Attempts < MaxAttempts {
			t.State, t.Error = StateQueued, runErr.Error()
			t.NotBefore = now.Add(time.Duration(1<<t.Attempts) * 5 * time.Second)
		} else {
			t.State, t.Error = StateFailed, runErr.Error()
			finished()
			ops = append(ops, dropLive)
		}
		prev, _ := c.cooldownRecord(ctx, t.Kind, t.Store)
		r := CooldownRecord{Kind: t.Kind, Target: t.Store, Failures: 1, LastError: runErr.Error(), LastTaskID: t.ID}
		if prev != nil {
			r.Failures = prev.Failures + 1
		}
		if len(r.LastError) > maxErrorLen {
			r.LastError = r.LastError[:maxErrorLen]
		}
		if d := c.cooldownPolicy().duration(r.Failures); d > 0 {
			r.UntilMS = msPtr(c.now().Add(d))
		}
		b, _ := json.Marshal(r)
		ops = append(ops, clientv3.OpPut(cdKey, string(b)))
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
		if errors.Is(err, ErrClaimLost) {
			return err
		}
		return fmt.Errorf("coord: finish task %s: %w", t.ID, err)
	}
	return nil
}

// SetProgress records how far a running task has got (any JSON value);
// Finish removes it.
func (c *Coord) SetProgress(ctx context.Context, id string, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	if _, err := c.cli.Put(ctx, c.progressKey(id), string(b)); err != nil {
		return fmt.Errorf("coord: task progress: %w", err)
	}
	return nil
}

// Progress returns what SetProgress last recorded for a task (nil: none).
func (c *Coord) Progress(ctx context.Context, id string) (json.RawMessage, error) {
	resp, err := c.cli.Get(ctx, c.progressKey(id))
	if err != nil {
		return nil, fmt.Errorf("coord: task progress: %w", err)
	}
	if len(resp.Kvs) == 0 {
		return nil, nil
	}
	return json.RawMessage(resp.Kvs[0].Value), nil
}

// RequeueOrphans puts running tasks whose claim is gone (their runner died)
// back in the queue.
func (c *Coord) RequeueOrphans(ctx context.Context) error {
	resp, err := c.cli.Get(ctx, c.key("tasks")+"/", clientv3.WithPrefix())
	if err != nil {
		return err
	}
	for _, kv := range resp.Kvs {
		t, err := decodeTask(kv.Value)
		if err != nil || t.State != StateRunning {
			continue
		}
		cr, err := c.cli.Get(ctx, c.claimKey(t.ID), clientv3.WithCountOnly())
		if err != nil || cr.Count > 0 {
			continue
		}
		t.State, t.UpdatedAt = StateQueued, time.Now().UTC()
		b, _ := json.Marshal(t)
		_, _ = c.cli.Txn(ctx).If(clientv3.Compare(clientv3.ModRevision(string(kv.Key)), "=", kv.ModRevision)).
			Then(clientv3.OpPut(string(kv.Key), string(b)), clientv3.OpDelete(c.progressKey(t.ID))).Commit()
	}
	return nil
}

// PruneTasks deletes finished (done or failed) tasks beyond the keep newest
// ones, so the queue that Claim scans stays small. A task that a queued or
// running task depends on is kept.
func (c *Coord) PruneTasks(ctx context.Context, keep int) (int, error) {
	resp, err := c.cli.Get(ctx, c.key("tasks")+"/", clientv3.WithPrefix(), clientv3.WithSort(clientv3.SortByKey, clientv3.SortDescend))
	if err != nil {
		return 0, fmt.Errorf("coord: prune tasks: %w", err)
	}
	tasks := make([]*Task, len(resp.Kvs))
	needed := map[string]bool{}
	for i, kv := range resp.Kvs {
		t, err := decodeTask(kv.Value)
		if err != nil {
			continue
		}
		tasks[i] = t
		if t.State == StateQueued || t.State == StateRunning {
			for _, d := range t.DependsOn {
				needed[d] = true
			}
		}
	}
	pruned, finished := 0, 0
	for i, kv := range resp.Kvs {
		t := tasks[i]
		if t == nil || (t.State != StateDone && t.State != StateFailed) {
			continue
		}
		if finished++; finished <= keep || needed[t.ID] {
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
