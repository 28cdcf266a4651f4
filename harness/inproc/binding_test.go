package inproc_test

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/idface/idface/config"
	"github.com/idface/idface/harness/inproc"
	"github.com/idface/idface/internal/codec/store"
)

// TestRestoreOfAnotherMembersLogRefused is issue 17 item 1: at bfed9c1,
// copying p1's shares.log over p2's and restarting p2 was accepted (blind:
// 0 of 20 strangers accepted became 20 of 20; 2PC: 20 of 20 enrolled
// people became 0 of 20) because a log named neither its member nor its
// cluster. Now p2 refuses to start, saying what to do, and starts again
// with its own log, answering as before.
func TestRestoreOfAnotherMembersLogRefused(t *testing.T) {
	for _, mode := range []config.Mode{config.Mode2PC, config.ModeBlind} {
		t.Run(string(mode), func(t *testing.T) {
			tau := 0.25
			lit := inproc.Literal(config.Literal{Mode: mode, Dim: 64, Alpha: 24, Beta: 12, Tau: &tau,
				Timeout: config.Duration(10 * time.Second), MaxTopK: 100}, 2)
			c := inproc.Start(t, lit)
			ctx := inproc.Ctx(t, 30*time.Second)
			xs := inproc.Templates(20, 64, 5)
			if err := c.Client("client", "").Enroll(ctx, inproc.Items(xs, "a")); err != nil {
				t.Fatal(err)
			}
			own := filepath.Join(c.DataDir("p2"), "shares.log")
			mine, err := os.ReadFile(own)
			if err != nil {
				t.Fatal(err)
			}
			c.Stop("p2")
			p1log, err := os.ReadFile(filepath.Join(c.DataDir("p1"), "shares.log"))
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(own, p1log, 0o600); err != nil {
				t.Fatal(err)
			}
			err = c.TryRestart("p2")
			var be *store.BindingError
			if !errors.As(err, &be) || be.Got.Member != "p1" || be.Want.Member != "p2" {
				t.Fatalf("p2 started on p1's log: %v", err)
			}
			os.WriteFile(own, mine, 0o600)
			c.Restart("p2")
			for i, x := range xs {
				r, err := c.Client("client", "").Identify(ctx, x, 1)
				if err != nil {
					t.Fatal(err)
				}
				if len(r.Candidates) != 1 || r.Candidates[0].ID != inproc.Items(xs, "a")[i].ID {
					t.Fatalf("row %d answered %+v after the restore", i, r.Candidates)
				}
			}
		})
	}
}
