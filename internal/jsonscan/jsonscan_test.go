package jsonscan

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
	"unicode/utf16"
	"unicode/utf8"
)

func TestScan(t *testing.T) {
	deep := func(n int) string { return strings.Repeat("[", n) + strings.Repeat("]", n) }
	cases := []struct {
		name  string
		doc   string
		l     Limits
		kind  Kind // 0: accepted
		off   int
		depth int
	}{
		{name: "scalar", doc: `1`, depth: 0},
		{name: "empty object", doc: `{}`, depth: 1},
		{name: "nested", doc: `{"a":[{"b":[1,2]}]}`, depth: 4},
		{name: "brackets in strings do not count", doc: `["[[[[{{{{", "]]]"]`, l: Limits{MaxDepth: 1}, depth: 1},
		{name: "escaped quote keeps the string open", doc: `["\"[[[[", "\\", "["]`, l: Limits{MaxDepth: 1}, depth: 1},
		{name: "at the limit", doc: deep(5), l: Limits{MaxDepth: 5}, depth: 5},
		{name: "past the limit", doc: deep(6), l: Limits{MaxDepth: 5}, kind: TooDeep, off: 5},
		{name: "unclosed past the limit", doc: strings.Repeat("[", 100), l: Limits{MaxDepth: 10}, kind: TooDeep, off: 10},
		{name: "values at the limit", doc: `[1,2,3]`, l: Limits{MaxValues: 3}, depth: 1},
		{name: "values past the limit", doc: `[1,2,3,4]`, l: Limits{MaxValues: 3}, kind: TooManyValues, off: 6},
		{name: "UTF-8 text", doc: `["é✓😀", "\u00e9", "\ud83d\ude00"]`, depth: 1},
		{name: "invalid byte", doc: "[\"ab\xffc\"]", kind: BadUTF8, off: 4},
		{name: "truncated sequence", doc: "[\"ab\xe2\x9c\"]", kind: BadUTF8, off: 4},
		{name: "surrogate bytes", doc: "[\"\xed\xa0\x80\"]", kind: BadUTF8, off: 2},
		{name: "lone high surrogate", doc: `["x\ud800y"]`, kind: BadUTF8, off: 3},
		{name: "high surrogate at the end", doc: `["\ud800"]`, kind: BadUTF8, off: 2},
		{name: "lone low surrogate", doc: `["\udc00"]`, kind: BadUTF8, off: 2},
		{name: "two high surrogates", doc: `["\ud800\ud800"]`, kind: BadUTF8, off: 2},
		{name: "bad UTF-8 in a key", doc: "{\"k\xff\":1}", kind: BadUTF8, off: 3},
		{name: "bad hex is the decoder's error", doc: `["\uzzzz"]`, depth: 1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			st, err := Scan([]byte(c.doc), c.l)
			if c.kind == 0 {
				if err != nil {
					t.Fatalf("Scan: %v", err)
				}
				if st.Depth != c.depth {
					t.Errorf("depth %d, want %d", st.Depth, c.depth)
				}
				return
			}
			var e *Error
			if !errors.As(err, &e) || e.Kind != c.kind || e.Offset != c.off {
				t.Fatalf("got %v (%+v), want kind %d at byte %d", err, e, c.kind, c.off)
			}
		})
	}
}

func TestScanCountsItems(t *testing.T) {
	for _, c := range []struct {
		doc  string
		want int
	}{
		{`{"records":[]}`, 1}, // an upper bound: an empty container counts one
		{`{"records":[{}]}`, 1},
		{`{"records":[{"a":[1,2,3]},{"b":"x,y"},null]}`, 3},
		{`{"records":[{},{}], "other":[1,2]}`, 4},
	} {
		st, err := Scan([]byte(c.doc), Limits{ItemsDepth: 2})
		if err != nil || st.Items != c.want {
			t.Errorf("%s: items %d (%v), want %d", c.doc, st.Items, err, c.want)
		}
	}
}

// TestDeeplyNestedScansFast: the body that overflowed the decoder's stack
// (2.1 million '[', about 6 MB) is refused at the limit, without reading
// on.
func TestDeeplyNestedScansFast(t *testing.T) {
	body := bytes.Repeat([]byte("["), 2_100_000)
	_, err := Scan(body, Limits{MaxDepth: 256})
	var e *Error
	if !errors.As(err, &e) || e.Kind != TooDeep || e.Offset != 256 {
		t.Fatalf("got %v", err)
	}
	if got := err.Error(); got != "JSON nesting deeper than 256 levels at byte 256" {
		t.Errorf("message %q", got)
	}
}

