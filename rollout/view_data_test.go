package rollout

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/lance-context/lance-context/lance/table"
	"github.com/lance-context/lance-context/objstore"
)

// The view's rules as tables: each file of testdata/view states a store's
// history and what reads of it return. A file is a list of blocks, each a
// command, a line "----", the expected output, and a blank line; lines
// starting with # are comments. Run with -view-rewrite to write the
// outputs the code gives (then read the diff).
//
// History (the output is the store's state after it: rows in the memtable,
// sealed generations pending, live base rows):
//
//	append [rollout=R] id...   writes the ids (to the memtable); the n-th write of id x holds x@n
//	flush                      seals the memtable into a generation (pending)
//	merge                      folds the pending generations into the base table
//	index                      builds the BTree indexes (id, rollout_id) over the base
//	delete id...               deletes the ids' base rows (a deletion file, as LanceDB's delete)
//
// Reads (rows are shown as the write they read, x@n):
//
//	page source=S [limit=N] [after=ID] [offset=N] [rollout=R]
//	                           one page: its rows, then "more" or "end"
//	pages source=S limit=N [rollout=R]
//	                           every page, following the cursors: one line per page
//	get id                     the row, or "not found"
//	scan source=S              every row, in the scan's order
//	trajectory R               the rollout's rows, by sequence_order (the order written)
//
// Every read is checked against the expected output four ways: warm (the
// writing process, its generations cached), cold (another process: no
// generation cached, so the reads that overlap the base with the pending
// generations take that path), and both again with the deep-offset skip
// and the filtered index walk forced (their thresholds set to always).
// The list strategies differ; the rows they return must not.

var viewRewrite = flag.Bool("view-rewrite", false, "rewrite testdata/view outputs")

func TestViewData(t *testing.T) {
	files, err := filepath.Glob("testdata/view/*.txt")
	if err != nil || len(files) == 0 {
		t.Fatalf("no testdata/view files: %v", err)
	}
	for _, file := range files {
		t.Run(filepath.Base(file), func(t *testing.T) { runViewFile(t, file) })
	}
}

// viewBlock is one command of a testdata file and its expected output.
type viewBlock struct {
	line    int
	cmd     string
	want    string
	comment string // the comment lines before it
}

func parseViewFile(t *testing.T, file string) []viewBlock {
	t.Helper()
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var (
		out     []viewBlock
		cur     *viewBlock
		inWant  bool
		want    []string
		comment []string
		n       int
	)
	end := func() {
		if cur != nil {
			cur.want = strings.Join(want, "\n")
			out = append(out, *cur)
		}
		cur, inWant, want = nil, false, nil
	}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		n++
		line := sc.Text()
		switch {
		case inWant && line == "":
			end()
		case inWant:
			want = append(want, line)
		case cur == nil && strings.HasPrefix(line, "#"):
			comment = append(comment, line)
		case cur == nil && strings.TrimSpace(line) == "":
			if len(comment) > 0 {
				comment = append(comment, "")
			}
		case cur == nil:
			cur = &viewBlock{line: n, cmd: line, comment: strings.Join(comment, "\n")}
			comment = nil
		case line == "----":
			inWant = true
		default:
			t.Fatalf("%s:%d: want ---- after the command, got %q", file, n, line)
		}
	}
	if cur != nil && !inWant {
		t.Fatalf("%s:%d: command %q has no ----", file, cur.line, cur.cmd)
	}
	end()
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

