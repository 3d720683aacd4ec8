package wal

import (
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io/fs"
	"math"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/lance-context/lance-context/vfs"
)

// ErrLogFailed means a write or flush of the writer's segment file failed.
// What reached the disk is unknown (after a failed flush the kernel may
// have dropped the pages), so the writer stops: a new claim replays what is
// durable and carries on in new files.
var ErrLogFailed = errors.New("wal: segment log write failed")

// ErrNoSpace is wrapped by appends and seals that failed because the disk
// or quota is full (vfs.ErrNoSpace). Where nothing was written (a segment
// that could not be allocated, an entry that did not fit) the writer goes
// on, and the same append succeeds once space is freed; a write or flush
// that fails for lack of space still stops the writer (ErrLogFailed).
var ErrNoSpace = vfs.ErrNoSpace

const (
	// frameHeaderSize: position (8), payload length (4), CRC-32C (4).
	frameHeaderSize = 16
	// defaultSegmentBytes is how much a segment file is preallocated.
	defaultSegmentBytes = 64 << 20
	// firstSegmentBytes is the size of a writer's first segment; each next
	// one is four times the last, up to SegmentBytes: a store that receives
	// little reserves 1 to 5 MiB of disk for segments, not 128, and where
	// segments must be zero-filled (no fallocate) a first append waits
	// milliseconds, not hundreds.
	firstSegmentBytes = 1 << 20
	// minSegmentBytes is the floor of a segment's size on a full disk:
	// when the size wanted cannot be allocated, a quarter of it is tried,
	// and so on down to this (see prepareOnce).
	minSegmentBytes = 256 << 10
	// maxSegmentSpares is how many collected segments are kept for reuse:
	// enough for the segments of a memtable or two, so that in a steady
	// stream of appends new segments are renamed spares (written blocks,
	// whose flushes commit no journal), not new files.
	maxSegmentSpares = 4
	// The next segment is prepared once a spare exists or the current
	// segment is 1/hurryFraction full, whichever comes first: a seal that
	// completes meanwhile then hands over a spare instead of a new file.
	hurryFraction = 4
	// maxKeptFrameBuffer bounds the frame buffer a segment log keeps for
	// its next frame (a group commit's entries are at most MaxEntryBytes,
	// 16 MiB by default, plus one append's overshoot).
	maxKeptFrameBuffer = 32 << 20
	segmentSuffix      = ".seg"
	spareSuffix        = ".spare"
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// segmentDir is the key of a shard's segment directory.
func segmentDir(shard string) string { return shardDir(shard) + "log" }

func segmentName(epoch, seq uint64) string {
	return fmt.Sprintf("%020d-%020d%s", epoch, seq, segmentSuffix)
}

// parseSegmentName returns the epoch and sequence number of a segment
// file name.
func parseSegmentName(name string) (epoch, seq uint64, ok bool) {
	base, found := strings.CutSuffix(name, segmentSuffix)
	if !found {
		return 0, 0, false
	}
	e, s, found := strings.Cut(base, "-")
	if !found {
		return 0, 0, false
	}
	epoch, err1 := strconv.ParseUint(e, 10, 64)
	seq, err2 := strconv.ParseUint(s, 10, 64)
	return epoch, seq, err1 == nil && err2 == nil
}

// segmentLog is a shard writer's log on a local filesystem: frames appended
// to preallocated segment files of the writer's epoch, each made durable by
// one data flush. See doc.go ("Segment log").
type segmentLog struct {
	metrics *Metrics // nil: none
	fs      vfs.FS
	dir     string
	shard   string
	epoch   uint64
	size    int64

	// owned by the writer's loop
	seq    uint64   // of cur
	cur    *segment // nil until the first append
	closed []*segment
	buf    []byte // the last frame's buffer, reused by the next
	dbuf   []byte // the last direct write's aligned buffer, likewise
	// buffered: write segments through the page cache even where direct
	// IO is possible (direct.go).
	buffered bool
	next     chan prepared // the segment after cur, prepared in the background
	quit     chan struct{} // closed by close: stop preparing

	// genRoot, when set, is the directory whose files are the store's
	// objects, on fs: a seal may then make a segment its generation
	// (inplace.go). runs is notePlaced's scratch; cutNext: the current
	// segment was handed to a seal, the next frame starts a new one.
	genRoot    string
	placeMin   int   // the shortest value run a seal references
	minInPlace int64 // the fewest placed bytes a seal in place takes
	runs       []valueRun
	cutNext    bool

	mu     sync.Mutex // guards spares (also used by the preparing goroutine)
	spares []string
	hurry  atomic.Bool   // prepare the next segment now, spare or not
	wake   chan struct{} // the preparer's doorbell: a spare, or hurry
}

type segment struct {
	f    vfs.File
	path string
	off  int64  // where the next frame goes
	cap  int64  // preallocated bytes
	last uint64 // position of the last frame written
	// placed: the memtable's binary arrays whose value runs this
	// segment's frames hold, at these offsets (notePlaced), and their bytes.
	placed      map[arrow.Array]int64
	placedBytes int64
	gen         bool // handed to a seal in place: a generation's file, never a spare
	// direct: the file writes by direct IO (direct.go); tail then holds
	// the bytes of its last, partial block, which the next write repeats.
	direct bool
	tail   []byte
}

type prepared struct {
	seg *segment
	err error
}

func newSegmentLog(fsys vfs.FS, dir, shard string, epoch uint64, size int64) *segmentLog {
	if size <= 0 {
		size = defaultSegmentBytes
	}
	return &segmentLog{fs: fsys, dir: dir, shard: shard, epoch: epoch, size: size, next: make(chan prepared, 1), quit: make(chan struct{}), wake: make(chan struct{}, 1)}
}

// start prepares the first segment in the background.
func (l *segmentLog) start() error {
	// The log's directories are the root's: _lc_wal/{shard}/log.
	root := strings.TrimSuffix(l.dir, filepath.FromSlash(segmentDir(l.shard)))
	if err := mkdirAllDurable(l.fs, root, l.dir); err != nil {
		return fmt.Errorf("wal: segment directory: %w", err)
	}
	go l.prepareAsync(1)
	return nil
}

// mkdirAllDurable makes dir and its missing parents, and flushes every
// directory from root's parent down to dir's parent, whether it made
// the entry or not: a segment whose name is durable is of no use in a
// directory whose own entry is not, and an earlier attempt may have made
// the directories and failed before flushing them.
func mkdirAllDurable(fsys vfs.FS, root, dir string) error {
	if err := fsys.MkdirAll(dir); err != nil {
		return err
	}
	for d := filepath.Clean(dir); filepath.Dir(d) != d; d = filepath.Dir(d) {
		if err := fsys.SyncDir(filepath.Dir(d)); err != nil {
			return err
		}
		if d == filepath.Clean(root) {
			break
		}
	}
	return nil
}

func (l *segmentLog) prepareAsync(seq uint64) {
	for seq > 1 && !l.hurry.Load() && !l.hasSpare() {
		select {
		case <-l.wake:
		case <-l.quit:
			l.next <- prepared{err: errLogClosed}
			return
		}
	}
	s, err := l.prepare(seq)
	l.next <- prepared{seg: s, err: err}
}

var (
	errLogClosed    = errors.New("writer closed")
	errSpareArrived = errors.New("a spare arrived")
)

// ring wakes the preparer, if it waits.
func (l *segmentLog) ring() {
	select {
	case l.wake <- struct{}{}:
	default:
	}
}

// prepare makes segment seq exist at its size, its blocks allocated, under
// a durable name: a collected segment renamed (and grown if it is smaller),
// or a new file. Frames written into blocks that already hold data flush
// fastest (no extent changes, so no journal commit), hence the preference
// for spares.
func (l *segmentLog) prepare(seq uint64) (*segment, error) {
	for {
		s, err := l.prepareOnce(seq)
		if !errors.Is(err, errSpareArrived) {
			return s, err
		}
	}
}

// prepareOnce is one attempt of prepare; it gives up zero-filling a new
// file when a spare arrives (errSpareArrived), to take that instead.
func (l *segmentLog) prepareOnce(seq uint64) (*segment, error) {
	path := filepath.Join(l.dir, segmentName(l.epoch, seq))
	want := l.size
	if seq < 5 { // 1, 4, 16, 64 MiB
		want = min(want, firstSegmentBytes<<(2*(seq-1)))
	}
	var f vfs.File
	if spare := l.takeSpare(); spare != "" {
		if err := l.fs.Rename(spare, path); err == nil {
			if f, err = l.fs.OpenReadWrite(path); err != nil {
				f = nil
				l.fs.Remove(path) // make way for a new file
			}
		}
	}
	if f == nil {
		var err error
		if f, err = l.fs.Create(path); err != nil {
			return nil, fmt.Errorf("wal: create segment: %w", err)
		}
	}
	size, err := f.Size()
	degraded := false
	for err == nil && size < want {
		// A new file, or a reused one smaller than this segment should be:
		// allocate the rest without writing it. The first flush into each
		// new block then also commits the journal (extent conversion), a
		// fraction of a millisecond; zero-filling instead wrote every new
		// segment twice and its bursts lengthened the flushes of frames
		// (single-record p99 18-33 ms against 14-16 ms allocated).
		from := size
		if err = f.Allocate(from, want); errors.Is(err, errors.ErrUnsupported) {
			err = zeroFill(f, from, want, l.quit, func() bool { return from == 0 && l.hasSpare() })
		}
		if err == nil {
			err = f.Sync()
		}
		if vfs.IsNoSpace(err) && want > minSegmentBytes {
			// The disk cannot hold the size wanted: a smaller segment,
			// down to minSegmentBytes, keeps appends going while space
			// remains (what the failed attempt allocated stays in it).
			want = max(want/4, minSegmentBytes)
			degraded = true
			size, err = f.Size()
			continue
		}
		if err == nil {
			size, err = f.Size()
		}
		break
	}
	if err == nil && degraded && l.metrics != nil {
		l.metrics.SegmentsDegraded.Inc()
	}
	if err == nil {
		// The name must be durable before a frame in it is acknowledged.
		err = l.fs.SyncDir(l.dir)
	}
	if err != nil {
		f.Close()
		l.fs.Remove(path)
		return nil, fmt.Errorf("wal: prepare segment: %w", err)
	}
	seg := &segment{f: f, path: path, cap: size}
	if !l.buffered {
		seg.direct = setDirect(f)
	}
	return seg, nil
}

func (l *segmentLog) hasSpare() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.spares) > 0
}

