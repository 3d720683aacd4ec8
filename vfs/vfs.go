// Package vfs is the file system under the WAL's segment log: a small
// interface with the operating system's implementation (Default) and a
// crash-simulating in-memory one (MemFS) that, when power is cut, keeps
// only what was made durable: file contents as of their last flush and
// directory entries as of their directory's last flush. Tests cut it at
// seeded points and inject seeded faults to check that nothing
// acknowledged is lost, and give it a byte budget (Quota) to fill it up.
// A full file system is an error of its own, ErrNoSpace.
package vfs

import (
	"errors"
	"io"
)

// File is an open file.
type File interface {
	io.ReaderAt
	io.WriterAt
	io.Closer
	// Size returns the file's length.
	Size() (int64, error)
	// Sync flushes the file's data and metadata (fsync).
	Sync() error
	// Datasync flushes the file's data and the metadata needed to read it
	// back (fdatasync).
	Datasync() error
	// Truncate changes the file's length.
	Truncate(size int64) error
	// Allocate reserves the file's blocks from offset from up to size
	// (extending it) without writing them, or returns
	// errors.ErrUnsupported where the file system cannot.
	Allocate(from, size int64) error
}

// FS is a file system. Names are slash-separated paths as the operating
// system takes them.
type FS interface {
	// Create makes a new file (it must not exist) open for reading and
	// writing.
	Create(name string) (File, error)
	// Open opens an existing file for reading.
	Open(name string) (File, error)
	// OpenReadWrite opens an existing file for reading and writing.
	OpenReadWrite(name string) (File, error)
	Remove(name string) error
	// Rename renames oldname to newname, replacing it.
	Rename(oldname, newname string) error
	// List returns the names of the entries of dir (fs.ErrNotExist when
	// it is absent).
	List(dir string) ([]string, error)
	// MkdirAll makes dir and its missing parents.
	MkdirAll(dir string) error
	// SyncDir makes dir's entries (creations, renames, removals) durable.
	SyncDir(dir string) error
}

// ErrCut is returned by every operation of a MemFS after its power was
// cut, until Restart.
var ErrCut = errors.New("vfs: power cut")
