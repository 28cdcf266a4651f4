package protocol

import (
	"reflect"
	"testing"
)

// TestShardAnswerShortIDs: an answer of many one-byte ids (valid ids) is
// as long as the decoder's lower bound per entry allows: 1000 of them
// decode, one byte short does not.
func TestShardAnswerShortIDs(t *testing.T) {
	m := &ShardAnswer{Bytes: 1}
	for i := range MaxTopK {
		m.IDs = append(m.IDs, string(rune('a'+i%26)))
		m.Ranks = append(m.Ranks, uint16(i))
	}
	b := Marshal(m)
	got, err := Decode(b)
	if err != nil || !reflect.DeepEqual(got, m) {
		t.Fatalf("%d one-byte ids: %v", len(m.IDs), err)
	}
	if _, err := Decode(b[:len(b)-1]); err == nil {
		t.Fatal("a truncated answer decoded")
	}
}