func (l *segmentLog) takeSpare() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.spares) == 0 {
		return ""
	}
	s := l.spares[len(l.spares)-1]
	l.spares = l.spares[:len(l.spares)-1]
	return s
}

// append makes frame durable as the entry at pos. frame starts with
// frameHeaderSize bytes of room for the header, which append fills.
func (l *segmentLog) append(pos uint64, frame []byte) error {
	payload := len(frame) - frameHeaderSize
	if payload <= 0 || int64(payload) > math.MaxUint32 {
		return fmt.Errorf("wal: entry of %d bytes does not fit a frame", payload)
	}
	binary.LittleEndian.PutUint64(frame[0:8], pos)
	binary.LittleEndian.PutUint32(frame[8:12], uint32(payload))
	crc := crc32.Update(crc32.Checksum(frame[0:12], castagnoli), castagnoli, frame[frameHeaderSize:])
	binary.LittleEndian.PutUint32(frame[12:16], crc)
	if l.cur == nil || l.cutNext || (l.cur.last != 0 && l.cur.off+int64(len(frame)) > l.cur.cap) {
		if err := l.rotate(); err != nil {
			return err
		}
	}
	// A frame larger than a segment goes alone into one and grows it; the
	// data flush then also flushes the new size. The blocks are allocated
	// first, so that a full disk fails here, with nothing written and the
	// writer still sound, rather than in the write.
	end := l.cur.off + int64(len(frame))
	if l.cur.direct {
		end = alignUp(end) // the block the write pads to
	}
	if end > l.cur.cap {
		switch err := l.cur.f.Allocate(l.cur.cap, end); {
		case err == nil:
			l.cur.cap = end
		case vfs.IsNoSpace(err):
			return fmt.Errorf("wal: shard %s: no room for an entry of %d bytes: %w", l.shard, len(frame), err)
		case !errors.Is(err, errors.ErrUnsupported):
			return fmt.Errorf("%w: %w", ErrLogFailed, err)
		}
	}
	if err := l.write(frame); err != nil {
		return fmt.Errorf("%w: %w", ErrLogFailed, err)
	}
	if err := l.cur.f.Datasync(); err != nil {
		return fmt.Errorf("%w: %w", ErrLogFailed, err)
	}
	l.cur.off += int64(len(frame))
	l.cur.last = pos
	if l.cur.off >= l.cur.cap/hurryFraction && !l.hurry.Load() {
		l.hurry.Store(true)
		l.ring()
	}
	return nil
}

