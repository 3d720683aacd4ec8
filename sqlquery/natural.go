package sqlquery

// NaturalCompare orders strings with their runs of ASCII digits compared as
// numbers: "step-2" < "step-10" < "step-10a", "v9" < "v10". Runs equal in
// value but not in text ("7" and "007") order by length, then the rest; a
// run longer than any integer compares by its digits without leading zeros.
// Policy versions are named like that (the Python client's examples use
// step-{n}), and byte order put step-10 between step-1 and step-2.
func NaturalCompare(a, b string) int {
	i, j := 0, 0
	for i < len(a) && j < len(b) {
		ca, cb := a[i], b[j]
		if isDigit(ca) && isDigit(cb) {
			si, sj := i, j
			for i < len(a) && isDigit(a[i]) {
				i++
			}
			for j < len(b) && isDigit(b[j]) {
				j++
			}
			if c := compareDigits(a[si:i], b[sj:j]); c != 0 {
				return c
			}
			continue
		}
		if ca != cb {
			if ca < cb {
				return -1
			}
			return 1
		}
		i++
		j++
	}
	switch {
	case len(a)-i < len(b)-j:
		return -1
	case len(a)-i > len(b)-j:
		return 1
	}
	// Equal under the natural order ("7" and "007"): byte order decides.
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// compareDigits compares two runs of digits by their value.
func compareDigits(x, y string) int {
	tx, ty := trimZeros(x), trimZeros(y)
	if len(tx) != len(ty) {
		if len(tx) < len(ty) {
			return -1
		}
		return 1
	}
	switch {
	case tx < ty:
		return -1
	case tx > ty:
		return 1
	}
	return 0
}

func trimZeros(s string) string {
	for len(s) > 1 && s[0] == '0' {
		s = s[1:]
	}
	return s
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }
