// Package schema maps between Arrow schemas and Lance schemas: the flattened,
// id-numbered list of lance.file.Field messages stored in data files and
// manifests.
//
// A Lance schema is a tree flattened in pre-order. Top-level fields have
// parent id -1. A list field has one child named "item"; a struct field has
// one child per member; a fixed_size_list is a single field with no child
// (its item type is part of the logical type string). Field ids are assigned
// once and never reused, so a column keeps its id across schema evolution.
package schema

import (
	"errors"
	"fmt"
	"maps"
	"strconv"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/lance-context/lance-context/lance/pb"
)

// ErrUnsupported is returned (wrapped) for types this implementation does not handle.
var ErrUnsupported = errors.New("lance/schema: unsupported type")

// Field is one node of a Lance schema.
type Field struct {
	ID          int32
	ParentID    int32
	Name        string
	LogicalType string
	Nullable    bool
	Metadata    map[string][]byte
	Type        arrow.DataType // the Arrow type of this node (children included)
	Children    []*Field

	raw *pb.Field // the message as read, so unknown fields survive a rewrite
}

// Schema is a Lance schema: top-level fields plus schema metadata.
type Schema struct {
	Fields   []*Field
	Metadata map[string][]byte
}

// FromArrow builds a Lance schema from an Arrow schema, numbering fields in
// pre-order starting at firstID.
func FromArrow(s *arrow.Schema, firstID int32) (*Schema, error) {
	out := &Schema{Metadata: map[string][]byte{}}
	md := s.Metadata()
	for i, k := range md.Keys() {
		out.Metadata[k] = []byte(md.Values()[i])
	}
	next := firstID
	for _, af := range s.Fields() {
		f, err := fieldFromArrow(af, -1, &next)
		if err != nil {
			return nil, err
		}
		out.Fields = append(out.Fields, f)
	}
	return out, nil
}

func fieldFromArrow(af arrow.Field, parent int32, next *int32) (*Field, error) {
	lt, err := LogicalType(af.Type)
	if err != nil {
		return nil, fmt.Errorf("field %q: %w", af.Name, err)
	}
	f := &Field{ID: *next, ParentID: parent, Name: af.Name, LogicalType: lt, Nullable: af.Nullable, Type: af.Type}
	*next++
	if af.HasMetadata() {
		f.Metadata = map[string][]byte{}
		for i, k := range af.Metadata.Keys() {
			f.Metadata[k] = []byte(af.Metadata.Values()[i])
		}
	}
	switch t := af.Type.(type) {
	case *arrow.ListType:
		c, err := fieldFromArrow(t.ElemField(), f.ID, next)
		if err != nil {
			return nil, err
		}
		f.Children = []*Field{c}
	case *arrow.LargeListType:
		c, err := fieldFromArrow(t.ElemField(), f.ID, next)
		if err != nil {
			return nil, err
		}
		f.Children = []*Field{c}
	case *arrow.StructType:
		for _, m := range t.Fields() {
			c, err := fieldFromArrow(m, f.ID, next)
			if err != nil {
				return nil, err
			}
			f.Children = append(f.Children, c)
		}
	}
	return f, nil
}

