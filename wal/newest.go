package wal

import (
	"context"
	"strings"
)

// Newest is the one rule by which a key's newest write wins in the WAL
// tier: in a memtable being sealed, in a generation, across the
// generations of a shard and across shards. Writes are offered newest
// first (generations in NewestFirst order; within a generation or a
// memtable, later rows are newer, so rows are offered last to first), and
// the first offer of a key is its newest write.
type Newest struct {
	seen  map[string]struct{}
	clone bool
}

// NewNewest returns an empty Newest sized for about n keys. With clone it
// keeps copies of the keys it is offered, so that they pin no batch they
// were read from (a merge releases each generation after writing it).
func NewNewest(n int, clone bool) *Newest {
	return &Newest{seen: make(map[string]struct{}, n), clone: clone}
}

// Offer reports whether this write of key, offered in newest-first order,
// is its newest: whether key was not offered before.
func (n *Newest) Offer(key string) bool {
	if _, dup := n.seen[key]; dup {
		return false
	}
	if n.clone {
		key = strings.Clone(key)
	}
	n.seen[key] = struct{}{}
	return true
}

// offerRows offers the keys of rows [0, rows) of one generation or batch,
// last to first, and returns which rows are newest; nil when all are.
func (n *Newest) offerRows(rows int, key func(int) string) []bool {
	keep := make([]bool, rows)
	all := true
	for r := rows - 1; r >= 0; r-- {
		keep[r] = n.Offer(key(r))
		all = all && keep[r]
	}
	if all {
		return nil
	}
	return keep
}

// Keys returns the set of keys offered so far; the caller must not change
// it.
func (n *Newest) Keys() map[string]struct{} { return n.seen }

// GenRef names a generation of a shard.
type GenRef struct {
	Shard string
	Gen   Generation
}

// Key returns the object key of the generation's file.
func (r GenRef) Key() string { return GenerationKey(r.Shard, r.Gen) }

// NewestFirst orders generations, of one shard or many, newest first.
// Within a shard the generation number decides (a shard seals in number
// order); across shards the seal time does, and at equal times the shard
// given later. refs must list each shard's generations in ascending
// number order (as a manifest does); the result is a new slice.
func NewestFirst(refs []GenRef) []GenRef {
	out := make([]GenRef, len(refs))
	for i, k := range newestFirst(refs) {
		out[i] = refs[k]
	}
	return out
}

// newestFirst returns the indexes of refs in NewestFirst order: a merge of
// the shards' runs, each walked from its newest end, so that a clock step
// between two seals of one shard never reorders them.
func newestFirst(refs []GenRef) []int {
	type run struct{ from, to int } // refs[from:to], taken from the end
	var runs []run
	for i := 0; i < len(refs); {
		j := i + 1
		for j < len(refs) && refs[j].Shard == refs[i].Shard && refs[j].Gen.Generation > refs[j-1].Gen.Generation {
			j++
		}
		runs = append(runs, run{i, j})
		i = j
	}
	out := make([]int, 0, len(refs))
	for len(out) < len(refs) {
		best := -1
		for k, r := range runs {
			if r.to == r.from {
				continue
			}
			if best < 0 || !refs[r.to-1].Gen.SealedAt.Before(refs[runs[best].to-1].Gen.SealedAt) {
				best = k
			}
		}
		runs[best].to--
		out = append(out, runs[best].to)
	}
	return out
}

// Row is one row of a loaded generation.
type Row struct {
	Gen *LoadedGeneration
	Row int
}

// Key returns the row's key.
func (r Row) Key() string { return r.Gen.Key(r.Row) }

// NewestRows returns the newest row of every key in gens (loaded
// generations, in any order: NewestFirst orders them), oldest generation
// first and in row order within one, and the set of their keys.
func NewestRows(gens []*LoadedGeneration) ([]Row, map[string]struct{}) {
	refs := make([]GenRef, len(gens))
	total := 0
	for i, g := range gens {
		refs[i] = g.Ref
		total += g.NumRows()
	}
	n := NewNewest(total, false) // the loaded generations hold the keys
	out := make([]Row, 0, total)
	for _, k := range newestFirst(refs) {
		g := gens[k]
		for r := g.NumRows() - 1; r >= 0; r-- {
			if n.Offer(g.Key(r)) {
				out = append(out, Row{g, r})
			}
		}
	}
	// Newest first and rows last to first; the callers want the reverse.
	for i, j := 0, len(out)-1; i < j; i, j = i+1, j-1 {
		out[i], out[j] = out[j], out[i]
	}
	return out, n.Keys()
}

// Loader returns a generation loaded (from a cache, or LoadGeneration).
type Loader func(ctx context.Context, ref GenRef) (*LoadedGeneration, error)

// FindNewest returns the newest row of key among refs (listed as
// NewestFirst takes them), loading generations newest first and only those
// whose key range may hold key.
func FindNewest(ctx context.Context, refs []GenRef, key string, load Loader) (Row, bool, error) {
	for _, ref := range NewestFirst(refs) {
		if g := ref.Gen; g.MinID != "" && (key < g.MinID || key > g.MaxID) {
			continue
		}
		g, err := load(ctx, ref)
		if err != nil {
			return Row{}, false, err
		}
		if row, ok := g.Lookup(key); ok {
			return Row{g, row}, true, nil
		}
	}
	return Row{}, false, nil
}
