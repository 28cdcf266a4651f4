package rowmap

import (
	"fmt"
	"testing"
)

func TestIDIndexCollisions(t *testing.T) {
	names := map[Ref]string{}
	x := NewIndex(func(r Ref) string { return names[r] })
	for _, hash := range []func(string) uint64{x.hash, func(string) uint64 { return 42 }} {
		x.hash = hash
		clear(x.m)
		clear(x.overflow)
		for i := range 50 {
			r := Ref{Seg: i % 3, Seq: i}
			names[r] = fmt.Sprintf("id-%d", i)
			x.Insert(names[r], r)
		}
		for i := range 50 {
			if r, ok := x.Lookup(fmt.Sprintf("id-%d", i)); !ok || r.Seq != i || r.Seg != i%3 {
				t.Fatalf("id-%d: %v %v", i, r, ok)
			}
		}
		for i := 0; i < 50; i += 2 {
			x.Remove(fmt.Sprintf("id-%d", i))
		}
		for i := range 50 {
			if _, ok := x.Lookup(fmt.Sprintf("id-%d", i)); ok != (i%2 == 1) {
				t.Fatalf("id-%d present = %v after removing the even ids", i, ok)
			}
		}
		if _, ok := x.Lookup("never"); ok {
			t.Fatal("unknown id found")
		}
	}
}