// rotate makes the prepared segment current and starts preparing the next.
func (l *segmentLog) rotate() error {
	l.hurry.Store(true) // a frame larger than what is left may come early
	l.ring()
	p := <-l.next
	if p.err != nil {
		// One synchronous retry: preparing failed in the background, maybe
		// for a passing reason (a full disk that was cleaned up).
		p.seg, p.err = l.prepare(l.seq + 1)
		if p.err != nil {
			go func() { l.next <- prepared{err: p.err} }()
			if vfs.IsNoSpace(p.err) {
				// Not even the smallest segment fits. Nothing was written,
				// so the writer goes on: the next append prepares again,
				// and succeeds as soon as space is freed.
				return fmt.Errorf("wal: shard %s: no room for the next log segment (%d bytes at least): %w", l.shard, minSegmentBytes, p.err)
			}
			return fmt.Errorf("%w: %w", ErrLogFailed, p.err)
		}
	}
	if l.cur != nil {
		l.cur.f.Close()
		l.cur.f = nil
		l.closed = append(l.closed, l.cur)
	}
	l.cur = p.seg
	l.seq++
	l.cutNext = false
	l.hurry.Store(false)
	go l.prepareAsync(l.seq + 1)
	return nil
}

// collect retires the closed segments whose frames are all at or below
// upTo (sealed): the first few become spares for later segments, the rest
// are deleted. Neither is flushed: after a crash such a file is a segment
// of sealed frames, which replay skips and the next claim deletes.
func (l *segmentLog) collect(upTo uint64) {
	for len(l.closed) > 0 && l.closed[0].last <= upTo {
		s := l.closed[0]
		l.closed = l.closed[1:]
		l.mu.Lock()
		keep := len(l.spares) < maxSegmentSpares && !s.gen
		l.mu.Unlock()
		if keep {
			spare := strings.TrimSuffix(s.path, segmentSuffix) + spareSuffix
			if l.fs.Rename(s.path, spare) == nil {
				l.mu.Lock()
				l.spares = append(l.spares, spare)
				l.mu.Unlock()
				l.ring()
				continue
			}
		}
		l.fs.Remove(s.path)
	}
}

