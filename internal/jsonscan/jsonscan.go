// Package jsonscan checks the shape of a JSON document before a decoder
// parses it: how deep arrays and objects nest, how many values it holds,
// and that its strings are UTF-8.
//
// Decoders recurse once per level of nesting. segmentio's has no bound: a
// body of about two million '[' overflows a goroutine's 1 GB stack, which
// kills the process, not the request. encoding/json and segmentio both
// replace invalid UTF-8 (and \u escapes of lone surrogates) with U+FFFD
// without a word, so two ids that differ only there become one. Scan is a
// single byte loop that refuses such a document before any decoder runs;
// it does not check the rest of the syntax, which stays the decoder's job.
package jsonscan

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math/bits"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Limits bound a document. A zero field sets no bound.
type Limits struct {
	// MaxDepth is the most arrays and objects open at once: [] is depth 1,
	// {"a":[1]} depth 2.
	MaxDepth int
	// MaxValues bounds the values of the document (scalars, arrays and
	// objects, counted as commas plus containers: an upper bound).
	MaxValues int
	// ItemsDepth is the depth whose containers' items Stats.Items counts:
	// 2 counts the records of {"records":[...]}.
	ItemsDepth int
}

// Stats describe a scanned document.
type Stats struct {
	Depth  int // the deepest nesting reached
	Values int // commas plus containers: at least the number of values
	Items  int // items of the containers at Limits.ItemsDepth (an upper bound: commas + 1 per container)
}

// Kind is what Scan refused.
type Kind uint8

// The kinds of *Error.
const (
	TooDeep       Kind = iota + 1 // nesting deeper than Limits.MaxDepth
	TooManyValues                 // more values than Limits.MaxValues
	BadUTF8                       // a string that is not UTF-8, or a \u escape of a lone surrogate
)

// Error is a document Scan refused.
type Error struct {
	Kind   Kind
	Offset int // byte offset: where the limit was crossed, or the bad byte or escape
	Limit  int // the limit crossed (TooDeep, TooManyValues)
}

func (e *Error) Error() string {
	switch e.Kind {
	case TooDeep:
		return fmt.Sprintf("JSON nesting deeper than %d levels at byte %d", e.Limit, e.Offset)
	case TooManyValues:
		return fmt.Sprintf("JSON document with more than %d values at byte %d", e.Limit, e.Offset)
	}
	return fmt.Sprintf("JSON string is not valid UTF-8 at byte %d", e.Offset)
}

// Byte classes outside strings. Only these bytes change the scan's state;
// the loop skips every other byte with one table load.
const (
	cNone = iota
	cQuote
	cOpen
	cClose
	cComma
)

var outside = func() (t [256]uint8) {
	t['"'] = cQuote
	t['['], t['{'] = cOpen, cOpen
	t[']'], t['}'] = cClose, cClose
	t[','] = cComma
	return t
}()

// inString marks the bytes a string's scan must stop at: its end, an
// escape, and the start of a multi-byte sequence (to check it is UTF-8).
var inString = func() (t [256]bool) {
	t['"'], t['\\'] = true, true
	for c := 0x80; c < 0x100; c++ {
		t[c] = true
	}
	return t
}()

// Scan checks b against l. It stops at the first limit crossed or the
// first string that is not UTF-8 and returns an *Error; any other
// malformation is left for the decoder to find.
func Scan(b []byte, l Limits) (Stats, error) {
	maxDepth, maxValues, itemsDepth := l.MaxDepth, l.MaxValues, l.ItemsDepth
	if maxDepth <= 0 {
		maxDepth = int(^uint(0) >> 1)
	}
	if maxValues <= 0 {
		maxValues = int(^uint(0) >> 1)
	}
	if itemsDepth <= 0 {
		itemsDepth = -1 // depth is never -1 where it is compared
	}
	var (
		st     Stats
		depth  int
		values int
	)
	n := len(b)
	for i := 0; i < n; i++ {
		c := outside[b[i]]
		for c == cNone {
			// Numbers, literals, colons and spaces: one load each.
			if i++; i == n {
				st.Values = values
				return st, nil
			}
			c = outside[b[i]]
		}
		switch c {
		case cQuote:
			j, bad := skipString(b, i+1)
			if bad >= 0 {
				return st, &Error{Kind: BadUTF8, Offset: bad}
			}
			i = j - 1 // j is past the closing quote (or len(b))
		case cOpen:
			depth++
			values++
			if depth > st.Depth {
				st.Depth = depth
				if depth > maxDepth {
					return st, &Error{Kind: TooDeep, Offset: i, Limit: maxDepth}
				}
			}
			if values > maxValues {
				return st, &Error{Kind: TooManyValues, Offset: i, Limit: maxValues}
			}
			if depth == itemsDepth {
				st.Items++
			}
		case cClose:
			depth--
		case cComma:
			values++
			if values > maxValues {
				return st, &Error{Kind: TooManyValues, Offset: i, Limit: maxValues}
			}
			if depth == itemsDepth {
				st.Items++
			}
		}
	}
	st.Values = values
	return st, nil
}

