package file

import (
	"context"
	"testing"
)

// TestOpenTail: a caller's tail that holds the metadata costs Open no read
// at all; a shorter one is extended as Open would read (the first 64 KiB,
// then the rest of the metadata); the Reader is the same as Open's.
func TestOpenTail(t *testing.T) {
	ctx := context.Background()
	small, _ := writeFile(t, mixedSchema, WriterOptions{}, mixedRecords(3, 2000)...)
	// Pages of 1 KiB: thousands of pages, metadata well past the 64 KiB tail.
	big, _ := writeFile(t, mixedSchema, WriterOptions{PageBytes: 1 << 10}, mixedRecords(4, 30000)...)
	for _, c := range []struct {
		name      string
		b         []byte
		tail      int64
		wantReads int64
	}{
		{"small/whole tail", small, TailReadSize, 0},
		{"small/footer only", small, footerLen, 1},
		{"small/short of the footer", small, 10, 1},
		{"small/empty tail", small, 0, 1},
		{"big/64 KiB tail", big, TailReadSize, 1},
		{"big/footer only", big, footerLen, 2},
	} {
		t.Run(c.name, func(t *testing.T) {
			want, _ := openBytes(t, c.b)
			size := int64(len(c.b))
			src := &memSource{b: c.b}
			tail := append([]byte{}, c.b[size-min(c.tail, size):]...)
			r, err := OpenTail(ctx, src, size, tail)
			if err != nil {
				t.Fatal(err)
			}
			if got := src.reads.Load(); got != c.wantReads {
				t.Errorf("OpenTail with a %d-byte tail of a %d-byte file (metadata %d bytes) read %d times, want %d", c.tail, size, want.MetadataBytes(), got, c.wantReads)
			}
			if r.NumRows() != want.NumRows() || len(r.Schema().Fields) != len(want.Schema().Fields) {
				t.Fatalf("OpenTail: %d rows, %d fields; Open: %d rows, %d fields", r.NumRows(), len(r.Schema().Fields), want.NumRows(), len(want.Schema().Fields))
			}
			id := r.Schema().Field("text").ID
			a, err := r.Read(ctx, []int32{id}, 10, 200)
			if err != nil {
				t.Fatal(err)
			}
			defer a.Release()
			b, err := want.Read(ctx, []int32{id}, 10, 200)
			if err != nil {
				t.Fatal(err)
			}
			defer b.Release()
			assertEqualArrays(t, "text", b.Column(0), a.Column(0))
		})
	}
	if _, err := OpenTail(ctx, &memSource{b: small}, 100, small); err == nil {
		t.Fatal("OpenTail accepted a tail longer than the file")
	}
}

// TestOpenBigMetadataIsTwoReads: metadata larger than the first 64 KiB
// read costs one more read, whatever its size.
func TestOpenBigMetadataIsTwoReads(t *testing.T) {
	big, _ := writeFile(t, mixedSchema, WriterOptions{PageBytes: 1 << 10}, mixedRecords(4, 30000)...)
	r, src := openBytes(t, big)
	if r.MetadataBytes() <= TailReadSize {
		t.Fatalf("metadata of %d bytes fits the first read; the test wants more", r.MetadataBytes())
	}
	if n := src.reads.Load(); n != 2 {
		t.Fatalf("Open read %d times (metadata %d bytes), want 2", n, r.MetadataBytes())
	}
}
