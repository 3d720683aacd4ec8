package wal

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"io/fs"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/lance-context/lance-context/objstore"
	"github.com/lance-context/lance-context/vfs"
)

// ErrCorrupt is wrapped by every *CorruptionError: a shard's log holds
// damaged bytes where an entry should be, and valid entries after them.
// Replay does not skip the damage (that would drop the entries behind it,
// acknowledged ones among them); the shard cannot be claimed until the log
// is repaired (Repair, `lance-context wal repair`).
var ErrCorrupt = errors.New("wal: log corrupt")

// CorruptionError says where a shard's log is damaged. Match it with
// errors.As; errors.Is(err, ErrCorrupt) holds too.
type CorruptionError struct {
	Shard string
	// Segment is the segment file name, or the entry's object key in the
	// object log.
	Segment string
	// Offset is the byte offset in Segment where the damage starts (0 in
	// the object log).
	Offset int64
	// Position is the first log position that cannot be read: it and every
	// position after it are lost to replay.
	Position uint64
	// Next is the first valid position found after the damage (0: none
	// was found, the entry itself is bad).
	Next   uint64
	Reason string
}

func (e *CorruptionError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "wal: shard %s log corrupt at position %d (%s", e.Shard, e.Position, e.Segment)
	if !strings.HasSuffix(e.Segment, ".arrow") {
		fmt.Fprintf(&b, " offset %d", e.Offset)
	}
	fmt.Fprintf(&b, "): %s", e.Reason)
	if e.Next > 0 {
		fmt.Fprintf(&b, "; valid entries follow from position %d", e.Next)
	}
	b.WriteString("; replay refuses to skip them: repair the log (lance-context wal repair) to truncate it at the damage")
	return b.String()
}

func (e *CorruptionError) Unwrap() error { return ErrCorrupt }

// segReader reads the frames of one segment file.
type segReader struct {
	f    vfs.File
	name string
	size int64
	// checked counts the candidates find read whole and checksummed.
	checked int
}

// openSegment opens a segment for reading; nil, nil when it vanished (a
// deposed writer recycled it after its frames were sealed).
func openSegment(fsys vfs.FS, p string) (*segReader, error) {
	f, err := fsys.Open(p)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("wal: read segment: %w", err)
	}
	size, err := f.Size()
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("wal: read segment: %w", err)
	}
	return &segReader{f: f, name: filepath.Base(p), size: size}, nil
}

func (r *segReader) close() {
	if r != nil {
		r.f.Close()
	}
}

// frameAt reads the frame at off. When the bytes there are not a whole
// frame with a matching checksum it returns why (bad != "").
func (r *segReader) frameAt(off int64) (pos uint64, payload []byte, bad string, err error) {
	if off+frameHeaderSize > r.size {
		return 0, nil, "end of file", nil
	}
	var hdr [frameHeaderSize]byte
	if _, err := r.f.ReadAt(hdr[:], off); err != nil {
		return 0, nil, "", fmt.Errorf("wal: read segment %s: %w", r.name, err)
	}
	pos = binary.LittleEndian.Uint64(hdr[0:8])
	n := int64(binary.LittleEndian.Uint32(hdr[8:12]))
	switch {
	case pos == 0 && n == 0:
		return 0, nil, "zeros", nil
	case pos == 0 || n == 0:
		return 0, nil, "bad frame header", nil
	case off+frameHeaderSize+n > r.size:
		return 0, nil, fmt.Sprintf("frame length %d past the end of the file", n), nil
	}
	payload = make([]byte, n)
	if _, err := r.f.ReadAt(payload, off+frameHeaderSize); err != nil && !errors.Is(err, io.EOF) {
		return 0, nil, "", fmt.Errorf("wal: read segment %s: %w", r.name, err)
	}
	crc := crc32.Update(crc32.Checksum(hdr[0:12], castagnoli), castagnoli, payload)
	if crc != binary.LittleEndian.Uint32(hdr[12:16]) {
		return 0, nil, "checksum mismatch", nil
	}
	return pos, payload, "", nil
}