// close releases the writer's files, after stopping the preparation in
// flight. A prepared segment stays: it holds no frame, and the next claim
// deletes it.
func (l *segmentLog) close() {
	if l.cur != nil && l.cur.f != nil {
		l.cur.f.Close()
		l.cur.f = nil
	}
	close(l.quit)
	if p := <-l.next; p.seg != nil {
		p.seg.f.Close()
	}
}

// segmentFile is a segment found in the directory.
type segmentFile struct {
	epoch, seq uint64
	path       string
}

// listSegments returns the segments of dir with epoch >= fromEpoch, in log
// order (epoch, then sequence number).
func listSegments(fsys vfs.FS, dir string, fromEpoch uint64) ([]segmentFile, error) {
	ents, err := fsys.List(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("wal: list segments: %w", err)
	}
	var out []segmentFile
	for _, e := range ents {
		if epoch, seq, ok := parseSegmentName(e); ok && epoch >= fromEpoch {
			out = append(out, segmentFile{epoch: epoch, seq: seq, path: filepath.Join(dir, e)})
		}
	}
	slices.SortFunc(out, func(a, b segmentFile) int {
		if a.epoch != b.epoch {
			return cmp.Compare(a.epoch, b.epoch)
		}
		return cmp.Compare(a.seq, b.seq)
	})
	return out, nil
}

