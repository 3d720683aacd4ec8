package file

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
)

// fuzzSeeds are small valid files covering every encoding the writer
// emits. TestUpdateFuzzCorpus writes them to testdata/fuzz/FuzzOpen.
func fuzzSeeds(t testing.TB) map[string][]byte {
	seeds := map[string][]byte{}
	groups := [][]int{}
	for i := 0; i < len(roundTripTypes); i += 4 {
		g := []int{}
		for k := i; k < min(i+4, len(roundTripTypes)); k++ {
			g = append(g, k)
		}
		groups = append(groups, g)
	}
	for gi, g := range groups {
		var fields []arrow.Field
		for _, k := range g {
			fields = append(fields, arrow.Field{Name: roundTripTypes[k].name, Type: roundTripTypes[k].dt, Nullable: true})
		}
		as := arrow.NewSchema(fields, nil)
		for _, nullP := range []float64{0, 0.3} {
			gen := &gen{rng: rand.New(rand.NewPCG(uint64(gi), 1)), nullP: nullP}
			rec := gen.record(as, 12)
			b, _ := writeFile(t, as, WriterOptions{PageBytes: 64}, rec)
			seeds[fmt.Sprintf("seed-%02d-nulls%.0f", gi, nullP*10)] = b
			rec.Release()
		}
	}
	return seeds
}

// FuzzOpen feeds arbitrary bytes to Open and reads every column: it must
// return errors, never panic, and never allocate without bound.
func FuzzOpen(f *testing.F) {
	for _, b := range fuzzSeeds(f) {
		f.Add(b)
	}
	old := decodeLimitFloor
	decodeLimitFloor = 16 << 20 // a hostile file may make a Read allocate at most this much
	f.Cleanup(func() { decodeLimitFloor = old })
	f.Fuzz(func(t *testing.T, data []byte) {
		r, err := Open(context.Background(), &memSource{b: data}, int64(len(data)))
		if err != nil {
			return
		}
		_ = readAll(r)
		if r.NumRows() > 2 {
			var ids []int32
			for _, f := range r.Schema().Fields {
				ids = append(ids, f.ID)
			}
			if rec, err := r.Read(context.Background(), ids, 1, 2); err == nil {
				rec.Release()
			}
			if rec, err := r.ReadWith(context.Background(), ids, 0, r.NumRows(), ReadOptions{PlainDictionaries: true}); err == nil {
				rec.Release()
			}
		}
	})
}

// TestUpdateFuzzCorpus rewrites the seed corpus when
// LANCE_FILE_UPDATE_CORPUS=1 (crashers found by fuzzing stay there too).
func TestUpdateFuzzCorpus(t *testing.T) {
	if os.Getenv("LANCE_FILE_UPDATE_CORPUS") == "" {
		t.Skip("set LANCE_FILE_UPDATE_CORPUS=1 to rewrite testdata/fuzz/FuzzOpen seeds")
	}
	dir := filepath.Join("testdata", "fuzz", "FuzzOpen")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, b := range fuzzSeeds(t) {
		content := fmt.Sprintf("go test fuzz v1\n[]byte(%q)\n", b)
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
