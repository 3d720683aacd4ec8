package ipcguard

import "encoding/binary"

// A flatbuffer table starts with a signed 32-bit offset back to its
// vtable; the vtable holds its own size (uint16), the table's size, then
// one uint16 per field slot: the field's offset from the table's start,
// or 0 when absent. References to tables, vectors and strings are uint32
// offsets from where they are stored, added in uint32 (they wrap). The
// vtable offsets of the slots read here (4 + 2*slot) are those of
// Message.fbs and Schema.fbs, as arrow-go's generated code reads them.
const (
	messageHeaderType     = 6
	messageHeader         = 8
	messageBodyLength     = 10
	messageCustomMetadata = 12

	schemaFields         = 6
	schemaCustomMetadata = 8

	fieldName           = 4
	fieldChildren       = 14
	fieldCustomMetadata = 16

	keyValueKey   = 4
	keyValueValue = 6

	recordBatchNodes       = 6
	recordBatchBuffers     = 8
	recordBatchCompression = 10
	recordBatchVariadic    = 12

	dictionaryBatchID      = 4
	dictionaryBatchData    = 6
	dictionaryBatchIsDelta = 8
)

// message is what Reader learns of a message from its metadata.
type message struct {
	header  byte
	bodyLen int64
	dictID  int64
	isDelta bool
}

// walker reads one message's flatbuffer with every access bounds-checked,
// counting what arrow-go will copy or recurse into.
type walker struct {
	b      []byte
	l      Limits
	fields int // fields reached
	meta   int // bytes of names and custom metadata
}

// errBounds is an offset out of the buffer: arrow-go would panic (and
// recover) reading it.
var errBounds = refuse("invalid Arrow IPC message: an offset points outside its metadata")

func (w *walker) has(pos uint32, n uint64) bool { return uint64(pos)+n <= uint64(len(w.b)) }

func (w *walker) u32(pos uint32) (uint32, error) {
	if !w.has(pos, 4) {
		return 0, errBounds
	}
	return binary.LittleEndian.Uint32(w.b[pos:]), nil
}

func (w *walker) u16(pos uint32) (uint16, error) {
	if !w.has(pos, 2) {
		return 0, errBounds
	}
	return binary.LittleEndian.Uint16(w.b[pos:]), nil
}

// slot returns the position of a table's field (vo: its vtable offset),
// ok false when the table does not have it.
func (w *walker) slot(tab uint32, vo uint16) (pos uint32, ok bool, err error) {
	so, err := w.u32(tab)
	if err != nil {
		return 0, false, err
	}
	vt := uint32(int32(tab) - int32(so))
	size, err := w.u16(vt)
	if err != nil || vo >= size {
		return 0, false, err
	}
	off, err := w.u16(vt + uint32(vo))
	if err != nil || off == 0 {
		return 0, false, err
	}
	return tab + uint32(off), true, nil
}

// ref follows the reference stored at pos (to a table).
func (w *walker) ref(pos uint32) (uint32, error) {
	off, err := w.u32(pos)
	return pos + off, err
}

// vector returns the start and length of the vector referenced from a
// table's field, checking that its elements (size bytes each) lie inside
// the buffer; n is 0 when the table does not have the field.
func (w *walker) vector(tab uint32, vo uint16, size uint64) (start uint32, n int, err error) {
	pos, ok, err := w.slot(tab, vo)
	if !ok {
		return 0, 0, err
	}
	at, err := w.ref(pos)
	if err != nil {
		return 0, 0, err
	}
	length, err := w.u32(at)
	if err != nil {
		return 0, 0, err
	}
	start = at + 4
	if !w.has(start, uint64(length)*size) {
		return 0, 0, errBounds
	}
	return start, int(length), nil
}

// scalar reads a table's fixed-size field of n bytes (0 when absent).
func (w *walker) scalar(tab uint32, vo uint16, n uint64) (uint64, error) {
	pos, ok, err := w.slot(tab, vo)
	if !ok {
		return 0, err
	}
	if !w.has(pos, n) {
		return 0, errBounds
	}
	switch n {
	case 1:
		return uint64(w.b[pos]), nil
	case 2:
		return uint64(binary.LittleEndian.Uint16(w.b[pos:])), nil
	}
	return binary.LittleEndian.Uint64(w.b[pos:]), nil
}

// text charges the string in a table's field to the metadata budget.
func (w *walker) text(tab uint32, vo uint16) error {
	_, n, err := w.vector(tab, vo, 1)
	if err != nil {
		return err
	}
	return w.charge(n)
}

func (w *walker) charge(n int) error {
	w.meta += n
	if w.l.MaxMetadata > 0 && w.meta > w.l.MaxMetadata {
		return refuse("Arrow IPC message with more than %d bytes of field names and custom metadata", w.l.MaxMetadata)
	}
	return nil
}