func writeViewFile(t *testing.T, file string, blocks []viewBlock) {
	t.Helper()
	var b strings.Builder
	for _, bl := range blocks {
		if bl.comment != "" {
			b.WriteString(bl.comment)
			b.WriteString("\n")
		}
		fmt.Fprintf(&b, "%s\n----\n%s\n\n", bl.cmd, bl.want)
	}
	if err := os.WriteFile(file, []byte(strings.TrimRight(b.String(), "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
}

// viewWorld is the store a file builds: a writer and a cold reader on
// the same root.
type viewWorld struct {
	root   objstore.Store
	w      *Store
	writes map[string]int // writes per id so far
	seq    int32
}

func runViewFile(t *testing.T, file string) {
	blocks := parseViewFile(t, file)
	root := objstore.NewMemory()
	o := Options{PendingWarn: 1 << 30}
	o.IndexColumns = []string{ColID, ColRolloutID}
	wld := &viewWorld{root: root, w: mustStore(t, newCatalog(t, root, "writer", o), "v"), writes: map[string]int{}}
	defer func(b int) { indexBatchSize = b }(indexBatchSize)
	indexBatchSize = 4 // many index pages, even for a few rows
	changed := false
	for i := range blocks {
		bl := &blocks[i]
		got, err := wld.do(t, bl.cmd)
		if err != nil {
			got = "error: " + err.Error()
		}
		if got != bl.want {
			if *viewRewrite {
				bl.want, changed = got, true
				continue
			}
			t.Errorf("%s:%d: %s\ngot:\n%s\nwant:\n%s", file, bl.line, bl.cmd, got, bl.want)
		}
	}
	if changed {
		writeViewFile(t, file, blocks)
	}
}

// viewArgs splits a command's words into key=value options and the rest.
func viewArgs(words []string) (map[string]string, []string) {
	opts := map[string]string{}
	var rest []string
	for _, w := range words {
		if k, v, ok := strings.Cut(w, "="); ok {
			opts[k] = v
		} else {
			rest = append(rest, w)
		}
	}
	return opts, rest
}

func (wld *viewWorld) do(t *testing.T, cmd string) (string, error) {
	t.Helper()
	ctx := context.Background()
	words := strings.Fields(cmd)
	opts, args := viewArgs(words[1:])
	switch words[0] {
	case "append":
		var recs []Record
		for _, id := range args {
			wld.writes[id]++
			wld.seq++
			rollout := opts["rollout"]
			if rollout == "" {
				rollout = "r"
			}
			recs = append(recs, Record{ID: id, RolloutID: rollout, SequenceOrder: wld.seq, Content: ptr(fmt.Sprintf("%s@%d", id, wld.writes[id]))})
		}
		if _, err := wld.w.Append(ctx, recs); err != nil {
			return "", err
		}
		return wld.state(ctx)
	case "flush":
		if err := wld.w.Flush(ctx); err != nil {
			return "", err
		}
		return wld.state(ctx)
	case "merge":
		if _, err := wld.w.Merge(ctx); err != nil {
			return "", err
		}
		return wld.state(ctx)
	case "index":
		if _, err := wld.w.Index(ctx); err != nil {
			return "", err
		}
		return wld.state(ctx)
	case "delete":
		if err := wld.deleteBase(ctx, args); err != nil {
			return "", err
		}
		return wld.state(ctx)
	}
	// A read: the same answer every way.
	var first string
	seen := false
	for _, way := range []struct {
		name   string
		cold   bool
		forced bool
	}{{"warm", false, false}, {"cold", true, false}, {"warm, forced", false, true}, {"cold, forced", true, true}} {
		s := wld.w
		if way.cold {
			s = mustStore(t, newCatalog(t, wld.root, "reader", Options{PendingWarn: 1 << 30, IndexColumns: []string{ColID, ColRolloutID}}), "v")
		}
		m, w := skipMinOffset, walkEntriesPerRun
		if way.forced {
			skipMinOffset, walkEntriesPerRun = 1, 1<<40
		}
		got, err := viewRead(ctx, s, words[0], opts, args)
		skipMinOffset, walkEntriesPerRun = m, w
		if err != nil {
			got = "error: " + err.Error()
		}
		if !seen {
			first, seen = got, true
		} else if got != first {
			return "", fmt.Errorf("%s read gives\n%s\nwhere warm gives\n%s", way.name, got, first)
		}
	}
	return first, nil
}

// state is the store's tiers: rows in the memtable, sealed generations
// pending, and live base rows.
func (wld *viewWorld) state(ctx context.Context) (string, error) {
	st, err := wld.w.Stats(ctx)
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("memtable=%d pending=%d base=%d", st.UnflushedRows, st.PendingGenerations, st.BaseRows), nil
}

// deleteBase deletes the base rows of ids, as LanceDB's delete does.
func (wld *viewWorld) deleteBase(ctx context.Context, ids []string) error {
	d, err := table.Open(ctx, wld.w.Root())
	if err != nil {
		return err
	}
	var addrs []table.RowAddr
	err = d.Scan(ctx, table.ScanOptions{Columns: []string{ColID}, WithRowAddr: true}, func(b arrow.RecordBatch) error {
		col, addr := b.Column(0).(*array.String), b.Column(1).(*array.Uint64)
		for i := 0; i < col.Len(); i++ {
			if slices.Contains(ids, col.Value(i)) {
				a := addr.Value(i)
				addrs = append(addrs, table.RowAddr{Fragment: a >> 32, Offset: uint32(a)})
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	if len(addrs) == 0 {
		return errors.New("no base row to delete")
	}
	_, err = table.DeleteRows(ctx, wld.w.Root(), addrs, "id IN ("+strings.Join(ids, ",")+")")
	return err
}

func viewRead(ctx context.Context, s *Store, verb string, opts map[string]string, args []string) (string, error) {
	num := func(k string) int {
		n, _ := strconv.Atoi(opts[k])
		return n
	}
	lo := ListOptions{Source: Source(opts["source"]), Limit: num("limit"), Offset: num("offset"), After: opts["after"]}
	if r := opts["rollout"]; r != "" {
		lo.Filters = []Filter{{ColRolloutID, r}}
	}
	switch verb {
	case "page":
		res, err := s.List(ctx, lo)
		if err != nil {
			return "", err
		}
		more := "end"
		if res.HasMore {
			more = "more"
		}
		return strings.TrimSpace(rowsLine(res.Records) + " " + more), nil
	case "pages":
		var lines []string
		for {
			res, err := s.List(ctx, lo)
			if err != nil {
				return "", err
			}
			lines = append(lines, rowsLine(res.Records))
			if res.NextCursor == "" {
				break
			}
			if lo.After, err = DecodeCursor(res.NextCursor); err != nil {
				return "", err
			}
		}
		return strings.Join(lines, "\n"), nil
	case "get":
		r, err := s.Get(ctx, args[0])
		if errors.Is(err, ErrNotFound) {
			return "not found", nil
		}
		if err != nil {
			return "", err
		}
		return rowsLine([]Record{*r}), nil
	case "trajectory":
		rs, err := s.Trajectory(ctx, args[0])
		if err != nil {
			return "", err
		}
		return rowsLine(rs), nil
	case "scan":
		var out []string
		err := s.Scan(ctx, ScanOptions{Source: Source(opts["source"]), Columns: []string{"content"}}, func(b arrow.RecordBatch) error {
			c := b.Column(0).(interface {
				Len() int
				Value(int) string
			})
			for i := 0; i < c.Len(); i++ {
				out = append(out, c.Value(i))
			}
			return nil
		})
		return strings.Join(out, " "), err
	}
	return "", fmt.Errorf("unknown command %q", verb)
}

// rowsLine shows rows as the writes they read (x@n).
func rowsLine(rs []Record) string {
	out := make([]string, len(rs))
	for i, r := range rs {
		out[i] = *r.Content
	}
	return strings.Join(out, " ")
}
