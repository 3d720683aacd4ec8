//go:build cgo

package sqlquery

import (
	"context"
	"errors"
	"strings"
	"testing"
)

// Regression: SELEC 1 answered "only SELECT statements are allowed (got
// SELEC)", as if it were a write. A first word that is no statement is a
// syntax error, with the read keyword it is closest to; real writes keep
// the read-only refusal.
func TestRegression_TypoIsASyntaxError(t *testing.T) {
	f := newFixture(t, Limits{})
	f.store(t, "exp", 4, true)
	cases := []struct{ sql, want, not string }{
		{"SELEC 1", `syntax error at "SELEC": did you mean SELECT?`, "only SELECT"},
		{"  -- note\n slect count(*) from records", `syntax error at "slect": did you mean SELECT?`, "only SELECT"},
		{"WTIH a AS (SELECT 1) SELECT * FROM a", `did you mean WITH?`, "only SELECT"},
		{"FOOBAR", `syntax error at "FOOBAR", which is not a SQL statement`, "did you mean"},
		{"INSERT INTO records VALUES (1)", "only SELECT statements are allowed (got INSERT)", "syntax"},
		{"pragma version", "only SELECT statements are allowed (got PRAGMA)", "syntax"},
	}
	for _, c := range cases {
		_, err := f.eng.Query(context.Background(), Request{Store: "exp", SQL: c.sql})
		if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), c.not) {
			t.Fatalf("%q: got %v, want %q", c.sql, err, c.want)
		}
	}
}
