package replicated_test

import (
	"testing"
	"time"

	"github.com/idface/idface/network/memnet"
	"github.com/idface/idface/protocol"
)

// TestEntryNamingTwoHoldersDown (found by review): a deviating entry (p1)
// tells p2 "p3 is down" and p3 "p2 is down", and sends its own part late.
// Each helper's part follows its own plan; the decider must not complete
// the query without the entry's part (it did, and crashed on the missing
// part): the query is refused, and the decider answers the next one.
func TestEntryNamingTwoHoldersDown(t *testing.T) {
	c, xs, _ := tamperCluster(t, nil)
	setDown := func(down byte) func(p []byte) {
		return func(p []byte) {
			if len(p) > 6 && p[5] == byte(protocol.TBlindQuery) {
				p[len(p)-1] = down
			}
		}
	}
	c.net.SetFault("p1", "p2", memnet.Fault{Corrupt: setDown(3)}) // p3 down
	c.net.SetFault("p1", "p3", memnet.Fault{Corrupt: setDown(2)}) // p2 down
	c.net.SetFault("p1", c.p.DeciderName(), memnet.Fault{Delay: 500 * time.Millisecond})
	if got, err := c.client("device", "p1").Identify(ctx(t), xs[0], 3); err == nil {
		t.Fatalf("a query whose helpers were told different holders down: answered %+v", got)
	}
	time.Sleep(time.Second)
	// If we get here the decider survived; it must still answer.
	c.net.SetFault("p1", "p2", memnet.Fault{})
	c.net.SetFault("p1", "p3", memnet.Fault{})
	c.net.SetFault("p1", c.p.DeciderName(), memnet.Fault{})
	if _, err := c.client("device", "p2").Identify(ctx(t), xs[0], 3); err != nil {
		t.Fatalf("after the attack: %v", err)
	}
}
