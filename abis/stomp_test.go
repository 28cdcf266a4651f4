package abis

import "testing"

// TestOrdering: a change waits for the earlier changes of its
// referenceId only; an identify (or any other request) for every change
// received before it.
func TestOrdering(t *testing.T) {
	ref := func(op, r string) *Request { return &Request{ID: op, ReferenceID: &r} }
	var o ordering
	insX, dA := o.next(ref(OpInsert, "x"), nil)
	insY, dB := o.next(ref(OpInsert, "y"), nil)
	delX, dC := o.next(ref(OpDelete, "x"), nil)
	ident, dD := o.next(ref(OpIdentify, "y"), nil)
	switch {
	case len(insX) != 0 || len(insY) != 0:
		t.Fatalf("inserts of x and y wait for %d and %d changes, want none", len(insX), len(insY))
	case len(delX) != 1 || delX[0] != dA:
		t.Fatalf("the delete of x waits for %v, want the insert of x only", delX)
	case len(ident) != 3 || dD != nil:
		t.Fatalf("the identify waits for %d changes, want 3", len(ident))
	}
	close(dA)
	close(dC)
	if after, _ := o.next(ref(OpIdentify, "x"), nil); len(after) != 1 || after[0] != dB {
		t.Fatalf("an identify after two of three changes were served waits for %v, want the insert of y", after)
	}
	if after, _ := o.next(ref(OpInsert, "x"), nil); len(after) != 0 {
		t.Fatalf("an insert of x after its delete was served waits for %v", after)
	}
}
