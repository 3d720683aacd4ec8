// Package ipcguard reads the messages of an Arrow IPC stream for arrow-go's
// ipc.Reader (ipc.NewReaderFromMessageReader), checking each message's
// flatbuffer metadata against limits before arrow-go reads it.
//
// arrow-go trusts the metadata of a stream: it converts a schema's fields
// recursively, with no bound on depth, and flatbuffer offsets are 32-bit
// and wrap, so a field can name itself among its children: a message of a
// few hundred bytes recurses until the goroutine's stack overflows, which
// kills the process. Vectors can repeat one element, so a small message
// can also make it copy one long name or key-value millions of times, or
// size a slice of fields by a count the message does not hold. It
// allocates a message's body at the length the metadata states before
// reading it, and it concatenates a dictionary with its deltas again for
// each record batch that follows them. Compressed buffers state their
// decompressed size and are decoded with a zstd decoder that keeps
// whatever window the frame asks for (up to 1 GiB of history).
//
// Reader walks every metadata flatbuffer the way the flatbuffers runtime
// reads it (the same offsets, the same wrap-around), bounds-checked, and
// refuses a message past its limits with an *Error: schema depth, fields,
// bytes of names and custom metadata, metadata size, and the decoded bytes
// of the stream (bodies, and dictionaries at each concatenation). Beyond
// what the caller has reserved for the stream (Limits.Reserved) it reads a
// body as it arrives, so a stated length costs nothing until the bytes
// come. It refuses compressed buffers: an HTTP body is compressed whole,
// with Content-Encoding.
package ipcguard

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"slices"
	"sync/atomic"

	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// Limits bound a stream.
type Limits struct {
	// MaxDepth is the deepest a schema's types nest: a column of a
	// primitive type is depth 1, list<struct<a, b>> depth 3.
	MaxDepth int
	// MaxFields bounds the fields of a schema at every level (a field
	// reached twice through shared offsets counts twice).
	MaxFields int
	// MaxMetadata bounds the bytes of field names and custom metadata keys
	// and values one message makes the reader copy (each key-value also
	// costs 16).
	MaxMetadata int
	// MaxMessage bounds one message's flatbuffer metadata, in bytes.
	MaxMessage int
	// MaxDecoded bounds the stream's decoded bytes: message bodies, and a
	// dictionary's whole length each time a record batch makes the reader
	// concatenate it with new deltas.
	MaxDecoded int64
	// Reserved is the bytes the caller has already set aside for the
	// stream (an HTTP body's Content-Length, charged to the worker's
	// in-flight body budget): a message is read into a buffer of its
	// stated length at once while the stream's bytes so far stay within
	// it. Beyond it (0: always) a buffer grows as the bytes arrive, which
	// costs a copy at each doubling (a fifth of an Arrow append's CPU).
	Reserved int64
}

// Error is a stream Reader refused.
type Error struct {
	Msg      string
	TooLarge bool // a size limit (MaxMessage, MaxDecoded): the client should send less
}

func (e *Error) Error() string { return e.Msg }

func refuse(format string, args ...any) error { return &Error{Msg: fmt.Sprintf(format, args...)} }

func tooLarge(format string, args ...any) error {
	return &Error{Msg: fmt.Sprintf(format, args...), TooLarge: true}
}

// The message header types of Message.fbs.
const (
	headerSchema          = 1
	headerDictionaryBatch = 2
	headerRecordBatch     = 3
)

// Reader is an ipc.MessageReader over an IPC stream that checks each
// message before returning it. It is not safe for concurrent use (nor is
// ipc.Reader).
type Reader struct {
	r        io.Reader
	l        Limits
	mem      memory.Allocator
	refs     atomic.Int64
	msg      *ipc.Message
	decoded  int64
	consumed int64           // the stream's bytes read so far (or being read)
	dicts    map[int64]int64 // body bytes of each dictionary and its deltas since its last replacement
	pending  []int64         // dictionaries with deltas since the last record batch
}

// NewReader returns a Reader of r.
func NewReader(r io.Reader, l Limits) *Reader {
	g := &Reader{r: r, l: l, mem: memory.DefaultAllocator, dicts: map[int64]int64{}}
	g.refs.Add(1)
	return g
}

// Retain and Release count references, as ipc.MessageReader asks.
func (g *Reader) Retain() { g.refs.Add(1) }

// Release drops a reference; the last one releases the current message.
func (g *Reader) Release() {
	if g.refs.Add(-1) == 0 && g.msg != nil {
		g.msg.Release()
		g.msg = nil
	}
}

