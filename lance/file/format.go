package file

import (
	"encoding/binary"
	"errors"
	"fmt"

	"google.golang.org/protobuf/proto"

	"github.com/lance-context/lance-context/lance/pb"
)

// Errors returned (wrapped) by this package. Test with errors.Is.
var (
	// ErrCorrupt means the bytes are not a well-formed Lance 2.0 file:
	// truncated, inconsistent offsets, bad magic, impossible lengths.
	ErrCorrupt = errors.New("lance/file: corrupt file")
	// ErrUnsupportedVersion means the footer names a file format version
	// other than 2.0 (for example 2.1, or the legacy 0.1/0.2 format).
	ErrUnsupportedVersion = errors.New("lance/file: unsupported file version")
	// ErrUnsupported means the file is a 2.0 file but uses an encoding or a
	// type this package cannot decode (compression, bitpacking, FSST, ...).
	ErrUnsupported = errors.New("lance/file: unsupported encoding")
	// ErrTooLarge means a Read would need more memory than the reader allows
	// for one call; read a smaller row range.
	ErrTooLarge = errors.New("lance/file: row range too large to decode at once")
)

const (
	footerLen = 40
	// bufferAlign is the alignment of every data buffer's start.
	bufferAlign = 64
	// tailReadSize is how much Open reads from the end of the file first.
	tailReadSize = 64 << 10

	// The footer version we write for format 2.0, as Lance does.
	writeMajor, writeMinor = 0, 3

	arrayEncodingURL  = "/lance.encodings.ArrayEncoding"
	columnEncodingURL = "/lance.encodings.ColumnEncoding"
)

var magic = [4]byte{'L', 'A', 'N', 'C'}

func corruptf(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrCorrupt}, args...)...)
}

func unsupportedf(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrUnsupported}, args...)...)
}

// footer is the fixed 40-byte trailer of a Lance 2.x file.
type footer struct {
	columnMetaStart uint64
	cmoTableStart   uint64
	gboTableStart   uint64
	numGlobalBufs   uint32
	numColumns      uint32
	major, minor    uint16
}

func (f *footer) appendTo(b []byte) []byte {
	b = binary.LittleEndian.AppendUint64(b, f.columnMetaStart)
	b = binary.LittleEndian.AppendUint64(b, f.cmoTableStart)
	b = binary.LittleEndian.AppendUint64(b, f.gboTableStart)
	b = binary.LittleEndian.AppendUint32(b, f.numGlobalBufs)
	b = binary.LittleEndian.AppendUint32(b, f.numColumns)
	b = binary.LittleEndian.AppendUint16(b, f.major)
	b = binary.LittleEndian.AppendUint16(b, f.minor)
	return append(b, magic[:]...)
}

func parseFooter(b []byte) (footer, error) {
	var f footer
	if len(b) < footerLen {
		return f, corruptf("file too small for a footer (%d bytes)", len(b))
	}
	b = b[len(b)-footerLen:]
	if [4]byte(b[36:40]) != magic {
		return f, corruptf("not a Lance file (no LANC magic at the end)")
	}
	f.columnMetaStart = binary.LittleEndian.Uint64(b[0:])
	f.cmoTableStart = binary.LittleEndian.Uint64(b[8:])
	f.gboTableStart = binary.LittleEndian.Uint64(b[16:])
	f.numGlobalBufs = binary.LittleEndian.Uint32(b[24:])
	f.numColumns = binary.LittleEndian.Uint32(b[28:])
	f.major = binary.LittleEndian.Uint16(b[32:])
	f.minor = binary.LittleEndian.Uint16(b[34:])
	return f, nil
}

// checkVersion accepts the two spellings of format 2.0: 0.3 (what Lance
// writes in the footer) and 2.0.
func checkVersion(major, minor uint16) error {
	switch {
	case major == 0 && minor == 3, major == 2 && minor == 0:
		return nil
	case major == 0 && (minor == 1 || minor == 2):
		return fmt.Errorf("%w %d.%d (legacy Lance format 0.x; only 2.0 is supported)", ErrUnsupportedVersion, major, minor)
	default:
		return fmt.Errorf("%w %d.%d (only 2.0 is supported)", ErrUnsupportedVersion, major, minor)
	}
}

