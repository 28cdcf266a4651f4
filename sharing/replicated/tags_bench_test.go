package replicated

import "testing"

// BenchmarkTags: one query's tags at the tagger, 10^6 positions of k = 8.
func BenchmarkTags(b *testing.B) {
	vec := make([]uint8, 1_000_000)
	for i := range vec {
		vec[i] = uint8(i * 7)
	}
	dst := make([]byte, 4*len(vec))
	var key [32]byte
	b.SetBytes(int64(len(vec)))
	b.ReportAllocs()
	for b.Loop() {
		if err := Tags(dst, vec, &key); err != nil {
			b.Fatal(err)
		}
	}
}