// find looks from offset from on, byte by byte, for a valid frame at a
// position in [lo, hi): a frame that follows damage, which frame
// boundaries no longer lead to.
func (r *segReader) find(from int64, lo, hi uint64) (off int64, pos uint64, payload []byte, found bool, err error) {
	const chunk = 1 << 20
	buf := make([]byte, chunk+frameHeaderSize+4) // a candidate's header and payload start
	for base := from; base+frameHeaderSize <= r.size; base += chunk {
		n, err := r.f.ReadAt(buf[:min(int64(len(buf)), r.size-base)], base)
		if err != nil && !errors.Is(err, io.EOF) {
			return 0, 0, nil, false, fmt.Errorf("wal: read segment %s: %w", r.name, err)
		}
		b := buf[:n]
		for i := 0; i+frameHeaderSize <= len(b) && i < chunk; i++ {
			// A header's position is not zero, so no frame starts more
			// than 7 bytes before the next nonzero byte: skip zeros of
			// preallocation a word at a time.
			if b[i] == 0 {
				if nz := nextNonZero(b, i); nz-7 > i {
					i = nz - 8 // the loop's i++ makes it nz-7
					continue
				}
			}
			p := binary.LittleEndian.Uint64(b[i:])
			if p < lo || p >= hi {
				continue
			}
			l := int64(binary.LittleEndian.Uint32(b[i+8:]))
			q := base + int64(i)
			if l == 0 || q+frameHeaderSize+l > r.size {
				continue
			}
			// A frame's payload is a WAL entry, an Arrow IPC stream, so it
			// starts with the IPC continuation marker. Stale data of a
			// reused segment is full of small integers that pass the
			// checks above; reading and checksumming each one's claimed
			// length made the search quadratic (minutes for one 64 MiB
			// segment at replay).
			if i+frameHeaderSize+4 <= len(b) && binary.LittleEndian.Uint32(b[i+frameHeaderSize:]) != ipcContinuation {
				continue
			}
			r.checked++
			pos, payload, bad, err := r.frameAt(q)
			if err != nil {
				return 0, 0, nil, false, err
			}
			if bad == "" {
				return q, pos, payload, true, nil
			}
		}
	}
	return 0, 0, nil, false, nil
}

// ipcContinuation is the marker an Arrow IPC message starts with, and so
// every entry's payload.
const ipcContinuation = 0xFFFFFFFF

// nextNonZero returns the index of the first nonzero byte of b at or
// after i (len(b) if none).
func nextNonZero(b []byte, i int) int {
	for ; i+8 <= len(b); i += 8 {
		if binary.LittleEndian.Uint64(b[i:]) != 0 {
			break
		}
	}
	for ; i < len(b) && b[i] == 0; i++ {
	}
	return i
}

// positionBound is a position no frame of segs can reach when the log
// continues from next: every frame takes more than frameHeaderSize bytes.
// It keeps the byte-wise search from checking the checksum of every
// small integer in stale data.
func positionBound(readers []*segReader, next uint64) uint64 {
	var total int64
	for _, r := range readers {
		if r != nil {
			total += r.size
		}
	}
	return next + uint64(total/(frameHeaderSize+1)) + 1
}