// anyBytes serializes a google.protobuf.Any with Lance's bare "/pkg.Msg"
// type URL around msg.
func anyBytes(typeURL string, msg proto.Message) ([]byte, error) {
	v, err := proto.Marshal(msg)
	if err != nil {
		return nil, err
	}
	return proto.Marshal(&pb.AnyMsg{TypeUrl: typeURL, Value: v})
}

// directEncoding wraps Any bytes as a lance.file.v2.Encoding.
func directEncoding(anyb []byte) *pb.Encoding {
	return &pb.Encoding{Location: &pb.Encoding_Direct{Direct: &pb.DirectEncoding{Encoding: anyb}}}
}

// Helpers that build the 2.0 ArrayEncoding shapes.

func encFlat(bits uint64, buf uint32) *pb.ArrayEncoding {
	return &pb.ArrayEncoding{ArrayEncoding: &pb.ArrayEncoding_Flat{Flat: &pb.Flat{
		BitsPerValue: bits,
		Buffer:       &pb.Buffer{BufferIndex: buf, BufferType: pb.Buffer_page},
	}}}
}

func encNoNulls(values *pb.ArrayEncoding) *pb.ArrayEncoding {
	return &pb.ArrayEncoding{ArrayEncoding: &pb.ArrayEncoding_Nullable{Nullable: &pb.Nullable{
		Nullability: &pb.Nullable_NoNulls{NoNulls: &pb.Nullable_NoNull{Values: values}},
	}}}
}

func encSomeNulls(validity, values *pb.ArrayEncoding) *pb.ArrayEncoding {
	return &pb.ArrayEncoding{ArrayEncoding: &pb.ArrayEncoding_Nullable{Nullable: &pb.Nullable{
		Nullability: &pb.Nullable_SomeNulls{SomeNulls: &pb.Nullable_SomeNull{Validity: validity, Values: values}},
	}}}
}

func encAllNulls() *pb.ArrayEncoding {
	return &pb.ArrayEncoding{ArrayEncoding: &pb.ArrayEncoding_Nullable{Nullable: &pb.Nullable{
		Nullability: &pb.Nullable_AllNulls{AllNulls: &pb.Nullable_AllNull{}},
	}}}
}

func encFSL(dim uint32, items *pb.ArrayEncoding) *pb.ArrayEncoding {
	return &pb.ArrayEncoding{ArrayEncoding: &pb.ArrayEncoding_FixedSizeList{FixedSizeList: &pb.FixedSizeList{
		Dimension: dim, Items: items,
	}}}
}

func encBinary(indices, bytes *pb.ArrayEncoding, nullAdj uint64) *pb.ArrayEncoding {
	return &pb.ArrayEncoding{ArrayEncoding: &pb.ArrayEncoding_Binary{Binary: &pb.Binary{
		Indices: indices, Bytes: bytes, NullAdjustment: nullAdj,
	}}}
}

func encList(offsets *pb.ArrayEncoding, nullAdj, numItems uint64) *pb.ArrayEncoding {
	return &pb.ArrayEncoding{ArrayEncoding: &pb.ArrayEncoding_List{List: &pb.List{
		Offsets: offsets, NullOffsetAdjustment: nullAdj, NumItems: numItems,
	}}}
}

func encDictionary(indices, items *pb.ArrayEncoding, numItems uint32) *pb.ArrayEncoding {
	return &pb.ArrayEncoding{ArrayEncoding: &pb.ArrayEncoding_Dictionary{Dictionary: &pb.Dictionary{
		Indices: indices, Items: items, NumDictionaryItems: numItems,
	}}}
}

func encStruct() *pb.ArrayEncoding {
	return &pb.ArrayEncoding{ArrayEncoding: &pb.ArrayEncoding_Struct{Struct: &pb.SimpleStruct{}}}
}

// isPackedStruct reports whether field metadata makes Lance store a struct as
// one packed column ("packed"="true", or the "lance-encoding:packed" key).
func isPackedStruct(md map[string][]byte) bool {
	if v, ok := md["packed"]; ok {
		return string(v) == "true"
	}
	_, ok := md["lance-encoding:packed"]
	return ok
}
