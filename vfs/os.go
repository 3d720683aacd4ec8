package vfs

import (
	"fmt"
	"os"
)

// Default is the operating system's file system.
var Default FS = osFS{}

type osFS struct{}

type osFile struct{ *os.File }

func (osFS) Create(name string) (File, error) {
	f, err := os.OpenFile(name, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return nil, NoSpace(err)
	}
	return osFile{f}, nil
}

func (osFS) Open(name string) (File, error) {
	f, err := os.Open(name)
	if err != nil {
		return nil, err
	}
	return osFile{f}, nil
}

func (osFS) OpenReadWrite(name string) (File, error) {
	f, err := os.OpenFile(name, os.O_RDWR, 0)
	if err != nil {
		return nil, err
	}
	return osFile{f}, nil
}

func (osFS) Remove(name string) error             { return os.Remove(name) }
func (osFS) Rename(oldname, newname string) error { return NoSpace(os.Rename(oldname, newname)) }
func (osFS) MkdirAll(dir string) error            { return NoSpace(os.MkdirAll(dir, 0o755)) }

// Link gives the file oldname a second name, newname (which must not
// exist): a hard link, durable once newname's directory is flushed.
func (osFS) Link(oldname, newname string) error { return NoSpace(os.Link(oldname, newname)) }

func (osFS) List(dir string) ([]string, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	out := make([]string, len(ents))
	for i, e := range ents {
		out[i] = e.Name()
	}
	return out, nil
}

func (osFS) SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("fsync directory %s: %w", dir, NoSpace(err))
	}
	return nil
}

func (f osFile) Size() (int64, error) {
	fi, err := f.Stat()
	if err != nil {
		return 0, err
	}
	return fi.Size(), nil
}

// The mutating methods wrap a full file system's error with ErrNoSpace.

func (f osFile) WriteAt(p []byte, off int64) (int, error) {
	n, err := f.File.WriteAt(p, off)
	return n, NoSpace(err)
}

func (f osFile) Sync() error                     { return NoSpace(f.File.Sync()) }
func (f osFile) Truncate(size int64) error       { return NoSpace(f.File.Truncate(size)) }
func (f osFile) Datasync() error                 { return NoSpace(datasync(f.File)) }
func (f osFile) Allocate(from, size int64) error { return NoSpace(allocate(f.File, from, size)) }

// SetDirect turns direct IO on or off (Linux's O_DIRECT; elsewhere, and
// where the file system refuses it, errors.ErrUnsupported). While it is
// on, a write's buffer, offset and length must be multiples of
// DirectAlign.
func (f osFile) SetDirect(on bool) error { return setDirect(f.File, on) }

// DirectAlign is the alignment direct IO takes on every device (sectors
// of 512 bytes or 4 KiB).
const DirectAlign = 4096
