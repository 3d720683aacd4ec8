package rollout

import (
	"errors"
	"strings"
	"testing"
)

func TestValidateName(t *testing.T) {
	for _, tc := range []struct {
		name string
		ok   bool
	}{
		{"a", true},
		{"0", true},
		{"Run-7.b_c", true},
		{strings.Repeat("x", 128), true},
		{strings.Repeat("x", 129), false},
		{"", false},
		{"_reserved", false},
		{".hidden", false},
		{"-flag", false},
		{"a/b", false},
		{"a b", false},
		{"ä", false},
		{"a\x00", false},
		{"..", false},
	} {
		err := ValidateName(tc.name)
		if (err == nil) != tc.ok {
			t.Errorf("ValidateName(%q) = %v, want ok=%v", tc.name, err, tc.ok)
		}
		var verr *ValidationError
		if err != nil && !errors.As(err, &verr) {
			t.Errorf("ValidateName(%q): %v is not a ValidationError", tc.name, err)
		}
	}
}
