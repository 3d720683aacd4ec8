package multierr

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestJoin(t *testing.T) {
	shared := fmt.Errorf("read data/a.lance: %w", io.ErrUnexpectedEOF)
	alike := func(n int) []error {
		var errs []error
		for i := range n {
			errs = append(errs, fmt.Errorf("lance/file: read [%d, +4980): data/%08x-1c2d.lance: %w", 448*i, i, io.ErrUnexpectedEOF))
		}
		return errs
	}
	kinds := func(n int) []error {
		var errs []error
		for i := range n {
			errs = append(errs, errors.New("failure "+strings.Repeat("x", i)))
		}
		return errs
	}
	for _, c := range []struct {
		name string
		errs []error
		want string
	}{
		{"none", nil, ""},
		{"nils", []error{nil, nil}, ""},
		{"one", []error{nil, shared}, shared.Error()},
		// One failure handed to every field of a read is one failure.
		{"shared", []error{shared, shared, shared, shared}, shared.Error()},
		{"alike", alike(70), alike(1)[0].Error() + " (and 69 more like it)"},
		{"kinds", append(kinds(2), kinds(1)...), "failure  (and 1 more like it); failure x"},
		{"bounded", kinds(10), "failure ; failure x; failure xx; and 7 more errors"},
		{"flattened", []error{Join(alike(2)...), Join(alike(3)...)}, alike(1)[0].Error() + " (and 4 more like it)"},
		{"long", []error{errors.New(strings.Repeat("y", 5000))}, strings.Repeat("y", maxPart-40) + fmt.Sprintf("... (%d more bytes)", 5000-maxPart+40)},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := Join(c.errs...)
			if c.want == "" {
				if err != nil {
					t.Fatalf("Join = %v, want nil", err)
				}
				return
			}
			if err == nil || err.Error() != c.want {
				t.Fatalf("Join =\n%v\nwant\n%s", err, c.want)
			}
		})
	}
}

func TestJoinKeepsEveryError(t *testing.T) {
	var pe *fs.PathError
	err := Join(errors.New("a"), nil, Join(io.ErrUnexpectedEOF, &fs.PathError{Op: "open", Path: "x", Err: fs.ErrNotExist}))
	if !errors.Is(err, io.ErrUnexpectedEOF) || !errors.Is(err, fs.ErrNotExist) || !errors.As(err, &pe) || pe.Path != "x" {
		t.Fatalf("errors.Is and errors.As do not see the joined errors of %v", err)
	}
	if n := len(err.(interface{ Unwrap() []error }).Unwrap()); n != 3 {
		t.Fatalf("%d errors unwrapped, want the 3 leaves", n)
	}
}

func TestShorten(t *testing.T) {
	var errs []error
	for i := range 70 {
		errs = append(errs, fmt.Errorf("objstore: s3 get range data/%04d.lance: unexpected EOF", i))
	}
	if got, want := Shorten(errors.Join(errs...).Error()), "objstore: s3 get range data/0000.lance: unexpected EOF (and 69 more like it)"; got != want {
		t.Errorf("Shorten(70 alike lines) = %q, want %q", got, want)
	}
	if msg := "line one\nline two"; Shorten(msg) != msg {
		t.Errorf("Shorten(%q) = %q, want it unchanged (no line repeats)", msg, Shorten(msg))
	}
	long := strings.Repeat("héllo ", 5000)
	got := Shorten(long)
	head, _, _ := strings.Cut(got, "...")
	if len(got) > MaxMessage || !strings.HasPrefix(long, head) || !utf8.ValidString(got) {
		t.Errorf("Shorten of %d bytes = %d bytes, want at most %d: a prefix of whole runes and a count", len(long), len(got), MaxMessage)
	}
}