// replaySegments reads the frames of segs (in log order) from position
// next on, calling adopt with each frame at the next expected position,
// and returns the position after the last one adopted.
//
// Where a file's frames stop (zeros of preallocation, a torn write, the
// remains of the file's earlier life as another segment) the rest of the
// file is searched for a valid frame at the expected position or beyond.
// None there, and the log continues at the expected position at the start
// of a later file or ends: a torn tail, which replay truncates. A frame
// beyond the expected position (here or in a later file) means frames in
// between were damaged or lost: a *CorruptionError naming where the
// readable log stops. Positions are dense (doc.go, "Segment log"), so that
// cannot happen in a log that was only cut short.
func replaySegments(fsys vfs.FS, shard string, segs []segmentFile, next uint64, adopt func(seg string, off int64, pos uint64, payload []byte) error) (uint64, error) {
	readers := make([]*segReader, len(segs))
	defer func() {
		for _, r := range readers {
			r.close()
		}
	}()
	for i, sf := range segs {
		r, err := openSegment(fsys, sf.path)
		if err != nil {
			return next, err
		}
		readers[i] = r
	}
	hi := positionBound(readers, next)
	// end is where the readable frames last stopped since the last
	// adopted one: where damage before a later frame lies.
	type spot struct {
		i   int
		off int64
		why string
	}
	var end *spot
	rechecks := 0
	expect := next
	i, off := 0, int64(0)
	for i < len(readers) {
		r := readers[i]
		if r == nil {
			i, off = i+1, 0
			continue
		}
		pos, payload, bad, err := r.frameAt(off)
		if err != nil {
			return expect, err
		}
		if bad != "" {
			end = &spot{i: i, off: off, why: bad}
			q, p, pl, found, err := r.find(off+1, expect, hi)
			if err != nil {
				return expect, err
			}
			if !found {
				i, off = i+1, 0
				continue
			}
			off, pos, payload = q, p, pl
		}
		switch {
		case pos < expect: // sealed, or the file's earlier life
		case pos == expect:
			if err := adopt(r.name, off, pos, payload); err != nil {
				return expect, err
			}
			expect++
			end = nil
		default:
			if end != nil && rechecks < 3 {
				// A deposed writer may have been writing the frame
				// there while it was read: read it again before
				// calling it damage.
				rechecks++
				if p, _, bad, err := readers[end.i].frameAt(end.off); err == nil && bad == "" && p == expect {
					i, off, end = end.i, end.off, nil
					continue
				}
			}
			c := &CorruptionError{Shard: shard, Segment: r.name, Offset: off, Position: expect, Next: pos,
				Reason: fmt.Sprintf("frame of position %d follows position %d: positions %d to %d are missing", pos, expect-1, expect, pos-1)}
			if end != nil {
				c.Segment, c.Offset = readers[end.i].name, end.off
				c.Reason = fmt.Sprintf("%s where position %d should be", end.why, expect)
			}
			return expect, c
		}
		off += frameHeaderSize + int64(len(payload))
	}
	return expect, nil
}

// checkEntry decodes b, the entry at pos of shard, and checks it is that
// entry. A failure is a *CorruptionError without its place (the caller
// knows it).
func checkEntry(shard string, pos uint64, b []byte) (*entry, error) {
	if !bytes.HasSuffix(b, endOfStream) {
		// Cut short at a message boundary, a stream still decodes.
		return nil, &CorruptionError{Shard: shard, Position: pos, Reason: fmt.Sprintf("entry of %d bytes lacks the end-of-stream marker (cut short)", len(b))}
	}
	e, err := decodeEntry(b)
	if err != nil {
		return nil, &CorruptionError{Shard: shard, Position: pos, Reason: err.Error()}
	}
	// An entry names its shard and position. A mismatch means the bytes
	// under this name were reused for another entry (or copied in by
	// hand): refuse them rather than adopt their rows.
	if e.shard != shard || e.position != pos {
		e.release()
		return nil, &CorruptionError{Shard: shard, Position: pos, Reason: fmt.Sprintf("shard %s position %d holds the entry of shard %s position %d: refusing its rows (the name was reused for another entry, or the file copied in)", shard, pos, e.shard, e.position)}
	}
	return e, nil
}

// placeCorruption fills in where a *CorruptionError from checkEntry
// happened; other errors pass through.
func placeCorruption(err error, seg string, off int64) error {
	var c *CorruptionError
	if errors.As(err, &c) && c.Segment == "" {
		c.Segment, c.Offset = seg, off
	}
	return err
}

// objectPositions returns the positions of the object entries of shard
// above after, in order.
func objectPositions(ctx context.Context, store objstore.Reader, shard string, after uint64) ([]uint64, error) {
	objs, err := store.List(ctx, shardDir(shard)+"wal/")
	if err != nil {
		return nil, fmt.Errorf("wal: list entries of shard %s: %w", shard, err)
	}
	var out []uint64
	for _, o := range objs {
		num, _, _ := strings.Cut(path.Base(o.Key), ".")
		if p, err := strconv.ParseUint(num, 10, 64); err == nil && p > after {
			out = append(out, p)
		}
	}
	return out, nil
}

