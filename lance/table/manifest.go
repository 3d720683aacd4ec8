package table

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"

	"google.golang.org/protobuf/proto"

	"github.com/lance-context/lance-context/lance/pb"
)

const (
	versionsDir     = "_versions/"
	transactionsDir = "_transactions/"
	deletionsDir    = "_deletions/"
	dataDir         = "data/"
	hintKey         = versionsDir + "latest_version_hint.json"
	manifestSuffix  = ".manifest"
	magic           = "LANC"
)

// Feature flags (Manifest.reader/writer_feature_flags).
const (
	FlagDeletionFiles = 1
	FlagStableRowIDs  = 2
	FlagUseV2Format   = 4 // deprecated
	FlagTableConfig   = 8
	FlagBasePaths     = 16
)

// writableFlags are the flags this writer implements; any other bit set on
// the latest version makes commits fail with ErrUnsupportedFeature.
const writableFlags = FlagDeletionFiles | FlagTableConfig | FlagUseV2Format

// readableFlags are the flags this reader understands.
const readableFlags = FlagDeletionFiles | FlagStableRowIDs | FlagUseV2Format | FlagTableConfig

var (
	// ErrNoTable is returned when the location holds no manifest.
	ErrNoTable = errors.New("lance/table: no table at this location")
	// ErrCorrupt marks a manifest or deletion file that cannot be decoded.
	ErrCorrupt = errors.New("lance/table: corrupt file")
	// ErrUnsupportedFeature is returned when a table uses a feature flag this
	// implementation does not understand.
	ErrUnsupportedFeature = errors.New("lance/table: unsupported feature flag")
	// ErrConflict is returned when a concurrent commit made an operation
	// impossible to rebase.
	ErrConflict = errors.New("lance/table: commit conflict")
)

// naming is a manifest naming scheme.
type naming int

const (
	namingV2 naming = iota
	namingV1
)

func (n naming) key(version uint64) string {
	if n == namingV1 {
		return versionsDir + strconv.FormatUint(version, 10) + manifestSuffix
	}
	return versionsDir + fmt.Sprintf("%020d", math.MaxUint64-version) + manifestSuffix
}

// parseManifestName returns the version and scheme of a manifest file name
// (the part after _versions/). ok is false for anything else (temp files,
// the hint, detached versions).
func parseManifestName(name string) (v uint64, n naming, ok bool) {
	base, found := strings.CutSuffix(name, manifestSuffix)
	if !found || base == "" || strings.Contains(base, "/") {
		return 0, 0, false
	}
	for _, c := range base {
		if c < '0' || c > '9' {
			return 0, 0, false
		}
	}
	u, err := strconv.ParseUint(base, 10, 64)
	if err != nil {
		return 0, 0, false
	}
	if len(base) == 20 && u > math.MaxUint64/2 {
		return math.MaxUint64 - u, namingV2, true
	}
	return u, namingV1, true
}

// manifestFile is a decoded manifest file.
type manifestFile struct {
	manifest     *pb.Manifest
	indexSection []byte // raw IndexSection message, nil when absent
}

// decodeManifestFile parses the bytes of a manifest file.
func decodeManifestFile(b []byte) (*manifestFile, error) {
	if len(b) < 16 || string(b[len(b)-4:]) != magic {
		return nil, fmt.Errorf("%w: manifest file lacks the LANC footer", ErrCorrupt)
	}
	pos := int64(binary.LittleEndian.Uint64(b[len(b)-16:]))
	body := int64(len(b) - 16)
	msg, err := lengthPrefixed(b, pos, body)
	if err != nil {
		return nil, fmt.Errorf("manifest: %w", err)
	}
	m := &pb.Manifest{}
	if err := proto.Unmarshal(msg, m); err != nil {
		return nil, fmt.Errorf("%w: manifest: %v", ErrCorrupt, err)
	}
	mf := &manifestFile{manifest: m}
	if m.IndexSection != nil {
		sec, err := lengthPrefixed(b, int64(m.GetIndexSection()), body)
		if err != nil {
			return nil, fmt.Errorf("index section: %w", err)
		}
		mf.indexSection = sec
	}
	return mf, nil
}

func lengthPrefixed(b []byte, pos, limit int64) ([]byte, error) {
	if pos < 0 || pos+4 > limit {
		return nil, fmt.Errorf("%w: offset %d outside the file", ErrCorrupt, pos)
	}
	n := int64(binary.LittleEndian.Uint32(b[pos:]))
	if pos+4+n > limit {
		return nil, fmt.Errorf("%w: length %d at offset %d runs past the file", ErrCorrupt, n, pos)
	}
	return b[pos+4 : pos+4+n], nil
}

// encodeManifestFile lays out a manifest file. It sets the manifest's
// index_section and transaction_section to the offsets it uses.
func encodeManifestFile(m *pb.Manifest, indexSection []byte, txn *pb.Transaction) ([]byte, error) {
	var out []byte
	put := func(msg []byte) uint64 {
		at := uint64(len(out))
		out = binary.LittleEndian.AppendUint32(out, uint32(len(msg)))
		out = append(out, msg...)
		return at
	}
	m.IndexSection = nil
	if indexSection != nil {
		at := put(indexSection)
		m.IndexSection = &at
	}
	m.TransactionSection = nil
	if txn != nil {
		tb, err := proto.MarshalOptions{Deterministic: true}.Marshal(txn)
		if err != nil {
			return nil, fmt.Errorf("marshal transaction: %w", err)
		}
		at := put(tb)
		m.TransactionSection = &at
	}
	mb, err := proto.MarshalOptions{Deterministic: true}.Marshal(m)
	if err != nil {
		return nil, fmt.Errorf("marshal manifest: %w", err)
	}
	pos := put(mb)
	out = binary.LittleEndian.AppendUint64(out, pos)
	out = binary.LittleEndian.AppendUint16(out, 0)
	out = binary.LittleEndian.AppendUint16(out, 2)
	return append(out, magic...), nil
}
