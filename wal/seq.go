package wal

import (
	"errors"
	"fmt"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// SeqShift is where a sequence number splits: a row's sequence number is
// its entry's WAL position shifted left by SeqShift, plus the row's number
// within the entry (counted across the entry's batches). Positions are
// dense and never reused in a shard, and replay adopts an entry at the
// position it was written at, so a row keeps its number across seals,
// merges, claims and restarts (doc.go, "Sequence numbers").
const SeqShift = 24

// MaxEntryRows is the most rows an entry can number.
const MaxEntryRows = 1 << SeqShift

// ErrTooManyRows is returned for an append of MaxEntryRows rows or more.
var ErrTooManyRows = errors.New("wal: too many rows in one append")

// Seq is the sequence number of row row of the entry at position pos.
func Seq(pos uint64, row int64) int64 { return int64(pos<<SeqShift) | row }

// SeqPosition is the WAL position of the entry that holds seq's row.
func SeqPosition(seq int64) uint64 { return uint64(seq) >> SeqShift }

// genColumns says what a seal does with named columns.
type genColumns struct {
	key string // keep the newest row per key
	seq string // fill with sequence numbers ("" none)
}

func (w *Writer) genColumns() genColumns {
	return genColumns{key: w.opts.KeyColumn, seq: w.opts.SeqColumn}
}

// withSeq returns rec with column c replaced by seq0, seq0+1, ...
func withSeq(rec arrow.RecordBatch, c int, seq0 int64) (arrow.RecordBatch, error) {
	if rec.Schema().Field(c).Type.ID() != arrow.INT64 {
		return nil, fmt.Errorf("wal: sequence column %q is %s, not int64", rec.Schema().Field(c).Name, rec.Schema().Field(c).Type)
	}
	n := int(rec.NumRows())
	b := array.NewInt64Builder(memory.DefaultAllocator)
	defer b.Release()
	b.Reserve(n)
	for i := 0; i < n; i++ {
		b.UnsafeAppend(seq0 + int64(i))
	}
	col := b.NewArray()
	defer col.Release()
	cols := make([]arrow.Array, rec.NumCols())
	for i := range cols {
		cols[i] = rec.Column(i)
	}
	cols[c] = col
	return array.NewRecordBatch(rec.Schema(), cols, rec.NumRows()), nil
}

// TailBatch is acknowledged rows of one entry not yet known to be sealed:
// row i has sequence number Seq0+i.
type TailBatch struct {
	Seq0 int64
	Rec  arrow.RecordBatch
}

// Position is the WAL position of the batch's entry.
func (b TailBatch) Position() uint64 { return SeqPosition(b.Seq0) }

// Tail returns the writer's acknowledged rows that may not be in a
// committed generation yet, oldest first, retained (the caller releases
// each Rec). They cover the positions from the first batch's to the last
// acknowledged one without a gap, and the first is at most one above the
// replay_after of the manifest Manifest returned before the call: a
// seal's rows leave the tail only after its manifest is published. So a
// reader that takes the tail first and then a manifest at least as new
// sees every acknowledged row of the shard, in a generation or here.
// Without rows it returns nil.
func (w *Writer) Tail() []TailBatch {
	w.tailMu.Lock()
	defer w.tailMu.Unlock()
	n := len(w.mem.batches)
	if w.tailSealing != nil {
		n += len(w.tailSealing.batches)
	}
	if n == 0 {
		return nil
	}
	out := make([]TailBatch, 0, n)
	for _, m := range []*memtable{w.tailSealing, &w.mem} {
		if m == nil {
			continue
		}
		for i, b := range m.batches {
			b.Retain()
			out = append(out, TailBatch{Seq0: m.seq0[i], Rec: b})
		}
	}
	return out
}