// replayObjects reads the object entries of shard from position next on
// until the first absent one, calling adopt with each, and returns the
// first absent position. Object puts are atomic, so an entry that does
// not decode (or is another position's) is damage, never a torn write;
// and since a writer never leaves a gap, entries above an absent position
// mean the entries between were lost. Both are *CorruptionError.
//
// The first entry is read beside a listing of the entries; the entries
// the listing shows after it are fetched replayWindow at a time in
// parallel and adopted in order (a claim on S3 after 33 entries read them
// in 33 round trips one after another), and the entry after those is
// read beside a listing again. So a replay takes a round trip, plus one per
// window and one more when there are entries. An entry listed but gone
// when fetched ends the run as an absent one does.
func replayObjects(ctx context.Context, store objstore.Reader, shard string, next uint64, adopt func(pos uint64, b []byte) error) (uint64, error) {
	// use adopts the entry at next (nil: absent) and says whether to go on.
	use := func(b []byte) (bool, error) {
		if b == nil {
			return false, nil
		}
		if err := adopt(next, b); err != nil {
			var c *CorruptionError
			if errors.As(err, &c) && c.Segment == "" {
				c.Segment = path.Base(entryKey(shard, next))
				if _, herr := store.Head(ctx, entryKey(shard, next+1)); herr == nil {
					c.Next = next + 1
				}
			}
			return false, err
		}
		next++
		return true, nil
	}
	get := func(pos uint64) ([]byte, error) {
		b, err := store.Get(ctx, entryKey(shard, pos))
		if errors.Is(err, objstore.ErrNotFound) {
			return nil, nil
		}
		if err != nil {
			return nil, fmt.Errorf("wal: replay shard %s position %d: %w", shard, pos, err)
		}
		return b, nil
	}
	// probe reads the entry at next beside a listing of the entries after
	// after: a read and a listing, in one round trip.
	probe := func(after uint64) ([]byte, []uint64, error) {
		var (
			b          []byte
			listed     []uint64
			berr, lerr error
			wg         sync.WaitGroup
		)
		wg.Go(func() { b, berr = get(next) })
		wg.Go(func() { listed, lerr = objectPositions(ctx, store, shard, after) })
		wg.Wait()
		return b, listed, errors.Join(berr, lerr)
	}
	b, listed, err := probe(next - 1)
	if err != nil {
		return next, err
	}
	more, err := use(b)
	if err != nil {
		return next, err
	}
	for more {
		for run := contiguous(listed, next); run > 0 && more; {
			n := min(run, replayWindow)
			bufs := make([][]byte, n)
			errs := make([]error, n)
			var wg sync.WaitGroup
			for i := range n {
				wg.Go(func() { bufs[i], errs[i] = get(next + uint64(i)) })
			}
			wg.Wait()
			for i := 0; i < n && more; i++ {
				if errs[i] != nil {
					return next, errs[i]
				}
				if more, err = use(bufs[i]); err != nil {
					return next, err
				}
			}
			run -= n
		}
		if !more {
			break
		}
		// Past what the listing showed: an entry put since (a deposed
		// writer's) is read with a listing of what follows it.
		if b, listed, err = probe(next); err != nil {
			return next, err
		}
		if more, err = use(b); err != nil {
			return next, err
		}
	}
	// listed was taken beside the read of next, the first absent entry.
	later := listed[:0:0]
	for _, p := range listed {
		if p > next {
			later = append(later, p)
		}
	}
	if len(later) == 0 {
		return next, nil
	}
	// A writer that was deposed may have put it just now: look again.
	if _, err := store.Head(ctx, entryKey(shard, next)); err == nil {
		return next, nil
	}
	return next, &CorruptionError{Shard: shard, Segment: path.Base(entryKey(shard, next)), Position: next, Next: later[0],
		Reason: fmt.Sprintf("entry missing while entries from position %d exist", later[0])}
}

// replayWindow is how many listed object entries a replay fetches at once.
const replayWindow = 32

// contiguous is how many of the ascending positions run on from first
// without a gap.
func contiguous(positions []uint64, first uint64) int {
	i, _ := slices.BinarySearch(positions, first)
	n := 0
	for i+n < len(positions) && positions[i+n] == first+uint64(n) {
		n++
	}
	return n
}