// skipString scans a string's contents from b[i] (just past its opening
// quote). It returns the index past the closing quote (len(b) when the
// string does not end) and the offset of the first byte that is not UTF-8
// or of a lone surrogate's escape, or -1.
func skipString(b []byte, i int) (end, bad int) {
	n := len(b)
	for {
		i = plain(b, i)
		if i >= n {
			return n, -1
		}
		switch c := b[i]; {
		case c == '"':
			return i + 1, -1
		case c == '\\':
			if i+1 < n && b[i+1] == 'u' {
				next, ok := skipUnicodeEscape(b, i)
				if !ok {
					return n, i
				}
				i = next
				continue
			}
			i += 2 // the escaped byte, whatever it is: the decoder judges it
		default:
			// Multi-byte text: check the run up to the next quote or
			// escape at once (utf8.Valid is word-at-a-time on the ASCII
			// in it), and find the bad byte only when there is one.
			j := quoteOrEscape(b, i+1)
			if !utf8.Valid(b[i:j]) {
				return n, i + firstInvalid(b[i:j])
			}
			i = j
		}
	}
}

// Word-at-a-time constants: a byte repeated in each of a word's bytes.
const (
	ones  = 0x0101010101010101
	highs = 0x8080808080808080
	quote = ones * '"'
	bslsh = ones * '\\'
)

// special marks the bytes of x (read little-endian) that are a quote, a
// backslash or >= 0x80 with their high bit: a byte of x^quote or x^bslsh
// is zero where x has a quote or a backslash, and (v - ones) &^ v sets the
// high bit of v's lowest zero byte (borrows can mark bytes above it, never
// below, so the lowest mark is exact); x's own high bits mark the rest.
func special(x uint64) uint64 {
	q, s := x^quote, x^bslsh
	return (((q - ones) &^ q) | ((s - ones) &^ s) | x) & highs
}

// quoteOrEscape returns the index of the first quote or backslash at or
// after b[i], or len(b).
func quoteOrEscape(b []byte, i int) int {
	for ; i+8 <= len(b); i += 8 {
		x := binary.LittleEndian.Uint64(b[i:])
		q, s := x^quote, x^bslsh
		if m := (((q - ones) &^ q) | ((s - ones) &^ s)) & highs; m != 0 {
			return i + bits.TrailingZeros64(m)/8
		}
	}
	for i < len(b) && b[i] != '"' && b[i] != '\\' {
		i++
	}
	return i
}

// plain returns the index of the first byte at or after b[i] that a
// string's scan must look at: a quote, a backslash or a byte >= 0x80. It
// tests eight bytes at a time: a word without such a byte is skipped with
// a few arithmetic operations instead of eight table loads.
func plain(b []byte, i int) int {
	for ; i+8 <= len(b); i += 8 {
		if m := special(binary.LittleEndian.Uint64(b[i:])); m != 0 {
			return i + bits.TrailingZeros64(m)/8
		}
	}
	for i < len(b) && !inString[b[i]] {
		i++
	}
	return i
}

// firstInvalid is the offset of the first byte of run that is not part of
// a UTF-8 sequence (run is known to hold one).
func firstInvalid(run []byte) int {
	for i := 0; i < len(run); {
		r, size := utf8.DecodeRune(run[i:])
		if r == utf8.RuneError && size <= 1 {
			return i
		}
		i += size
	}
	return len(run)
}