// LogicalType returns Lance's logical type string for an Arrow type.
func LogicalType(dt arrow.DataType) (string, error) {
	switch t := dt.(type) {
	case *arrow.BooleanType:
		return "bool", nil
	case *arrow.Int8Type:
		return "int8", nil
	case *arrow.Int16Type:
		return "int16", nil
	case *arrow.Int32Type:
		return "int32", nil
	case *arrow.Int64Type:
		return "int64", nil
	case *arrow.Uint8Type:
		return "uint8", nil
	case *arrow.Uint16Type:
		return "uint16", nil
	case *arrow.Uint32Type:
		return "uint32", nil
	case *arrow.Uint64Type:
		return "uint64", nil
	case *arrow.Float32Type:
		return "float", nil
	case *arrow.Float64Type:
		return "double", nil
	case *arrow.StringType:
		return "string", nil
	case *arrow.LargeStringType:
		return "large_string", nil
	case *arrow.BinaryType:
		return "binary", nil
	case *arrow.LargeBinaryType:
		return "large_binary", nil
	case *arrow.Date32Type:
		return "date32:day", nil
	case *arrow.TimestampType:
		tz := t.TimeZone
		if tz == "" {
			tz = "-"
		}
		return fmt.Sprintf("timestamp:%s:%s", unitString(t.Unit), tz), nil
	case *arrow.ListType:
		if t.Elem().ID() == arrow.STRUCT {
			return "list.struct", nil
		}
		return "list", nil
	case *arrow.LargeListType:
		if t.Elem().ID() == arrow.STRUCT {
			return "large_list.struct", nil
		}
		return "large_list", nil
	case *arrow.StructType:
		return "struct", nil
	case *arrow.FixedSizeListType:
		inner, err := LogicalType(t.Elem())
		if err != nil {
			return "", err
		}
		return fmt.Sprintf("fixed_size_list:%s:%d", inner, t.Len()), nil
	case *arrow.DictionaryType:
		return dictLogicalType(t)
	}
	return "", fmt.Errorf("%w: %s", ErrUnsupported, dt)
}

// dictLogicalType names a dictionary type as Lance does:
// "dict:{value type}:{index type}:false" (the last part is Arrow's "ordered",
// which Lance always writes as false). Only dictionaries of strings or
// binaries with integer indices are supported: that is what Lance 2.0
// stores as a dictionary page.
func dictLogicalType(t *arrow.DictionaryType) (string, error) {
	if !dictValueOK(t.ValueType) || !dictIndexOK(t.IndexType) {
		return "", fmt.Errorf("%w: %s (dictionaries must map integers to strings or binaries)", ErrUnsupported, t)
	}
	v, _ := LogicalType(t.ValueType)
	i, _ := LogicalType(t.IndexType)
	return fmt.Sprintf("dict:%s:%s:false", v, i), nil
}

func dictValueOK(t arrow.DataType) bool {
	switch t.ID() {
	case arrow.STRING, arrow.LARGE_STRING, arrow.BINARY, arrow.LARGE_BINARY:
		return true
	}
	return false
}

func dictIndexOK(t arrow.DataType) bool {
	switch t.ID() {
	case arrow.INT8, arrow.INT16, arrow.INT32, arrow.UINT8, arrow.UINT16, arrow.UINT32:
		return true
	}
	return false
}

// parseDict parses the rest of "dict:{value}:{index}:{ordered}".
func parseDict(lt, rest string) (arrow.DataType, error) {
	parts := strings.Split(rest, ":")
	if len(parts) != 3 {
		return nil, fmt.Errorf("%w: logical type %q", ErrUnsupported, lt)
	}
	v, err := primitiveType(parts[0])
	if err != nil {
		return nil, err
	}
	i, err := primitiveType(parts[1])
	if err != nil {
		return nil, err
	}
	if !dictValueOK(v) || !dictIndexOK(i) {
		return nil, fmt.Errorf("%w: logical type %q (dictionaries must map integers to strings or binaries)", ErrUnsupported, lt)
	}
	return &arrow.DictionaryType{IndexType: i, ValueType: v, Ordered: parts[2] == "true"}, nil
}

func unitString(u arrow.TimeUnit) string {
	return [...]string{"s", "ms", "us", "ns"}[u]
}