// Message reads, checks and returns the next message; io.EOF at the end
// of the stream. It is valid until the next call.
func (g *Reader) Message() (*ipc.Message, error) {
	if g.msg != nil {
		g.msg.Release()
		g.msg = nil
	}
	var hdr [4]byte
	if _, err := io.ReadFull(g.r, hdr[:]); err != nil {
		return nil, fmt.Errorf("arrow/ipc: could not read continuation indicator: %w", err)
	}
	g.consumed += 8 // the marker and the length (a stream may leave out the marker: never more)
	n := int32(binary.LittleEndian.Uint32(hdr[:]))
	switch uint32(n) {
	case 0:
		return nil, io.EOF // end of stream
	case 0xFFFFFFFF: // continuation marker, then the length
		if _, err := io.ReadFull(g.r, hdr[:]); err != nil {
			return nil, fmt.Errorf("arrow/ipc: could not read message length: %w", noEOF(err))
		}
		if n = int32(binary.LittleEndian.Uint32(hdr[:])); n == 0 {
			return nil, io.EOF
		}
	}
	if n < 4 {
		return nil, refuse("invalid Arrow IPC message: metadata length %d", n)
	}
	if g.l.MaxMessage > 0 && int(n) > g.l.MaxMessage {
		if g.l.MaxDecoded > 0 && int64(n) > g.l.MaxDecoded {
			// More than a whole body may hold: these bytes are not an
			// Arrow IPC stream (a garbage prefix reads as a huge length).
			return nil, refuse("not an Arrow IPC stream: a message states %d bytes of metadata, more than a body may hold (%d)", n, g.l.MaxDecoded)
		}
		return nil, tooLarge("Arrow IPC message metadata of %d bytes; the limit is %d", n, g.l.MaxMessage)
	}
	meta, err := g.read(int64(n))
	if err != nil {
		return nil, fmt.Errorf("arrow/ipc: could not read message metadata: %w", err)
	}
	defer meta.Release()
	m, err := g.check(meta.Bytes())
	if err != nil {
		return nil, err
	}
	if g.decoded += m.bodyLen; g.l.MaxDecoded > 0 && g.decoded > g.l.MaxDecoded {
		return nil, tooLarge("Arrow IPC stream decodes to more than %d bytes: send smaller batches", g.l.MaxDecoded)
	}
	body, err := g.read(m.bodyLen)
	if err != nil {
		return nil, fmt.Errorf("arrow/ipc: could not read message body: %w", err)
	}
	defer body.Release()
	if err := g.account(m); err != nil {
		return nil, err
	}
	g.msg = ipc.NewMessage(meta, body)
	return g.msg, nil
}

// read reads n bytes into a buffer: at once within Limits.Reserved, else
// grown as they arrive (doubling from 64 KiB), so that a length a message
// states costs memory only once the client has sent the bytes.
func (g *Reader) read(n int64) (*memory.Buffer, error) {
	buf := memory.NewResizableBuffer(g.mem)
	if g.consumed += n; g.consumed <= g.l.Reserved {
		// Reserved already: one buffer, no copies.
		buf.ResizeNoShrink(int(n))
		if _, err := io.ReadFull(g.r, buf.Bytes()); err != nil {
			buf.Release()
			return nil, noEOF(err)
		}
		return buf, nil
	}
	for have := int64(0); have < n; {
		next := min(n, max(2*have, 64<<10))
		buf.ResizeNoShrink(int(next))
		k, err := io.ReadFull(g.r, buf.Bytes()[have:next])
		have += int64(k)
		if err != nil {
			buf.Release()
			return nil, noEOF(err)
		}
	}
	return buf, nil
}

func noEOF(err error) error {
	if errors.Is(err, io.EOF) {
		return io.ErrUnexpectedEOF
	}
	return err
}

// account charges what the message makes the reader build beyond its
// body: a record batch concatenates each dictionary that has new deltas.
func (g *Reader) account(m message) error {
	switch m.header {
	case headerDictionaryBatch:
		if _, ok := g.dicts[m.dictID]; !ok || !m.isDelta {
			g.dicts[m.dictID] = m.bodyLen
			g.pending = slices.DeleteFunc(g.pending, func(id int64) bool { return id == m.dictID })
			return nil
		}
		if !slices.Contains(g.pending, m.dictID) {
			g.pending = append(g.pending, m.dictID)
		}
		g.dicts[m.dictID] += m.bodyLen
	case headerRecordBatch:
		for _, id := range g.pending {
			if g.decoded += g.dicts[id]; g.l.MaxDecoded > 0 && g.decoded > g.l.MaxDecoded {
				return tooLarge("Arrow IPC stream decodes to more than %d bytes (a dictionary is concatenated with its deltas for each record batch after them): send smaller batches, or replace dictionaries instead of sending deltas", g.l.MaxDecoded)
			}
		}
		g.pending = g.pending[:0]
	}
	return nil
}
