// Package multierr joins the errors of work done in parallel or in a loop
// (the fields of a read, the fragments of a take, the shards of a store)
// into one error whose message names each failure once.
//
// errors.Join concatenates every message: one storage fault met by 70
// parallel reads came back to a client as the same message 70 times
// (19 KB). Join keeps every error for errors.Is and errors.As, but its
// message counts repeats instead of repeating them, and Shorten bounds a
// message built elsewhere.
package multierr

import (
	"fmt"
	"reflect"
	"strings"
	"unicode/utf8"
)

// The bounds of a message: at most maxKinds kinds of failure are shown,
// each cut to maxPart bytes; Shorten cuts a whole message to MaxMessage.
const (
	maxKinds   = 3
	maxPart    = 1 << 10
	MaxMessage = 4 << 10
)

// Join returns an error wrapping the non-nil errs, or nil if there are
// none. As with errors.Join, errors.Is and errors.As see each of them, and
// a Join among errs is flattened into it.
//
// Its message names each kind of failure once: an error value given more
// than once (one failure handed to several waiters) counts once; messages
// that differ only in their numbers and ids (offsets, calls, the file
// they name) are one kind, shown as the first of them and how many more
// there were ("... (and 69 more like it)"); and past maxKinds kinds the
// rest are counted ("and 4 more errors").
func Join(errs ...error) error {
	var flat []error
	for _, err := range errs {
		if j, ok := err.(*joinError); ok {
			flat = append(flat, j.errs...)
		} else if err != nil {
			flat = append(flat, err)
		}
	}
	if len(flat) == 0 {
		return nil
	}
	return &joinError{errs: flat}
}

type joinError struct{ errs []error }

func (e *joinError) Unwrap() []error { return e.errs }

func (e *joinError) Error() string {
	// One failure handed to several waiters is one error value, in
	// practice a pointer (errors.New, fmt.Errorf); pointers compare
	// without the panic some other dynamic types would cause.
	seen := make(map[error]bool, len(e.errs))
	msgs := make([]string, 0, len(e.errs))
	for _, err := range e.errs {
		if reflect.TypeOf(err).Kind() == reflect.Pointer {
			if seen[err] {
				continue
			}
			seen[err] = true
		}
		msgs = append(msgs, err.Error())
	}
	return summarize(msgs)
}

// kind is the messages of one shape: the first, and how many.
type kind struct {
	first string
	n     int
}

// summarize renders msgs by kind, in the order each kind first appears.
func summarize(msgs []string) string {
	var kinds []*kind
	byShape := map[string]*kind{}
	for _, m := range msgs {
		s := shape(m)
		if k := byShape[s]; k != nil {
			k.n++
			continue
		}
		k := &kind{first: m, n: 1}
		byShape[s] = k
		kinds = append(kinds, k)
	}
	var b strings.Builder
	rest := 0
	for i, k := range kinds {
		if i >= maxKinds {
			rest += k.n
			continue
		}
		if i > 0 {
			b.WriteString("; ")
		}
		b.WriteString(cut(k.first, maxPart))
		if k.n > 1 {
			fmt.Fprintf(&b, " (and %d more like it)", k.n-1)
		}
	}
	if rest > 0 {
		fmt.Fprintf(&b, "; and %d more errors", rest)
	}
	return b.String()
}

// shape is m with each word (a run of ASCII letters, digits, '-' and
// '_') that holds a digit replaced by '#': numbers, and ids such as a
// UUID or a shard's name, so that messages differing only in offsets,
// calls or the file they name have one shape.
func shape(m string) string {
	var b strings.Builder
	b.Grow(len(m))
	for i := 0; i < len(m); {
		j := i
		digit := false
		for j < len(m) && isWordByte(m[j]) {
			digit = digit || (m[j] >= '0' && m[j] <= '9')
			j++
		}
		switch {
		case j == i:
			b.WriteByte(m[i])
			j++
		case digit:
			b.WriteByte('#')
		default:
			b.WriteString(m[i:j])
		}
		i = j
	}
	return b.String()
}

func isWordByte(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c == '-' || c == '_'
}

// cut returns m if it has at most n bytes, else its first bytes (whole
// runes) and how many were cut, in at most n bytes.
func cut(m string, n int) string {
	if len(m) <= n {
		return m
	}
	i := max(n-40, 0) // room for the count
	for i > 0 && !utf8.RuneStart(m[i]) {
		i--
	}
	return fmt.Sprintf("%s... (%d more bytes)", m[:i], len(m)-i)
}

// Shorten bounds a message for a client or a log: when some of its lines
// (errors.Join puts one error a line) are alike, as Join's kinds are,
// they are summarized as Join does, on one line; and the result is cut to
// MaxMessage bytes. A message without repeated lines keeps its lines.
func Shorten(msg string) string {
	lines := strings.Split(msg, "\n")
	if len(lines) > 1 {
		shapes := make(map[string]bool, len(lines))
		for _, l := range lines {
			s := shape(l)
			if shapes[s] {
				msg = summarize(lines)
				break
			}
			shapes[s] = true
		}
	}
	return cut(msg, MaxMessage)
}