// primitiveType parses a non-nested logical type.
func primitiveType(lt string) (arrow.DataType, error) {
	switch lt {
	case "bool":
		return arrow.FixedWidthTypes.Boolean, nil
	case "int8":
		return arrow.PrimitiveTypes.Int8, nil
	case "int16":
		return arrow.PrimitiveTypes.Int16, nil
	case "int32":
		return arrow.PrimitiveTypes.Int32, nil
	case "int64":
		return arrow.PrimitiveTypes.Int64, nil
	case "uint8":
		return arrow.PrimitiveTypes.Uint8, nil
	case "uint16":
		return arrow.PrimitiveTypes.Uint16, nil
	case "uint32":
		return arrow.PrimitiveTypes.Uint32, nil
	case "uint64":
		return arrow.PrimitiveTypes.Uint64, nil
	case "float":
		return arrow.PrimitiveTypes.Float32, nil
	case "double":
		return arrow.PrimitiveTypes.Float64, nil
	case "string":
		return arrow.BinaryTypes.String, nil
	case "large_string":
		return arrow.BinaryTypes.LargeString, nil
	case "binary":
		return arrow.BinaryTypes.Binary, nil
	case "large_binary":
		return arrow.BinaryTypes.LargeBinary, nil
	case "date32:day":
		return arrow.FixedWidthTypes.Date32, nil
	}
	if rest, ok := strings.CutPrefix(lt, "timestamp:"); ok {
		unit, tz, ok := strings.Cut(rest, ":")
		if !ok {
			return nil, fmt.Errorf("%w: logical type %q", ErrUnsupported, lt)
		}
		var u arrow.TimeUnit
		switch unit {
		case "s":
			u = arrow.Second
		case "ms":
			u = arrow.Millisecond
		case "us":
			u = arrow.Microsecond
		case "ns":
			u = arrow.Nanosecond
		default:
			return nil, fmt.Errorf("%w: logical type %q", ErrUnsupported, lt)
		}
		if tz == "-" {
			tz = ""
		}
		return &arrow.TimestampType{Unit: u, TimeZone: tz}, nil
	}
	if rest, ok := strings.CutPrefix(lt, "dict:"); ok {
		return parseDict(lt, rest)
	}
	if rest, ok := strings.CutPrefix(lt, "fixed_size_list:"); ok {
		i := strings.LastIndexByte(rest, ':')
		if i < 0 {
			return nil, fmt.Errorf("%w: logical type %q", ErrUnsupported, lt)
		}
		n, err := strconv.ParseInt(rest[i+1:], 10, 32)
		if err != nil || n <= 0 {
			return nil, fmt.Errorf("%w: logical type %q", ErrUnsupported, lt)
		}
		inner, err := primitiveType(rest[:i])
		if err != nil {
			return nil, err
		}
		return arrow.FixedSizeListOf(int32(n), inner), nil
	}
	return nil, fmt.Errorf("%w: logical type %q", ErrUnsupported, lt)
}

// FromProto rebuilds a schema from flattened pre-order fields, as stored in a
// manifest or a data file's FileDescriptor.
func FromProto(fields []*pb.Field, metadata map[string][]byte) (*Schema, error) {
	s := &Schema{Metadata: maps.Clone(metadata)}
	if s.Metadata == nil {
		s.Metadata = map[string][]byte{}
	}
	byID := make(map[int32]*Field, len(fields))
	for _, p := range fields {
		if _, dup := byID[p.GetId()]; dup {
			return nil, fmt.Errorf("lance/schema: duplicate field id %d", p.GetId())
		}
		f := &Field{
			ID: p.GetId(), ParentID: p.GetParentId(), Name: p.GetName(),
			LogicalType: p.GetLogicalType(), Nullable: p.GetNullable(),
			Metadata: maps.Clone(p.GetMetadata()), raw: p,
		}
		byID[f.ID] = f
		if f.ParentID < 0 {
			s.Fields = append(s.Fields, f)
			continue
		}
		parent, ok := byID[f.ParentID]
		if !ok {
			return nil, fmt.Errorf("lance/schema: field %q (id %d) names parent %d, which is not before it", f.Name, f.ID, f.ParentID)
		}
		parent.Children = append(parent.Children, f)
	}
	for _, f := range s.Fields {
		if err := resolveType(f, 0); err != nil {
			return nil, err
		}
	}
	return s, nil
}