// sweepSegments deletes the segment files and spares in dir of epochs
// below epoch. A deposed writer may still write into one; nothing it
// writes there can be acknowledged (see doc.go).
func sweepSegments(fsys vfs.FS, dir string, epoch uint64) {
	ents, err := fsys.List(dir)
	if err != nil {
		return
	}
	for _, e := range ents {
		name := e
		if base, ok := strings.CutSuffix(name, spareSuffix); ok {
			name = base + segmentSuffix
		}
		if ep, _, ok := parseSegmentName(name); ok && ep < epoch {
			fsys.Remove(filepath.Join(dir, e))
		}
	}
}

// zeroFill writes zeros to f from offset from up to size, flushing every
// 8 MiB so that the flushes of frames never queue behind a whole segment
// of them. It stops early with errSpareArrived when abandon says so.
func zeroFill(f vfs.File, from, size int64, quit <-chan struct{}, abandon func() bool) error {
	zero := make([]byte, 1<<20)
	for off, i := from, 1; off < size; off, i = off+int64(len(zero)), i+1 {
		select {
		case <-quit:
			return errLogClosed
		default:
		}
		if abandon() {
			return errSpareArrived
		}
		n := min(int64(len(zero)), size-off)
		if _, err := f.WriteAt(zero[:n], off); err != nil {
			return err
		}
		if i%8 == 0 {
			if err := f.Datasync(); err != nil {
				return err
			}
		}
	}
	return nil
}

// spaceProbe is the file CheckSpace allocates in a segment directory.
const spaceProbe = "space-probe.tmp"

// CheckSpace reports whether a writer with opts would find room for its
// first log segment: it allocates a file of that size in the segment
// directory and removes it. An error wraps ErrNoSpace when the disk is
// full. Nil where the log is objects (no segment log). A store whose
// disk filled up checks this before it claims its shard again, so that a
// full disk does not make a new epoch per write.
func CheckSpace(opts Options) error {
	dir, fsys := logPlace(&opts)
	if dir == "" || opts.ObjectLog {
		return nil
	}
	if err := fsys.MkdirAll(dir); err != nil {
		return fmt.Errorf("wal: shard %s: space check: %w", opts.Shard, err)
	}
	p := filepath.Join(dir, spaceProbe)
	_ = fsys.Remove(p) // left by a crash
	f, err := fsys.Create(p)
	if err != nil {
		return fmt.Errorf("wal: shard %s: space check: %w", opts.Shard, err)
	}
	err = f.Allocate(0, firstSegmentBytes)
	f.Close()
	_ = fsys.Remove(p)
	if err != nil && !errors.Is(err, errors.ErrUnsupported) {
		return fmt.Errorf("wal: shard %s: space check: no room for a %d-byte log segment: %w", opts.Shard, firstSegmentBytes, err)
	}
	return nil
}