func TestAt(t *testing.T) {
	doc := `{"records":[{"id":"a"},{"id":"b","metadata":{"k":[1,[2,"x"]]}}],"z":1}`
	for _, c := range []struct {
		at   string // the byte found by this marker's first occurrence
		want string
	}{
		{`"x"`, `records[1].metadata.k[1][1]`},
		{`"b"`, `records[1].id`},
		{`"id":"b"`, `records[1].id`},
		{`"k"`, `records[1].metadata.k`},
		{`"z"`, `z`},
		{`"records"`, `records`},
	} {
		off := strings.Index(doc, c.at)
		if got := FormatPath(At([]byte(doc), off), 10); got != c.want {
			t.Errorf("at %s: %q, want %q", c.at, got, c.want)
		}
	}
	if got := FormatPath(At([]byte(`{"a b":{"c":[[[1]]]}}`), 16), 3); got != `"a b".c[0]...` {
		t.Errorf("truncated and quoted: %q", got)
	}
	// A path deeper than At keeps is cut, not grown without bound.
	deep := strings.Repeat(`{"a":`, 3000)
	if got := len(At([]byte(deep), len(deep))); got != maxPathSteps {
		t.Errorf("%d steps kept, want %d", got, maxPathSteps)
	}
}

// FuzzScan checks Scan against encoding/json on every document it reads:
// the depth it reports is the document's, it refuses exactly the documents
// deeper than the limit, and it calls a string bad exactly when a string
// holds a byte that is not UTF-8 or an escaped lone surrogate (which
// encoding/json turns into U+FFFD). Seeds: testdata/fuzz/FuzzScan.
func FuzzScan(f *testing.F) {
	for _, s := range []string{
		`{"records":[{"id":"a","metadata":{"k":[1,2,{"x":null}]}}]}`,
		`[[[[[[[[[[]]]]]]]]]]`,
		`["\ud83d\ude00","\ud800","\\\"[","é"]`,
		"[\"\xff\"]",
		`{"a":"\"","b":["[",{"c":"]]]"}]}`,
	} {
		f.Add([]byte(s), uint8(4))
	}
	f.Fuzz(func(t *testing.T, doc []byte, maxDepth uint8) {
		st, err := Scan(doc, Limits{})
		var e *Error
		if err != nil && (!errors.As(err, &e) || e.Kind != BadUTF8) {
			t.Fatalf("no limits, yet %v", err)
		}
		if _, lerr := Scan(doc, Limits{MaxDepth: int(maxDepth) + 1}); lerr != nil && err == nil {
			if !errors.As(lerr, &e) || e.Kind != TooDeep || st.Depth <= int(maxDepth)+1 {
				t.Fatalf("limit %d refused a document of depth %d: %v", maxDepth+1, st.Depth, lerr)
			}
		} else if lerr == nil && st.Depth > int(maxDepth)+1 {
			t.Fatalf("limit %d accepted a document of depth %d", maxDepth+1, st.Depth)
		}
		if !json.Valid(doc) {
			return
		}
		depth, bad, ok := reference(doc)
		if !ok {
			return
		}
		if (err != nil) != bad {
			t.Fatalf("Scan says %v, reference says bad text %v", err, bad)
		}
		if err == nil && st.Depth != depth {
			t.Fatalf("depth %d, reference %d", st.Depth, depth)
		}
	})
}

// reference measures a valid document with encoding/json's tokenizer: its
// depth, and whether a string token holds bytes that are not UTF-8 or an
// escaped lone surrogate. ok is false when the tokenizer gives up (it
// refuses nesting past 10000).
func reference(doc []byte) (depth int, bad, ok bool) {
	dec := json.NewDecoder(bytes.NewReader(doc))
	cur := 0
	for {
		start := dec.InputOffset()
		tok, err := dec.Token()
		if err == io.EOF {
			return depth, bad, true
		}
		if err != nil {
			return 0, false, false
		}
		switch tok := tok.(type) {
		case json.Delim:
			if tok == '[' || tok == '{' {
				cur++
				depth = max(depth, cur)
			} else {
				cur--
			}
		case string:
			raw := doc[start:dec.InputOffset()]
			raw = raw[bytes.IndexByte(raw, '"')+1 : bytes.LastIndexByte(raw, '"')]
			if !textOK(raw) {
				bad = true
			}
		}
	}
}

// textOK checks a string token's raw contents the slow way.
func textOK(raw []byte) bool {
	for i := 0; i < len(raw); {
		if raw[i] == '\\' {
			if raw[i+1] != 'u' {
				i += 2
				continue
			}
			var r1 rune
			fmt.Sscanf(string(raw[i+2:i+6]), "%04x", &r1)
			if !utf16.IsSurrogate(r1) {
				i += 6
				continue
			}
			if i+12 > len(raw) || raw[i+6] != '\\' || raw[i+7] != 'u' {
				return false
			}
			var r2 rune
			fmt.Sscanf(string(raw[i+8:i+12]), "%04x", &r2)
			if utf16.DecodeRune(r1, r2) == utf8.RuneError {
				return false
			}
			i += 12
			continue
		}
		r, size := utf8.DecodeRune(raw[i:])
		if r == utf8.RuneError && size == 1 {
			return false
		}
		i += size
	}
	return true
}