// keyValues walks a custom_metadata vector: arrow-go copies each key and
// value, so a vector that repeats one long pair costs its length each time.
func (w *walker) keyValues(tab uint32, vo uint16) error {
	start, n, err := w.vector(tab, vo, 4)
	if err != nil || n == 0 {
		return err
	}
	if err := w.charge(16 * n); err != nil { // before arrow-go sizes two slices by n
		return err
	}
	for i := range n {
		kv, err := w.ref(start + 4*uint32(i))
		if err != nil {
			return err
		}
		if err := w.text(kv, keyValueKey); err != nil {
			return err
		}
		if err := w.text(kv, keyValueValue); err != nil {
			return err
		}
	}
	return nil
}

// check walks a message's metadata and returns what Reader needs of it.
func (g *Reader) check(b []byte) (message, error) {
	w := &walker{b: b, l: g.l}
	var m message
	root, err := w.u32(0)
	if err != nil {
		return m, err
	}
	if err := w.keyValues(root, messageCustomMetadata); err != nil {
		return m, err
	}
	ht, err := w.scalar(root, messageHeaderType, 1)
	if err != nil {
		return m, err
	}
	m.header = byte(ht)
	bl, err := w.scalar(root, messageBodyLength, 8)
	if err != nil {
		return m, err
	}
	if m.bodyLen = int64(bl); m.bodyLen < 0 {
		return m, refuse("invalid Arrow IPC message: body length %d", m.bodyLen)
	}
	pos, ok, err := w.slot(root, messageHeader)
	if err != nil {
		return m, err
	}
	if !ok {
		return m, refuse("invalid Arrow IPC message: no header")
	}
	hdr, err := w.ref(pos)
	if err != nil {
		return m, err
	}
	switch m.header {
	case headerSchema:
		err = w.schema(hdr)
	case headerRecordBatch:
		err = w.recordBatch(hdr, m.bodyLen)
	case headerDictionaryBatch:
		var id uint64
		if id, err = w.scalar(hdr, dictionaryBatchID, 8); err != nil {
			return m, err
		}
		m.dictID = int64(id)
		var delta uint64
		if delta, err = w.scalar(hdr, dictionaryBatchIsDelta, 1); err != nil {
			return m, err
		}
		m.isDelta = delta != 0
		pos, ok, err := w.slot(hdr, dictionaryBatchData)
		if err != nil || !ok {
			return m, err // arrow-go refuses a dictionary without data
		}
		data, err := w.ref(pos)
		if err != nil {
			return m, err
		}
		err = w.recordBatch(data, m.bodyLen)
	default:
		err = refuse("Arrow IPC message of type %d: a stream of record batches holds a schema, dictionaries and record batches", m.header)
	}
	return m, err
}

// schema walks a schema's fields and custom metadata.
func (w *walker) schema(tab uint32) error {
	if err := w.keyValues(tab, schemaCustomMetadata); err != nil {
		return err
	}
	return w.fieldList(tab, schemaFields, 1)
}

// fieldList walks the fields in a schema's or a field's vector, at depth.
func (w *walker) fieldList(tab uint32, vo uint16, depth int) error {
	start, n, err := w.vector(tab, vo, 4)
	if err != nil || n == 0 {
		return err
	}
	if w.l.MaxDepth > 0 && depth > w.l.MaxDepth {
		return refuse("Arrow schema nested deeper than %d levels: flatten the columns", w.l.MaxDepth)
	}
	// arrow-go sizes a slice of n fields before reading them: refuse a
	// count past the limit before walking any.
	if w.l.MaxFields > 0 && w.fields+n > w.l.MaxFields {
		return refuse("Arrow schema with more than %d fields (at every level)", w.l.MaxFields)
	}
	w.fields += n
	for i := range n {
		f, err := w.ref(start + 4*uint32(i))
		if err != nil {
			return err
		}
		if err := w.text(f, fieldName); err != nil {
			return err
		}
		if err := w.keyValues(f, fieldCustomMetadata); err != nil {
			return err
		}
		if err := w.fieldList(f, fieldChildren, depth+1); err != nil {
			return err
		}
	}
	return nil
}

// recordBatch checks a record batch's vectors and refuses compression.
func (w *walker) recordBatch(tab uint32, bodyLen int64) error {
	if _, ok, err := w.slot(tab, recordBatchCompression); err != nil || ok {
		if err != nil {
			return err
		}
		return &Error{Msg: "compressed Arrow IPC buffers are not accepted: send the stream uncompressed, and compress the whole body with Content-Encoding: zstd or gzip"}
	}
	if _, _, err := w.vector(tab, recordBatchNodes, 16); err != nil {
		return err
	}
	if _, _, err := w.vector(tab, recordBatchVariadic, 8); err != nil {
		return err
	}
	start, n, err := w.vector(tab, recordBatchBuffers, 16)
	if err != nil {
		return err
	}
	for i := range n {
		off := int64(binary.LittleEndian.Uint64(w.b[start+16*uint32(i):]))
		size := int64(binary.LittleEndian.Uint64(w.b[start+16*uint32(i)+8:]))
		if off < 0 || size < 0 || off > bodyLen || size > bodyLen-off {
			return refuse("invalid Arrow IPC record batch: buffer %d (offset %d, %d bytes) is outside the body of %d bytes", i, off, size, bodyLen)
		}
	}
	return nil
}
