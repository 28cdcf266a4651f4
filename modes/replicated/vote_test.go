package replicated_test

import (
	"crypto"
	"crypto/rand"
	"strings"
	"testing"

	"github.com/idface/idface/config"
	dev "github.com/idface/idface/device/replicated"
	"github.com/idface/idface/internal/codec/seal"
	"github.com/idface/idface/modes/replicated"
	"github.com/idface/idface/protocol"
	"github.com/idface/idface/protocol/rpc"
)

// TestShareHashVote (issue 18 item 2): an operator's client that gives the
// two holders of one share different copies (sealed, signed, otherwise a
// correct enrollment) gets the batch rolled back at every holder, the
// entry naming the pair that holds the share; nothing is enrolled, and the
// same batch made honestly then enrolls and identifies.
func TestShareHashVote(t *testing.T) {
	c := startCluster(t, config.Literal{Beta: 21, RevealScores: true}, nil)
	xs := templates(4, 31)
	its := items(xs, "v")
	ids := []string{its[0].ID, its[1].ID, its[2].ID, its[3].ID}
	for k, want := range []string{"p1/p3", "p1/p2", "p2/p3"} { // s_k is held by k and k-1
		// Holder k's own share s_k of row 1, which holder k-1 keeps too.
		err := enrollInconsistent(t, c, its, ids, k, 1)
		if err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "differ") {
			t.Fatalf("s_%d given two copies: %v; want a roll-back naming %s", k, err, want)
		}
	}
	if err := c.client("client", "p1").Enroll(ctx(t), its); err != nil {
		t.Fatalf("the honest batch after the refused ones: %v", err)
	}
	r, err := c.client("device", "p2").Identify(ctx(t), xs[2], 1)
	if err != nil || len(r.Candidates) != 1 || r.Candidates[0].ID != ids[2] {
		t.Fatalf("identify after the honest batch: %v %+v", err, r)
	}
}

// enrollInconsistent sends, through p1 as an operator's client would, a
// sealed enrollment of its whose holder k's own share of row differs by
// one element from the copy its other holder gets.
func enrollInconsistent(t *testing.T, c *cluster, its []protocol.Item, ids []string, k, row int) error {
	t.Helper()
	pts, err := dev.Part{}.SealedShares(c.p, 0, its)
	if err != nil {
		t.Fatal(err)
	}
	pair := 2*c.p.Dim()*c.p.Ring().Bits/8 + replicated.TrailerSize
	pts[k][1+row*pair] ^= 1 // after the flag byte: the first element of s_k
	var nonce [16]byte
	rand.Read(nonce[:])
	sctx := protocol.SealContext(nonce, ids)
	parts := make([][]byte, len(pts))
	hashes := make([][32]byte, len(pts))
	for h, pt := range pts {
		key, _ := c.p.SealKey(h)
		b := seal.Binding{Cluster: c.p.ClusterID(), Holder: c.p.Party(h).Name, Mode: string(c.p.Mode()), Context: sctx}
		if parts[h], err = seal.Seal(key, b, pt); err != nil {
			t.Fatal(err)
		}
		hashes[h] = protocol.PartHash(parts[h])
	}
	auth, err := protocol.SignSealed(c.keys["client"].(crypto.Signer), "client", c.p.ClusterID(), nonce, ids, hashes)
	if err != nil {
		t.Fatal(err)
	}
	_, err = rpc.Call(ctx(t), c.dialer("client"), "p1", &protocol.SealedEnroll{Auth: auth, IDs: ids, Parts: parts})
	return err
}
