package file

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"math/rand/v2"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"google.golang.org/protobuf/proto"

	"github.com/lance-context/lance-context/lance/pb"
	"github.com/lance-context/lance-context/lance/schema"
)

var mixedSchema = arrow.NewSchema([]arrow.Field{
	{Name: "id", Type: arrow.BinaryTypes.String},
	{Name: "n", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
	{Name: "flag", Type: arrow.FixedWidthTypes.Boolean, Nullable: true},
	{Name: "text", Type: arrow.BinaryTypes.LargeString, Nullable: true},
	{Name: "blob", Type: arrow.BinaryTypes.LargeBinary, Nullable: true},
	{Name: "tokens", Type: arrow.ListOf(arrow.PrimitiveTypes.Int32), Nullable: true},
	{Name: "vec", Type: arrow.FixedSizeListOf(4, arrow.PrimitiveTypes.Float32), Nullable: true},
	{Name: "ts", Type: &arrow.TimestampType{Unit: arrow.Microsecond, TimeZone: "UTC"}, Nullable: true},
	{Name: "nothing", Type: arrow.PrimitiveTypes.Float64, Nullable: true},
}, nil)

// mixedRecords builds batches of mixedSchema; "nothing" is all null.
func mixedRecords(seed uint64, sizes ...int) []arrow.RecordBatch {
	g := &gen{rng: rand.New(rand.NewPCG(seed, 7)), nullP: 0.1}
	var recs []arrow.RecordBatch
	for _, n := range sizes {
		r := g.record(mixedSchema, n)
		cols := append([]arrow.Array(nil), r.Columns()...)
		cols[len(cols)-1] = allNull(arrow.PrimitiveTypes.Float64, n)
		recs = append(recs, array.NewRecordBatch(mixedSchema, cols, int64(n)))
		cols[len(cols)-1].Release()
		r.Release()
	}
	return recs
}

// TestMultiPage writes 100k rows in 4 KiB pages and reads ranges that start
// and end at, before and after page boundaries.
func TestMultiPage(t *testing.T) {
	recs := mixedRecords(42, 30000, 1, 69999)
	b, info := writeFile(t, mixedSchema, WriterOptions{PageBytes: 4 << 10}, recs...)
	if info.Rows != 100000 {
		t.Fatalf("rows %d", info.Rows)
	}
	r, _ := openBytes(t, b)
	if r.NumRows() != 100000 {
		t.Fatalf("NumRows %d", r.NumRows())
	}
	rng := rand.New(rand.NewPCG(3, 3))
	for i, f := range r.Schema().Fields {
		n := r.top[f.ID]
		want := concatColumn(t, recs, i)
		col := n.col
		if f.Name != "nothing" && len(col.pages) < 5 {
			t.Fatalf("%s: only %d pages", f.Name, len(col.pages))
		}
		ranges := [][2]int64{{0, 100000}, {0, 1}, {99999, 100000}, {50000, 50001}}
		for _, k := range []int{1, len(col.pages) / 2, len(col.pages) - 1} {
			if k <= 0 || k >= len(col.pages) {
				continue
			}
			s := col.starts[k]
			ranges = append(ranges, [2]int64{s - 1, s + 1}, [2]int64{s, s + 1}, [2]int64{s - 1, s}, [2]int64{col.starts[k-1], s}, [2]int64{max(0, s-5000), min(100000, s+7000)})
		}
		for range 10 {
			a := rng.Int64N(100000)
			ranges = append(ranges, [2]int64{a, a + rng.Int64N(100000-a+1)})
		}
		t.Run(f.Name, func(t *testing.T) { checkRanges(t, r, f.ID, want, ranges) })
	}
}

// TestHugeValue: an 8 MiB value gets a page of its own, between pages of
// small values.
func TestHugeValue(t *testing.T) {
	as := arrow.NewSchema([]arrow.Field{{Name: "b", Type: arrow.BinaryTypes.LargeBinary, Nullable: true}}, nil)
	bld := array.NewBinaryBuilder(mem, arrow.BinaryTypes.LargeBinary)
	huge := bytes.Repeat([]byte("0123456789abcdef"), (8<<20)/16)
	for i := range 1000 {
		switch i {
		case 500:
			bld.Append(huge)
		case 501:
			bld.AppendNull()
		default:
			bld.Append([]byte{byte(i), byte(i >> 8)})
		}
	}
	arr := bld.NewArray()
	rec := array.NewRecordBatch(as, []arrow.Array{arr}, int64(arr.Len()))
	b, _ := writeFile(t, as, WriterOptions{PageBytes: 64 << 10}, rec)
	r, _ := openBytes(t, b)
	col := r.top[0].col
	found := false
	for i, p := range col.pages {
		if col.starts[i] == 500 && p.rows == 1 {
			found = true
		}
	}
	if !found {
		t.Fatalf("the 8 MiB value is not alone in its page: starts %v", col.starts)
	}
	checkRanges(t, r, 0, arr, [][2]int64{{0, 1000}, {500, 501}, {499, 502}, {0, 500}, {501, 1000}})

	// With the default 8 MiB pages too.
	b, _ = writeFile(t, as, WriterOptions{}, rec)
	r, _ = openBytes(t, b)
	checkRanges(t, r, 0, arr, [][2]int64{{0, 1000}, {500, 501}})
}

// TestProjection reads subsets of the fields in different orders.
func TestProjection(t *testing.T) {
	recs := mixedRecords(9, 500, 700)
	b, _ := writeFile(t, mixedSchema, WriterOptions{PageBytes: 2 << 10}, recs...)
	r, _ := openBytes(t, b)
	ids := map[string]int32{}
	for _, f := range r.Schema().Fields {
		ids[f.Name] = f.ID
	}
	// Field ids are pre-order: tokens has a child, so vec's id is 7.
	if ids["vec"] != 7 || ids["tokens"] != 5 {
		t.Fatalf("unexpected field ids %v", ids)
	}
	for _, names := range [][]string{
		{"tokens", "id"}, {"vec"}, {"ts", "text", "n", "flag"}, {"nothing", "blob", "id"}, {},
		{"id", "n", "flag", "text", "blob", "tokens", "vec", "ts", "nothing"},
	} {
		var fids []int32
		for _, n := range names {
			fids = append(fids, ids[n])
		}
		rec, err := r.Read(context.Background(), fids, 100, 1100)
		if err != nil {
			t.Fatal(err)
		}
		if int(rec.NumCols()) != len(names) || rec.NumRows() != 1000 {
			t.Fatalf("%v: %d cols %d rows", names, rec.NumCols(), rec.NumRows())
		}
		for i, n := range names {
			if rec.Schema().Field(i).Name != n {
				t.Fatalf("%v: column %d is %q", names, i, rec.Schema().Field(i).Name)
			}
			want := concatColumn(t, recs, mixedSchema.FieldIndices(n)[0])
			ws := array.NewSlice(want, 100, 1100)
			assertEqualArrays(t, n, ws, rec.Column(i))
			ws.Release()
		}
		rec.Release()
	}
	if _, err := r.Read(context.Background(), []int32{6}, 0, 1); err == nil {
		t.Fatal("reading a child field id succeeded")
	}
	if _, err := r.Read(context.Background(), []int32{0}, 0, 1201); err == nil {
		t.Fatal("reading past the end succeeded")
	}
	if _, err := r.Read(context.Background(), []int32{0}, 5, 4); err == nil {
		t.Fatal("reading a reversed range succeeded")
	}
}

// TestReadFewBytes proves a small read fetches only what it needs.
func TestReadFewBytes(t *testing.T) {
	recs := mixedRecords(5, 100000)
	b, _ := writeFile(t, mixedSchema, WriterOptions{PageBytes: 64 << 10}, recs...)
	r, src := openBytes(t, b)
	opened := src.bytes.Load()
	if opened > tailReadSize {
		t.Fatalf("Open read %d bytes", opened)
	}
	for _, name := range []string{"id", "text", "tokens", "vec", "n"} {
		f := r.Schema().Field(name)
		before := src.bytes.Load()
		rec, err := r.Read(context.Background(), []int32{f.ID}, 54321, 54331)
		if err != nil {
			t.Fatal(err)
		}
		rec.Release()
		read := src.bytes.Load() - before
		t.Logf("%s: read %d bytes of a %d-byte file", name, read, len(b))
		// A string or list page's offsets are read by the chunks the rows
		// fall in (offsetsChunk entries; see IOOptions.WholeOffsets): at
		// most two chunks more than the rows need (96 KiB when a page's
		// offsets were read whole).
		if read > int64(len(b))/100 || read > 2*8*offsetsChunk+4<<10 {
			t.Fatalf("%s: reading 10 rows fetched %d bytes of a %d-byte file", name, read, len(b))
		}
	}
	// A whole-column scan reads about that column's share of the file only.
	before := src.bytes.Load()
	rec, err := r.Read(context.Background(), []int32{r.Schema().Field("n").ID}, 0, r.NumRows())
	if err != nil {
		t.Fatal(err)
	}
	rec.Release()
	if read := src.bytes.Load() - before; read > int64(len(b))/4 {
		t.Fatalf("scanning one int64 column read %d of %d bytes", read, len(b))
	}
}

// TestLayout checks the bytes: footer, alignment, type URLs, encodings.
func TestLayout(t *testing.T) {
	as := arrow.NewSchema([]arrow.Field{
		{Name: "i", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
		{Name: "s", Type: arrow.BinaryTypes.String, Nullable: true},
		{Name: "l", Type: arrow.ListOf(arrow.PrimitiveTypes.Float32), Nullable: true},
		{Name: "v", Type: arrow.FixedSizeListOf(2, arrow.PrimitiveTypes.Float32), Nullable: true},
		{Name: "b", Type: arrow.FixedWidthTypes.Boolean, Nullable: true},
		{Name: "f", Type: arrow.PrimitiveTypes.Float32},
		{Name: "z", Type: arrow.PrimitiveTypes.Int32, Nullable: true},
	}, nil)
	bi := array.NewInt64Builder(mem)
	bi.AppendValues([]int64{1, 0, 3}, []bool{true, false, true})
	bs := array.NewStringBuilder(mem)
	bs.AppendValues([]string{"ab", "", "cde"}, []bool{true, false, true})
	bl := array.NewListBuilder(mem, arrow.PrimitiveTypes.Float32)
	bl.Append(true)
	bl.ValueBuilder().(*array.Float32Builder).AppendValues([]float32{1, 2}, nil)
	bl.AppendNull()
	bl.Append(true)
	bl.ValueBuilder().(*array.Float32Builder).AppendValues([]float32{3}, nil)
	bv := array.NewFixedSizeListBuilder(mem, 2, arrow.PrimitiveTypes.Float32)
	bv.Append(true)
	bv.ValueBuilder().(*array.Float32Builder).AppendValues([]float32{1, 2}, nil)
	bv.AppendNull()
	bv.Append(true)
	bv.ValueBuilder().(*array.Float32Builder).AppendValues([]float32{5, 6}, nil)
	bb := array.NewBooleanBuilder(mem)
	bb.AppendValues([]bool{true, false, true}, nil)
	bf := array.NewFloat32Builder(mem)
	bf.AppendValues([]float32{1.5, 2.5, 3.5}, nil)
	bz := array.NewInt32Builder(mem)
	bz.AppendNulls(3)
	cols := []arrow.Array{bi.NewArray(), bs.NewArray(), bl.NewArray(), bv.NewArray(), bb.NewArray(), bf.NewArray(), bz.NewArray()}
	rec := array.NewRecordBatch(as, cols, 3)
	b, info := writeFile(t, as, WriterOptions{}, rec)

	// Field ids and columns: l has a child (id 3, column 3), so v is id 4.
	wantIDs, wantCols := []int32{0, 1, 2, 3, 4, 5, 6, 7}, []int32{0, 1, 2, 3, 4, 5, 6, 7}
	if !equalInts(info.FieldIDs, wantIDs) || !equalInts(info.ColumnIndices, wantCols) {
		t.Fatalf("FieldIDs %v ColumnIndices %v", info.FieldIDs, info.ColumnIndices)
	}

	// Footer.
	ft := b[len(b)-40:]
	if string(ft[36:]) != "LANC" {
		t.Fatalf("magic %q", ft[36:])
	}
	if major, minor := binary.LittleEndian.Uint16(ft[32:]), binary.LittleEndian.Uint16(ft[34:]); major != 0 || minor != 3 {
		t.Fatalf("version %d.%d", major, minor)
	}
	cmStart := binary.LittleEndian.Uint64(ft[0:])
	cmoStart := binary.LittleEndian.Uint64(ft[8:])
	gboStart := binary.LittleEndian.Uint64(ft[16:])
	ngb := binary.LittleEndian.Uint32(ft[24:])
	ncol := binary.LittleEndian.Uint32(ft[28:])
	if ngb != 1 || ncol != 8 {
		t.Fatalf("%d global buffers, %d columns", ngb, ncol)
	}
	if gboStart+16 != uint64(len(b)-40) || cmoStart+16*uint64(ncol) != gboStart || cmStart > cmoStart {
		t.Fatalf("footer positions inconsistent: cm %d cmo %d gbo %d size %d", cmStart, cmoStart, gboStart, len(b))
	}
	gb0Pos := binary.LittleEndian.Uint64(b[gboStart:])
	gb0Len := binary.LittleEndian.Uint64(b[gboStart+8:])
	if gb0Pos+gb0Len != cmStart {
		t.Fatalf("global buffer 0 [%d, +%d) does not end where the column metadata starts (%d)", gb0Pos, gb0Len, cmStart)
	}
	var fd pb.FileDescriptor
	if err := proto.Unmarshal(b[gb0Pos:gb0Pos+gb0Len], &fd); err != nil || fd.Length != 3 || len(fd.Schema.Fields) != 8 {
		t.Fatalf("file descriptor: %v, %v", err, &fd)
	}

	var encs []*pb.ArrayEncoding
	var bufSizes [][]uint64
	for c := range ncol {
		pos := binary.LittleEndian.Uint64(b[cmoStart+16*uint64(c):])
		n := binary.LittleEndian.Uint64(b[cmoStart+16*uint64(c)+8:])
		var cm pb.ColumnMetadata
		if err := proto.Unmarshal(b[pos:pos+n], &cm); err != nil {
			t.Fatal(err)
		}
		var colAny pb.AnyMsg
		if err := proto.Unmarshal(cm.Encoding.GetDirect().GetEncoding(), &colAny); err != nil || colAny.TypeUrl != "/lance.encodings.ColumnEncoding" || !bytes.Equal(colAny.Value, []byte{0x0a, 0x00}) {
			t.Fatalf("column %d encoding %v %v", c, err, &colAny)
		}
		if len(cm.Pages) != 1 {
			t.Fatalf("column %d has %d pages", c, len(cm.Pages))
		}
		p := cm.Pages[0]
		for i, off := range p.BufferOffsets {
			if off%64 != 0 {
				t.Fatalf("column %d buffer %d at %d is not 64-byte aligned", c, i, off)
			}
		}
		var a pb.AnyMsg
		if err := proto.Unmarshal(p.Encoding.GetDirect().GetEncoding(), &a); err != nil {
			t.Fatal(err)
		}
		if a.TypeUrl != "/lance.encodings.ArrayEncoding" {
			t.Fatalf("column %d page type_url %q", c, a.TypeUrl)
		}
		var e pb.ArrayEncoding
		if err := proto.Unmarshal(a.Value, &e); err != nil {
			t.Fatal(err)
		}
		encs = append(encs, &e)
		bufSizes = append(bufSizes, p.BufferSizes)
		if c == 3 && p.Length != 3 { // the list's items column holds 3 items
			t.Fatalf("items page length %d", p.Length)
		}
	}
	want := []*pb.ArrayEncoding{
		encSomeNulls(encFlat(1, 0), encFlat(64, 1)),
		encBinary(encNoNulls(encFlat(64, 0)), encFlat(8, 1), 6),
		encList(encNoNulls(encFlat(64, 0)), 4, 3),
		encNoNulls(encFlat(32, 0)),
		encSomeNulls(encFlat(1, 0), encFSL(2, encSomeNulls(encFlat(1, 1), encFlat(32, 2)))),
		encNoNulls(encFlat(1, 0)),
		encNoNulls(encFlat(32, 0)),
		encAllNulls(),
	}
	for i := range want {
		if !proto.Equal(encs[i], want[i]) {
			t.Errorf("column %d encoding\n got %v\nwant %v", i, encs[i], want[i])
		}
	}
	wantSizes := [][]uint64{{1, 24}, {24, 5}, {24}, {12}, {1, 1, 24}, {1}, {12}, {}}
	for i := range wantSizes {
		if !equalInts(bufSizes[i], wantSizes[i]) {
			t.Errorf("column %d buffer sizes %v, want %v", i, bufSizes[i], wantSizes[i])
		}
	}
	// Exact buffer contents of the string and list pages.
	r, _ := openBytes(t, b)
	sd := r.top[1].col.pages[0].desc.(*binDesc)
	if got := u64s(b[sd.indices.off : sd.indices.off+24]); !equalInts(got, []uint64{2, 2 + 6, 5}) {
		t.Errorf("string end offsets %v, want [2 8 5]", got)
	}
	ld := r.top[2].col.pages[0].desc.(*listDesc)
	if got := u64s(b[ld.offsets.off : ld.offsets.off+24]); !equalInts(got, []uint64{2, 2 + 4, 3}) {
		t.Errorf("list end offsets %v, want [2 6 3]", got)
	}
	vd := r.top[4].col.pages[0].desc.(*fixedDesc)
	if got := b[vd.items.bitmap.off]; got != 0b110011 {
		t.Errorf("fsl item validity %08b, want 00110011", got)
	}
	if got := b[vd.values.off+8 : vd.values.off+16]; !bytes.Equal(got, make([]byte, 8)) {
		t.Errorf("null fsl row's values %v, want zeros", got)
	}
	bd := r.top[5].col.pages[0].desc.(*fixedDesc)
	if got := b[bd.values.off]; got != 0b101 {
		t.Errorf("bool bits %08b, want 00000101 (LSB first)", got)
	}
}

func equalInts[T int32 | uint64](a, b []T) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func u64s(b []byte) []uint64 {
	out := make([]uint64, len(b)/8)
	for i := range out {
		out[i] = binary.LittleEndian.Uint64(b[8*i:])
	}
	return out
}

// TestBadFiles: every kind of damage is an error, never a panic.
func TestBadFiles(t *testing.T) {
	recs := mixedRecords(1, 50)
	good, _ := writeFile(t, mixedSchema, WriterOptions{PageBytes: 512}, recs...)
	ctx := context.Background()
	open := func(b []byte) error {
		r, err := Open(ctx, &memSource{b: b}, int64(len(b)))
		if err != nil {
			return err
		}
		return readAll(r)
	}
	if err := open(good); err != nil {
		t.Fatal(err)
	}
	t.Run("truncated", func(t *testing.T) {
		for n := 0; n < len(good); n++ {
			if err := open(good[:n]); err == nil {
				t.Fatalf("a file truncated to %d of %d bytes opened and read", n, len(good))
			}
		}
	})
	t.Run("version", func(t *testing.T) {
		for _, v := range [][2]uint16{{2, 1}, {2, 2}, {0, 1}, {0, 2}, {3, 0}} {
			b := bytes.Clone(good)
			binary.LittleEndian.PutUint16(b[len(b)-8:], v[0])
			binary.LittleEndian.PutUint16(b[len(b)-6:], v[1])
			if err := open(b); !errors.Is(err, ErrUnsupportedVersion) {
				t.Fatalf("version %d.%d: %v", v[0], v[1], err)
			}
		}
		b := bytes.Clone(good)
		binary.LittleEndian.PutUint16(b[len(b)-8:], 2)
		binary.LittleEndian.PutUint16(b[len(b)-6:], 0)
		if err := open(b); err != nil {
			t.Fatalf("version 2.0: %v", err)
		}
	})
	t.Run("magic", func(t *testing.T) {
		b := bytes.Clone(good)
		b[len(b)-1] = 'X'
		if err := open(b); !errors.Is(err, ErrCorrupt) {
			t.Fatal(err)
		}
	})
	t.Run("mutations", func(t *testing.T) {
		rng := rand.New(rand.NewPCG(1, 2))
		seeds := [][]byte{good}
		for _, s := range fuzzSeeds(t) {
			seeds = append(seeds, s)
		}
		for range 6000 {
			b := bytes.Clone(seeds[rng.IntN(len(seeds))])
			for range 1 + rng.IntN(4) {
				i := rng.IntN(len(b))
				if rng.IntN(2) == 0 {
					i = len(b) - 1 - rng.IntN(min(len(b), 2000)) // the metadata end
				}
				switch rng.IntN(3) {
				case 0:
					b[i] ^= byte(1 << rng.IntN(8))
				case 1:
					b[i] = byte(rng.IntN(4))
				default:
					for k := i; k < min(len(b), i+8); k++ {
						b[k] = 0xff
					}
				}
			}
			_ = open(b) // must return, not panic
		}
	})
	t.Run("source errors", func(t *testing.T) {
		r, err := Open(ctx, &memSource{b: good}, int64(len(good)))
		if err != nil {
			t.Fatal(err)
		}
		r.src, r.tail = failingSource{}, nil // nothing from Open's tail either
		if err := readAll(r); err == nil {
			t.Fatal("read with a failing source succeeded")
		}
		cctx, cancel := context.WithCancel(ctx)
		cancel()
		r.src = &memSource{b: good}
		if _, err := r.Read(cctx, []int32{0}, 0, 10); !errors.Is(err, context.Canceled) {
			t.Fatalf("canceled read: %v", err)
		}
	})
}

type failingSource struct{}

func (failingSource) ReadRange(context.Context, int64, int64) ([]byte, error) {
	return nil, errors.New("boom")
}

// readAll reads every top-level field, in chunks.
func readAll(r *Reader) error {
	var ids []int32
	for _, f := range r.Schema().Fields {
		ids = append(ids, f.ID)
	}
	const chunk = 1024
	for start := int64(0); start < r.NumRows() && start < 64*chunk; start += chunk {
		rec, err := r.Read(context.Background(), ids, start, min(r.NumRows(), start+chunk))
		if err != nil {
			return err
		}
		for _, c := range rec.Columns() {
			if v, ok := c.(interface{ ValidateFull() error }); ok {
				if err := v.ValidateFull(); err != nil {
					rec.Release()
					return err
				}
			}
		}
		rec.Release()
	}
	return nil
}

// TestWriterErrors: bad input to the writer is an error.
func TestWriterErrors(t *testing.T) {
	as := arrow.NewSchema([]arrow.Field{{Name: "a", Type: arrow.PrimitiveTypes.Int64}}, nil)
	s, err := schema.FromArrow(as, 0)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	w, err := NewWriter(&buf, s, WriterOptions{})
	if err != nil {
		t.Fatal(err)
	}
	g := &gen{rng: rand.New(rand.NewPCG(1, 1)), nullP: 0.5}
	wrongType := g.record(arrow.NewSchema([]arrow.Field{{Name: "a", Type: arrow.PrimitiveTypes.Int32}}, nil), 3)
	if err := w.Write(wrongType); err == nil {
		t.Fatal("wrong type accepted")
	}
	nulls := g.record(arrow.NewSchema([]arrow.Field{{Name: "a", Type: arrow.PrimitiveTypes.Int64, Nullable: true}}, nil), 50)
	if err := w.Write(nulls); err == nil {
		t.Fatal("nulls in a non-nullable column accepted")
	}
	if _, err := w.Finish(); err != nil {
		t.Fatal(err)
	}
	if err := w.Write(g.record(as, 1)); err == nil {
		t.Fatal("Write after Finish accepted")
	}
	// An empty file is valid.
	r, _ := openBytes(t, buf.Bytes())
	if r.NumRows() != 0 {
		t.Fatalf("rows %d", r.NumRows())
	}
	rec, err := r.Read(context.Background(), []int32{0}, 0, 0)
	if err != nil || rec.NumRows() != 0 {
		t.Fatalf("empty read: %v", err)
	}
	// Write errors are sticky.
	w, _ = NewWriter(errWriter{}, s, WriterOptions{PageBytes: 64})
	if err := w.Write(g.record(as, 100)); err == nil {
		t.Fatal("write error not reported")
	}
	if _, err := w.Finish(); err == nil {
		t.Fatal("Finish after a write error succeeded")
	}
}

type errWriter struct{}

func (errWriter) Write([]byte) (int, error) { return 0, errors.New("disk full") }

// TestWriterMemory: the writer buffers about one page per column.
func TestWriterMemory(t *testing.T) {
	const pageBytes = 16 << 10
	s, _ := schema.FromArrow(mixedSchema, 0)
	w, err := NewWriter(discard{}, s, WriterOptions{PageBytes: pageBytes})
	if err != nil {
		t.Fatal(err)
	}
	var check func(c colWriter)
	check = func(c colWriter) {
		var size int
		switch x := c.(type) {
		case *fixedWriter:
			size = x.size()
		case *binaryWriter:
			size = x.size()
		case *listWriter:
			size = x.size()
			check(x.child)
		}
		if size > pageBytes+1024 {
			t.Fatalf("%T buffers %d bytes", c, size)
		}
	}
	for _, rec := range mixedRecords(77, 5000, 20000, 3) {
		if err := w.Write(rec); err != nil {
			t.Fatal(err)
		}
		for _, c := range w.fields {
			check(c)
		}
	}
	if _, err := w.Finish(); err != nil {
		t.Fatal(err)
	}
}

type discard struct{}

func (discard) Write(b []byte) (int, error) { return len(b), nil }

// TestAllNullTextPagesHoldNoBytes: a page of a text or binary column whose
// rows are all null is written as Nullable.all_nulls with no buffers (not
// as 8 bytes of end offset a row), and reads back as nulls. LanceDB reads
// such pages: TestLanceDBReadsOurFiles writes them.
func TestAllNullTextPagesHoldNoBytes(t *testing.T) {
	as := arrow.NewSchema([]arrow.Field{
		{Name: "s", Type: arrow.BinaryTypes.String, Nullable: true},
		{Name: "lb", Type: arrow.BinaryTypes.LargeBinary, Nullable: true},
	}, nil)
	const n = 1000
	rec := array.NewRecordBatch(as, []arrow.Array{allNull(as.Field(0).Type, n), allNull(as.Field(1).Type, n)}, n)
	defer rec.Release()
	b, _ := writeFile(t, as, WriterOptions{}, rec)
	r, _ := openBytes(t, b)
	for i := range 2 {
		d := r.top[int32(i)].col.pages[0].desc.(*binDesc)
		if !d.outer.allNull || d.indices.size != 0 || d.bytes.size != 0 {
			t.Errorf("column %d: page %+v, want all nulls and no buffers", i, d)
		}
	}
	if len(b) > 4096 {
		t.Errorf("file of %d bytes for %d null rows", len(b), n)
	}
	got, err := r.Read(context.Background(), []int32{0, 1}, 0, n)
	if err != nil {
		t.Fatal(err)
	}
	defer got.Release()
	for i := range 2 {
		if c := got.Column(i); c.NullN() != n || c.Len() != n {
			t.Errorf("column %d read back with %d nulls of %d rows", i, c.NullN(), c.Len())
		}
	}
}
