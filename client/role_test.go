package client_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/idface/idface/client"
	"github.com/idface/idface/config"
	"github.com/idface/idface/harness/inproc"
	"github.com/idface/idface/protocol"
)

// TestDeviceChangesRefused (issue 38 item 1): a device's enrollment,
// bulk enrollment and deletion are refused before they are sent, saying
// who may not send what, and count as refused (Refused, RoleRefused),
// never as in doubt. Before, a device's bulk enrollment was cut off while
// it wrote its first batch and left the batch in doubt ("stream 0
// canceled by remote"), and the journal with it.
func TestDeviceChangesRefused(t *testing.T) {
	c := inproc.Start(t, inproc.Literal(config.Literal{Mode: config.Mode2PC, Dim: 64}, 2))
	dev := c.Client("device", "")
	xs := inproc.Templates(300, 64, 1)
	items := inproc.Items(xs, "p")
	ctx := inproc.Ctx(t, 30*time.Second)
	check := func(what string, err error, typ string) {
		t.Helper()
		var re *client.RoleError
		if !errors.As(err, &re) || !client.Refused(err) || !client.RoleRefused(err) || !strings.Contains(err.Error(), "device (device) may not send "+typ+" to p1") {
			t.Fatalf("%s: %v; want device (device) may not send %s, refused", what, err, typ)
		}
	}
	check("enroll", dev.Enroll(ctx, items[:1]), "Enroll")
	check("delete", dev.Delete(ctx, "p-0"), "Delete")
	var after []error
	_, err := dev.EnrollAll(context.Background(), len(items), func(i int) protocol.Item { return items[i] }, client.Bulk{
		Batch: 100,
		After: func(_ []int, err error) { after = append(after, err) },
	})
	check("bulk", err, "Enroll")
	var be *client.BulkError
	if !errors.As(err, &be) || be.InDoubt != nil || len(be.Refused) != 1 || be.Done() != 0 || len(after) != 1 || !client.Refused(after[0]) {
		t.Fatalf("bulk: %+v, outcomes %v; want the first batch refused, nothing in doubt", be, after)
	}
	// A client that takes itself for an operator while the servers know
	// it as a device (configurations apart): the servers' refusal
	// arrives as such while it still writes a batch larger than the
	// stream's window, and the batch is refused, not in doubt.
	stale, err := client.New(c.P, c.Dialer("device"), "")
	if err != nil {
		t.Fatal(err)
	}
	stale.SetSigner("client", c.Signer("client"))
	many := inproc.Items(inproc.Templates(5000, 64, 2), "q") // 1.3 MB
	_, err = stale.EnrollAll(context.Background(), len(many), func(i int) protocol.Item { return many[i] }, client.Bulk{Batch: 5000})
	if !errors.As(err, &be) || be.InDoubt != nil || len(be.Refused) != 1 || !client.RoleRefused(err) || !strings.Contains(err.Error(), "device (device) may not send Enroll to p1") {
		t.Fatalf("a stale operator's bulk: %v; want the servers' refusal", err)
	}
	if dev.MayChange(protocol.OpPut) == nil || c.Client("client", "").MayChange(protocol.OpPut) != nil {
		t.Fatal("MayChange: a device may enroll, or an operator may not")
	}
}
