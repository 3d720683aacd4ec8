package faults

import (
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
)

// The ledger: what the driver sent and what the worker acknowledged.
//
// Each appender owns its ids ("a03-0000042": appender 3, its 42nd id) and
// writes them one request after the other, so the order of its writes to
// an id is the order it sent them. Every write carries a sequence number
// in its content ("a03-0000042@917|xxx..."), so a row read back names the
// write it came from.

// idState is what the ledger knows of one id.
type idState struct {
	acked    uint64   // sequence of its newest acknowledged write; 0: never acknowledged
	after    []uint64 // writes that failed (outcome unknown) after it: a row may show any of them
	readable bool     // an acknowledged write of it was flushed: a get must find it
}

// writer is one appender's part of the ledger.
type writer struct {
	g        int
	mu       sync.Mutex
	ids      []idState
	readable []int // indexes of ids a get must find
}

func idOf(g, i int) string { return fmt.Sprintf("a%02d-%07d", g, i) }

// parseID undoes idOf.
func parseID(id string) (g, i int, ok bool) {
	if len(id) != 11 || id[0] != 'a' || id[3] != '-' {
		return 0, 0, false
	}
	g, err1 := strconv.Atoi(id[1:3])
	i, err2 := strconv.Atoi(id[4:])
	return g, i, err1 == nil && err2 == nil
}

// content is the text of write seq of id, padded to n bytes.
func content(id string, seq uint64, n int) string {
	s := id + "@" + strconv.FormatUint(seq, 10) + "|"
	if len(s) < n {
		s += strings.Repeat("x", n-len(s))
	}
	return s
}

// seqOf reads the write sequence back from a row's content.
func seqOf(c string) (uint64, bool) {
	_, rest, ok := strings.Cut(c, "@")
	if !ok {
		return 0, false
	}
	num, _, ok := strings.Cut(rest, "|")
	if !ok {
		return 0, false
	}
	seq, err := strconv.ParseUint(num, 10, 64)
	return seq, err == nil
}

// pick chooses the ids of a batch of n: new ones, and with probability
// rewrite ids this appender sent before (none twice in one batch).
func (w *writer) pick(rng *rand.Rand, n int, rewrite float64) []int {
	w.mu.Lock()
	defer w.mu.Unlock()
	have := len(w.ids)
	seen := make(map[int]bool, n)
	out := make([]int, 0, n)
	for range n {
		if have > 0 && rng.Float64() < rewrite {
			if i := rng.IntN(have); !seen[i] {
				seen[i] = true
				out = append(out, i)
				continue
			}
		}
		out = append(out, len(w.ids))
		w.ids = append(w.ids, idState{})
	}
	return out
}

// settle records the outcome of write seq of the ids idx.
func (w *writer) settle(idx []int, seq uint64, acked, flushed bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, i := range idx {
		st := &w.ids[i]
		if !acked {
			st.after = append(st.after, seq)
			continue
		}
		st.acked, st.after = seq, nil
		if flushed && !st.readable {
			st.readable = true
			w.readable = append(w.readable, i)
		}
	}
}

// randomReadable returns an id a get must find, if there is one.
func (w *writer) randomReadable(rng *rand.Rand) (string, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.readable) == 0 {
		return "", false
	}
	return idOf(w.g, w.readable[rng.IntN(len(w.readable))]), true
}

// sent is how many ids the appender has used.
func (w *writer) sent() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.ids)
}

// tally checks a full listing against the ledger.
type tally struct {
	rows, readable, lost, duplicated, wrong, phantom, unacked int64
	examples                                                  map[string][]string
}

func (t *tally) example(kind, s string) {
	if t.examples == nil {
		t.examples = map[string][]string{}
	}
	if len(t.examples[kind]) < 5 {
		t.examples[kind] = append(t.examples[kind], s)
	}
}

// check compares the rows (id and content) of a listing with the ledger.
func check(ws []*writer, rows map[string][]string) tally {
	var t tally
	for id, contents := range rows {
		t.rows += int64(len(contents))
		if len(contents) > 1 {
			t.duplicated++
			t.example("duplicated", fmt.Sprintf("%s listed %d times", id, len(contents)))
		}
		g, i, ok := parseID(id)
		if !ok || g >= len(ws) {
			t.phantom++
			t.example("phantom", id)
			continue
		}
		w := ws[g]
		w.mu.Lock()
		var st idState
		known := i < len(w.ids)
		if known {
			st = w.ids[i]
		}
		w.mu.Unlock()
		switch {
		case !known:
			t.phantom++
			t.example("phantom", id)
			continue
		case st.acked == 0:
			t.unacked++ // sent, never acknowledged: it may be there
			continue
		}
		t.readable++
		seq, ok := seqOf(contents[0])
		if !ok || (seq != st.acked && !containsSeq(st.after, seq)) {
			t.wrong++
			t.example("wrong_content", fmt.Sprintf("%s shows write %d (content %.40q), newest acknowledged %d, failed since %v", id, seq, contents[0], st.acked, st.after))
		}
	}
	for _, w := range ws {
		w.mu.Lock()
		for i, st := range w.ids {
			if st.acked == 0 {
				continue
			}
			if _, ok := rows[idOf(w.g, i)]; !ok {
				t.lost++
				t.example("lost", fmt.Sprintf("%s (acknowledged write %d)", idOf(w.g, i), st.acked))
			}
		}
		w.mu.Unlock()
	}
	return t
}

func containsSeq(s []uint64, v uint64) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

// acknowledged counts the ids with an acknowledged write.
func acknowledged(ws []*writer) int64 {
	var n int64
	for _, w := range ws {
		w.mu.Lock()
		for _, st := range w.ids {
			if st.acked != 0 {
				n++
			}
		}
		w.mu.Unlock()
	}
	return n
}
