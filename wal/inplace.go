package wal

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"unsafe"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/lance-context/lance-context/vfs"
)

// A seal in place makes the segment that holds a memtable's frames its
// generation file (doc.go, "Seal in place"): the segment's frames already
// hold the rows' large value runs, so the seal writes only what they lack
// (end offsets, the small columns, the sequence numbers, the Lance
// metadata) after the frames, and links the file into gen/.

const (
	// placeMin: value runs shorter than this are written again by the
	// seal rather than referenced (a page per run costs metadata).
	placeMin = 1 << 10
	// minInPlaceBytes: a memtable whose frames in the current segment hold
	// fewer placed bytes than this is sealed by writing a new file (a
	// flush of a few rows would otherwise cost a new segment).
	minInPlaceBytes = 1 << 20
)

// errNotShared: a generation linked in place is not the store's object
// of its key; the writer seals into new files from then on.
var errNotShared = errors.New("wal: the log's directory does not hold the store's objects")

// linker is a file system that can give a file a second name.
type linker interface {
	Link(oldname, newname string) error
}

// inPlace is a segment handed to a seal to become a generation.
type inPlace struct {
	fs     vfs.FS
	path   string                // the segment file
	end    int64                 // where its frames end
	placed map[arrow.Array]int64 // memtable arrays whose value runs its frames hold, at these offsets
	root   string                // the store's objects are the files under root
}

// lookup is the generation writer's file.WriterOptions.Placed.
func (p *inPlace) lookup(arr arrow.Array) (int64, bool) {
	off, ok := p.placed[arr]
	return off, ok
}

// valueRun is a piece of a frame at least placeMin long: where it was in
// memory when the frame was assembled, and where it is in the segment.
type valueRun struct {
	start uintptr
	n     int
	off   int64
}

// valueBytes returns the value run of a binary array (the bytes its
// offsets span), or nil for another type.
func valueBytes(a arrow.Array) []byte {
	switch a.DataType().ID() {
	case arrow.STRING, arrow.BINARY, arrow.LARGE_STRING, arrow.LARGE_BINARY:
		if v, ok := a.(interface{ ValueBytes() []byte }); ok {
			return v.ValueBytes()
		}
	}
	return nil
}

// notePlaced records where the frame just written at offset at of the
// current segment holds the value runs of recs' binary columns. The frame
// is the entry header msg, then the pieces of msgs; its large pieces are
// the batches' own buffers, so a value run is found by its address. Only
// the pieces of this frame are compared, all alive, so an address names
// one buffer.
func (l *segmentLog) notePlaced(at int64, header []byte, msgs []*encoded, recs []arrow.RecordBatch) {
	off := at + frameHeaderSize + int64(len(header))
	runs := l.runs[:0]
	for _, m := range msgs {
		for _, p := range m.parts {
			if len(p) >= l.placeMin {
				runs = append(runs, valueRun{start: uintptr(unsafe.Pointer(unsafe.SliceData(p))), n: len(p), off: off})
			}
			off += int64(len(p))
		}
	}
	l.runs = runs[:0]
	if len(runs) == 0 {
		return
	}
	for _, rec := range recs {
		for _, c := range rec.Columns() {
			v := valueBytes(c)
			if len(v) < l.placeMin {
				continue
			}
			p := uintptr(unsafe.Pointer(unsafe.SliceData(v)))
			for _, r := range runs {
				if p >= r.start && p+uintptr(len(v)) <= r.start+uintptr(r.n) {
					if l.cur.placed == nil {
						l.cur.placed = map[arrow.Array]int64{}
					}
					l.cur.placed[c] = r.off + int64(p-r.start)
					l.cur.placedBytes += int64(len(v))
					break
				}
			}
		}
	}
}

// cut ends the current segment for the memtable being sealed: when its
// frames hold at least minInPlaceBytes of the memtable's value runs, it is
// handed to the seal (and the next frame starts a new segment); else nil,
// and the seal writes a file of its own. Either way the current segment's
// placements are the memtable's, which the seal takes: they are dropped.
func (l *segmentLog) cut() *inPlace {
	s := l.cur
	if s == nil {
		return nil
	}
	placed, bytes := s.placed, s.placedBytes
	s.placed, s.placedBytes = nil, 0
	if l.genRoot == "" || bytes < l.minInPlace {
		return nil
	}
	// The file becomes a generation whatever the seal's outcome (it may
	// be linked before a failure): never a spare.
	s.gen = true
	l.cutNext = true
	l.hurry.Store(true)
	l.ring()
	return &inPlace{fs: l.fs, path: s.path, end: s.off, placed: placed, root: l.genRoot}
}

// forget drops the current segment's placements (their memtable is being
// sealed into a file of its own).
func (l *segmentLog) forget() {
	if l.cur != nil {
		l.cur.placed, l.cur.placedBytes = nil, 0
	}
}

// open returns the segment opened for the seal to write the generation's
// rest into, from its frames' end on.
func (p *inPlace) open() (vfs.File, *bufio.Writer, error) {
	f, err := p.fs.OpenReadWrite(p.path)
	if err != nil {
		return nil, nil, fmt.Errorf("wal: open segment to seal in place: %w", err)
	}
	return f, bufio.NewWriterSize(io.NewOffsetWriter(f, p.end), 1<<20), nil
}

// finish makes the written generation durable at size bytes and gives it
// its name in gen/, key (a link: the segment keeps its own name, and its
// frames stay the log's until the manifest lists the generation).
func (p *inPlace) finish(f vfs.File, bw *bufio.Writer, size int64, key string) error {
	err := bw.Flush()
	if err == nil {
		err = f.Truncate(size) // the segment's preallocated rest
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("wal: seal in place: %w", err)
	}
	name := filepath.Join(p.root, filepath.FromSlash(key))
	dir := filepath.Dir(name)
	if err := mkdirAllDurable(p.fs, p.root, dir); err != nil {
		return fmt.Errorf("wal: seal in place: %w", err)
	}
	l, ok := p.fs.(linker)
	if !ok {
		return fmt.Errorf("wal: seal in place: the log's file system cannot link")
	}
	if err := l.Link(p.path, name); err != nil {
		return fmt.Errorf("wal: seal in place: %w", err)
	}
	if err := p.fs.SyncDir(dir); err != nil {
		return fmt.Errorf("wal: seal in place: %w", err)
	}
	return nil
}