func resolveType(f *Field, depth int) error {
	if depth > 32 {
		return fmt.Errorf("lance/schema: field %q nests too deeply", f.Name)
	}
	for _, c := range f.Children {
		if err := resolveType(c, depth+1); err != nil {
			return err
		}
	}
	switch f.LogicalType {
	case "list", "list.struct", "large_list", "large_list.struct":
		if len(f.Children) != 1 {
			return fmt.Errorf("lance/schema: list field %q has %d children, want 1", f.Name, len(f.Children))
		}
		c := f.Children[0]
		ef := arrow.Field{Name: c.Name, Type: c.Type, Nullable: c.Nullable, Metadata: c.arrowMetadata()}
		if strings.HasPrefix(f.LogicalType, "large_") {
			f.Type = arrow.LargeListOfField(ef)
		} else {
			f.Type = arrow.ListOfField(ef)
		}
	case "struct":
		members := make([]arrow.Field, len(f.Children))
		for i, c := range f.Children {
			members[i] = arrow.Field{Name: c.Name, Type: c.Type, Nullable: c.Nullable, Metadata: c.arrowMetadata()}
		}
		f.Type = arrow.StructOf(members...)
	default:
		t, err := primitiveType(f.LogicalType)
		if err != nil {
			return fmt.Errorf("field %q: %w", f.Name, err)
		}
		f.Type = t
	}
	return nil
}

func (f *Field) arrowMetadata() arrow.Metadata {
	if len(f.Metadata) == 0 {
		return arrow.Metadata{}
	}
	keys := make([]string, 0, len(f.Metadata))
	vals := make([]string, 0, len(f.Metadata))
	for k, v := range f.Metadata {
		keys = append(keys, k)
		vals = append(vals, string(v))
	}
	return arrow.NewMetadata(keys, vals)
}

// ArrowField returns the Arrow field for f.
func (f *Field) ArrowField() arrow.Field {
	return arrow.Field{Name: f.Name, Type: f.Type, Nullable: f.Nullable, Metadata: f.arrowMetadata()}
}

// Proto returns f and its descendants as flattened pre-order messages. A
// field read from storage keeps the fields of its message we do not model.
func (f *Field) appendProto(out []*pb.Field) []*pb.Field {
	var p *pb.Field
	if f.raw != nil {
		p = proto.Clone(f.raw).(*pb.Field)
	} else {
		p = &pb.Field{}
		switch {
		case f.LogicalType == "string" || f.LogicalType == "large_string" ||
			f.LogicalType == "binary" || f.LogicalType == "large_binary":
			p.Encoding = 2 // var-binary; ignored by v2 readers, written as Lance does
		case strings.HasPrefix(f.LogicalType, "dict:"):
			// Dictionary, with an empty Field.dictionary (8) message: what
			// Lance writes for 2.0 files, whose dictionaries live in the pages.
			p.Encoding = 3
			p.ProtoReflect().SetUnknown(protoreflect.RawFields{8<<3 | 2, 0})
		case len(f.Children) == 0:
			p.Encoding = 1 // plain
		}
	}
	p.Id, p.ParentId, p.Name, p.LogicalType, p.Nullable = f.ID, f.ParentID, f.Name, f.LogicalType, f.Nullable
	p.Metadata = maps.Clone(f.Metadata)
	out = append(out, p)
	for _, c := range f.Children {
		out = c.appendProto(out)
	}
	return out
}

// Proto returns the schema's fields flattened in pre-order.
func (s *Schema) Proto() []*pb.Field {
	var out []*pb.Field
	for _, f := range s.Fields {
		out = f.appendProto(out)
	}
	return out
}

