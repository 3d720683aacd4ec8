package vfs

import "errors"

// ErrNoSpace means a write, allocation or creation failed because the
// file system (or the user's quota on it) is full: ENOSPC or EDQUOT from
// the operating system, or an exhausted Quota. Errors of the file systems
// here and of objstore's local store wrap it (errors.Is), beside the
// operating system's own error. It is a condition of its own: nothing
// about the data is wrong, and the same write succeeds once space is
// freed.
var ErrNoSpace = errors.New("no space left on device")

// NoSpace returns err wrapped with ErrNoSpace when it is a full file
// system or quota (ENOSPC, EDQUOT) and does not wrap ErrNoSpace yet, and
// err unchanged otherwise (nil stays nil).
func NoSpace(err error) error {
	if err == nil || errors.Is(err, ErrNoSpace) || !isNoSpaceErrno(err) {
		return err
	}
	return &noSpaceError{err}
}

// noSpaceError is an operating system's ENOSPC or EDQUOT that also wraps
// ErrNoSpace; its message is the operating system's alone (it says "no
// space left on device" once).
type noSpaceError struct{ err error }

func (e *noSpaceError) Error() string   { return e.err.Error() }
func (e *noSpaceError) Unwrap() []error { return []error{ErrNoSpace, e.err} }

// IsNoSpace reports whether err says the file system or quota is full:
// it wraps ErrNoSpace, or the operating system's ENOSPC or EDQUOT.
func IsNoSpace(err error) bool {
	return err != nil && (errors.Is(err, ErrNoSpace) || isNoSpaceErrno(err))
}
