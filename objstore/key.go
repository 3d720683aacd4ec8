package objstore

import (
	"fmt"
	"strings"
)

// tmpPrefix starts the names of temporary files of the local backend. Keys
// may not contain a segment with this prefix, and listings skip such files.
const tmpPrefix = ".tmp_"

// ValidateKey reports whether key is a valid object key (see the package
// documentation), returning an error wrapping ErrInvalidKey if not.
func ValidateKey(key string) error {
	if key == "" {
		return fmt.Errorf("%w: empty key", ErrInvalidKey)
	}
	if strings.HasSuffix(key, "/") {
		return fmt.Errorf("%w: %q ends with '/'", ErrInvalidKey, key)
	}
	return validatePath(key)
}

// ValidatePrefix checks a List prefix: "" (everything) or a key-like string
// that may end with '/' and whose last segment may be partial.
func ValidatePrefix(prefix string) error {
	if prefix == "" {
		return nil
	}
	return validatePath(strings.TrimSuffix(prefix, "/"))
}

func validatePath(p string) error {
	if p == "" || strings.HasPrefix(p, "/") {
		return fmt.Errorf("%w: %q is absolute or empty", ErrInvalidKey, p)
	}
	if strings.IndexByte(p, 0) >= 0 {
		return fmt.Errorf("%w: %q contains a NUL byte", ErrInvalidKey, p)
	}
	for seg := range strings.SplitSeq(p, "/") {
		switch {
		case seg == "":
			return fmt.Errorf("%w: %q has an empty segment", ErrInvalidKey, p)
		case seg == "." || seg == "..":
			return fmt.Errorf("%w: %q has a %q segment", ErrInvalidKey, p, seg)
		case strings.HasPrefix(seg, tmpPrefix):
			return fmt.Errorf("%w: %q has a segment starting with %q (reserved)", ErrInvalidKey, p, tmpPrefix)
		}
	}
	return nil
}

// CheckRange validates a GetRange request against an object of size bytes and
// returns the end offset (exclusive) of the bytes to return.
func CheckRange(key string, size, offset, length int64) (int64, error) {
	if offset < 0 || length < 0 {
		return 0, fmt.Errorf("%w: %s: offset %d length %d", ErrInvalidRange, key, offset, length)
	}
	if offset > size {
		return 0, fmt.Errorf("%w: %s: offset %d past end %d", ErrInvalidRange, key, offset, size)
	}
	end := size
	if length < size-offset {
		end = offset + length
	}
	return end, nil
}