// Arrow returns the Arrow schema.
func (s *Schema) Arrow() *arrow.Schema {
	fs := make([]arrow.Field, len(s.Fields))
	for i, f := range s.Fields {
		fs[i] = f.ArrowField()
	}
	var md *arrow.Metadata
	if len(s.Metadata) > 0 {
		keys := make([]string, 0, len(s.Metadata))
		vals := make([]string, 0, len(s.Metadata))
		for k, v := range s.Metadata {
			keys = append(keys, k)
			vals = append(vals, string(v))
		}
		m := arrow.NewMetadata(keys, vals)
		md = &m
	}
	return arrow.NewSchema(fs, md)
}

// MaxID returns the largest field id in the schema, or -1 when empty.
func (s *Schema) MaxID() int32 {
	max := int32(-1)
	s.Walk(func(f *Field) {
		if f.ID > max {
			max = f.ID
		}
	})
	return max
}

// Walk calls fn on every field in pre-order.
func (s *Schema) Walk(fn func(*Field)) {
	var walk func(fs []*Field)
	walk = func(fs []*Field) {
		for _, f := range fs {
			fn(f)
			walk(f.Children)
		}
	}
	walk(s.Fields)
}

// Field returns the top-level field with the given name, or nil.
func (s *Schema) Field(name string) *Field {
	for _, f := range s.Fields {
		if f.Name == name {
			return f
		}
	}
	return nil
}

// Project returns a schema holding only the named top-level fields, in the
// order given. An unknown name is an error.
func (s *Schema) Project(names []string) (*Schema, error) {
	out := &Schema{Metadata: s.Metadata}
	for _, n := range names {
		f := s.Field(n)
		if f == nil {
			return nil, fmt.Errorf("lance/schema: no column %q", n)
		}
		out.Fields = append(out.Fields, f)
	}
	return out, nil
}

// Compatible reports whether a column of type have (a table's) can hold the
// values of type want: the same Lance logical type, or one of two variants
// that store the same values differently:
//
//   - a dictionary of strings (or binaries) and the plain type of its
//     values, either way round (dictionary<int8, utf8> and utf8);
//   - timestamps of the same unit with and without a time zone (a zone-less
//     timestamp is then read as UTC).
func Compatible(have, want arrow.DataType) bool {
	lh, err1 := LogicalType(have)
	lw, err2 := LogicalType(want)
	if err1 != nil || err2 != nil {
		return false
	}
	if lh == lw {
		return true
	}
	if dh, ok := have.(*arrow.DictionaryType); ok {
		have = dh.ValueType
	}
	if dw, ok := want.(*arrow.DictionaryType); ok {
		want = dw.ValueType
	}
	if th, ok := have.(*arrow.TimestampType); ok {
		tw, ok := want.(*arrow.TimestampType)
		return ok && th.Unit == tw.Unit
	}
	return arrow.TypeEqual(have, want)
}

// Evolve returns a copy of s extended with the top-level fields of add that s
// lacks, numbered after s's largest id. New fields must be nullable (rows
// written before them read as null). A field present in both keeps s's type,
// which must be Compatible with add's.
func (s *Schema) Evolve(add *arrow.Schema) (*Schema, bool, error) {
	out := &Schema{Fields: append([]*Field(nil), s.Fields...), Metadata: s.Metadata}
	next := s.MaxID() + 1
	changed := false
	for _, af := range add.Fields() {
		if old := s.Field(af.Name); old != nil {
			lt, err := LogicalType(af.Type)
			if err != nil {
				return nil, false, fmt.Errorf("field %q: %w", af.Name, err)
			}
			if old.Type == nil || !Compatible(old.Type, af.Type) {
				return nil, false, fmt.Errorf("lance/schema: column %q is %s in the table, got %s", af.Name, old.LogicalType, lt)
			}
			continue
		}
		if !af.Nullable {
			return nil, false, fmt.Errorf("lance/schema: new column %q must be nullable: existing rows have no value for it", af.Name)
		}
		f, err := fieldFromArrow(af, -1, &next)
		if err != nil {
			return nil, false, err
		}
		out.Fields = append(out.Fields, f)
		changed = true
	}
	return out, changed, nil
}
