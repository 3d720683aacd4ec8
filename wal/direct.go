package wal

import (
	"errors"
	"syscall"
	"unsafe"

	"github.com/lance-context/lance-context/vfs"
)

// Segments write by direct IO where the file system allows it: doc.go,
// "Segment log", says how and why.

// directFile is a file that can bypass the page cache (vfs's OS files).
type directFile interface {
	SetDirect(on bool) error
}

// setDirect turns direct IO on for f, and says whether it is on.
func setDirect(f vfs.File) bool {
	d, ok := f.(directFile)
	return ok && d.SetDirect(true) == nil
}

// write writes frame at the current segment's end: by direct IO, the
// tail and frame in whole blocks, zero-padded, or else as it is. A frame
// that put assembled in the aligned buffer right after room for the tail
// is written where it is; another (the segment rotated since, or the
// frame was assembled elsewhere) is copied into it.
func (l *segmentLog) write(frame []byte) error {
	s := l.cur
	if !s.direct {
		_, err := s.f.WriteAt(frame, s.off)
		return err
	}
	n := len(s.tail) + len(frame)
	total := int(alignUp(int64(n)))
	var buf []byte
	if cap(l.dbuf) >= total && unsafe.SliceData(frame) == unsafe.SliceData(l.dbuf[len(s.tail):cap(l.dbuf)]) {
		buf = l.dbuf[:total]
		copy(buf, s.tail) // into the room before the frame
	} else {
		if within(frame, l.dbuf) {
			l.dbuf = nil // the frame sits elsewhere in it: copy into new memory
		}
		buf = l.alignedBuf(total)
		copy(buf, s.tail)
		copy(buf[len(s.tail):], frame)
	}
	clear(buf[n:])
	start := s.off - int64(len(s.tail))
	if _, err := s.f.WriteAt(buf, start); err != nil {
		if !errors.Is(err, syscall.EINVAL) {
			return err
		}
		// The file system took O_DIRECT but refuses these writes (an
		// alignment it wants larger): nothing was written, so write
		// through the page cache from now on.
		if d, ok := s.f.(directFile); !ok || d.SetDirect(false) != nil {
			return err
		}
		s.direct, s.tail = false, nil
		_, err := s.f.WriteAt(frame, s.off)
		return err
	}
	keep := n % vfs.DirectAlign
	s.tail = append(s.tail[:0], buf[n-keep:n]...)
	if cap(buf) > maxKeptFrameBuffer {
		l.dbuf = nil
	}
	return nil
}

// within says whether b lies in buf's memory (up to its capacity).
func within(b, buf []byte) bool {
	if len(b) == 0 || cap(buf) == 0 {
		return false
	}
	p := uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	lo := uintptr(unsafe.Pointer(unsafe.SliceData(buf)))
	return p >= lo && p < lo+uintptr(cap(buf))
}

// alignUp rounds n up to a whole number of direct IO blocks.
func alignUp(n int64) int64 {
	return (n + vfs.DirectAlign - 1) &^ (vfs.DirectAlign - 1)
}

// alignedBuf returns n bytes (a multiple of vfs.DirectAlign) at an
// address aligned to it, reusing the last one's memory when it is large
// enough.
func (l *segmentLog) alignedBuf(n int) []byte {
	if cap(l.dbuf) >= n {
		return l.dbuf[:n]
	}
	const align = vfs.DirectAlign
	b := make([]byte, n+align)
	skew := int(uintptr(unsafe.Pointer(unsafe.SliceData(b))) & (align - 1))
	if skew != 0 {
		b = b[align-skew:]
	}
	l.dbuf = b[:n:n]
	return l.dbuf
}