// skipUnicodeEscape checks the \uXXXX escape at b[i] and returns the index
// past it (past both halves of a surrogate pair). A high surrogate without
// a low one after it, or a low one alone, is not text: ok is false. An
// escape that is not four hex digits is the decoder's syntax error.
func skipUnicodeEscape(b []byte, i int) (next int, ok bool) {
	r, good := hex4(b, i+2)
	if !good {
		return i + 2, true
	}
	switch {
	case r >= 0xDC00 && r <= 0xDFFF:
		return 0, false
	case r >= 0xD800 && r <= 0xDBFF:
		if i+7 < len(b) && b[i+6] == '\\' && b[i+7] == 'u' {
			if lo, good := hex4(b, i+8); good && lo >= 0xDC00 && lo <= 0xDFFF {
				return i + 12, true
			}
		}
		return 0, false
	}
	return i + 6, true
}

// hex4 reads four hex digits at b[i:].
func hex4(b []byte, i int) (rune, bool) {
	if i+4 > len(b) {
		return 0, false
	}
	var r rune
	for _, c := range b[i : i+4] {
		switch {
		case c >= '0' && c <= '9':
			r = r<<4 | rune(c-'0')
		case c >= 'a' && c <= 'f':
			r = r<<4 | rune(c-'a'+10)
		case c >= 'A' && c <= 'F':
			r = r<<4 | rune(c-'A'+10)
		default:
			return 0, false
		}
	}
	return r, true
}

// Step is one step of a path into a document: an object member's key, or
// an array element's index.
type Step struct {
	Key   string
	Index int
	InArr bool // an array element (Index), not an object member (Key)
}

// maxPathSteps bounds the path At keeps: the steps of a document nested
// deeper are dropped (Scan refuses such documents first).
const maxPathSteps = 1024

// frame is At's state for one open array or object.
type frame struct {
	step   Step
	inKey  bool // an object awaiting its next key
	hasKey bool // an object whose current member's key is known
}

// At returns the path to the value that holds byte off of b: the members
// and elements entered to reach it, outermost first (a key's bytes belong
// to the member it names). It is for messages on the error path: a second
// linear walk that decodes keys.
func At(b []byte, off int) []Step {
	var stack []frame
	deep := 0 // levels beyond maxPathSteps
	n := min(len(b), off+1)
	for i := 0; i < n; i++ {
		switch outside[b[i]] {
		case cQuote:
			j, _ := skipString(b, i+1)
			if len(stack) > 0 && deep == 0 {
				if f := &stack[len(stack)-1]; f.inKey {
					f.step.Key = unquote(b[i:j])
					f.inKey, f.hasKey = false, true
				}
			}
			if j > off {
				return steps(stack)
			}
			i = j - 1
		case cOpen:
			if len(stack) == maxPathSteps {
				deep++
				continue
			}
			arr := b[i] == '['
			stack = append(stack, frame{step: Step{InArr: arr}, inKey: !arr})
		case cClose:
			if deep > 0 {
				deep--
			} else if len(stack) > 0 {
				stack = stack[:len(stack)-1]
			}
		case cComma:
			if deep > 0 || len(stack) == 0 {
				continue
			}
			f := &stack[len(stack)-1]
			if f.step.InArr {
				f.step.Index++
			} else {
				f.step.Key, f.inKey, f.hasKey = "", true, false
			}
		}
	}
	return steps(stack)
}

// steps are the frames' steps, up to an object that has no key yet (off
// is between its members).
func steps(stack []frame) []Step {
	out := make([]Step, 0, len(stack))
	for _, f := range stack {
		if !f.step.InArr && !f.hasKey {
			break
		}
		out = append(out, f.step)
	}
	return out
}

// unquote decodes a JSON string token (quotes included) for a message;
// a token that does not decode is shown as it is.
func unquote(tok []byte) string {
	var s string
	if json.Unmarshal(tok, &s) == nil {
		return s
	}
	return strings.Trim(string(tok), `"`)
}

// FormatPath writes steps as a.b[3].c, keeping at most max steps (the
// outermost) and marking what it drops.
func FormatPath(steps []Step, max int) string {
	var sb strings.Builder
	for i, s := range steps {
		if i == max {
			sb.WriteString("...")
			break
		}
		if s.InArr {
			sb.WriteByte('[')
			sb.WriteString(strconv.Itoa(s.Index))
			sb.WriteByte(']')
			continue
		}
		if i > 0 {
			sb.WriteByte('.')
		}
		if plainKey(s.Key) {
			sb.WriteString(s.Key)
		} else {
			sb.WriteString(strconv.Quote(s.Key))
		}
	}
	return sb.String()
}

func plainKey(k string) bool {
	if k == "" {
		return false
	}
	for i := 0; i < len(k); i++ {
		c := k[i]
		if !(c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9') {
			return false
		}
	}
	return true
}
