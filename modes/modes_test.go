package modes_test

import (
	"bytes"
	"log/slog"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/idface/idface/config"
	"github.com/idface/idface/engine"
	"github.com/idface/idface/internal/inproc"
	_ "github.com/idface/idface/modes"
)

// TestEveryModeConforms runs the same life of a cluster in every
// registered mode, in process over memnet with the real engines and logs:
// enroll, identify a genuine and a stranger's probe, delete, restart every
// server from its log, identify again, and fsck every stopped server. A
// mode added to the registry gets this test without writing it.
func TestEveryModeConforms(t *testing.T) {
	if len(config.Modes()) < 4 {
		t.Fatalf("registered modes %v: want at least 2pc, mpc, he and blind", config.Modes())
	}
	for _, m := range config.Modes() {
		t.Run(string(m), func(t *testing.T) {
			spec, err := config.Spec(m)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := engine.LookupMode(m); err != nil {
				t.Fatal(err)
			}
			const dim = 64
			tau := 0.5 // a random probe passes no row; an enrolled template passes its own
			c := inproc.Start(t, inproc.Literal(config.Literal{Mode: m, Dim: dim, Beta: 16, Tau: &tau,
				Timeout: config.Duration(15 * time.Second)}, spec.DefaultParties))
			ctx := inproc.Ctx(t, 2*time.Minute)
			xs := inproc.Templates(12, dim, 7)
			cl := c.Client("client", "")
			if err := cl.Enroll(ctx, inproc.Items(xs, "person")); err != nil {
				t.Fatal(err)
			}
			identify := func(x []float32, want string) {
				t.Helper()
				r, err := c.Client("device", "").Identify(ctx, x, 1)
				if err != nil {
					t.Fatal(err)
				}
				got := ""
				if r.Accepted && len(r.Candidates) > 0 {
					got = r.Candidates[0].ID
				}
				if got != want {
					t.Fatalf("identify: got %q (accepted %v), want %q", got, r.Accepted, want)
				}
			}
			identify(xs[3], "person-3")
			identify(inproc.Templates(1, dim, 99)[0], "")
			if err := cl.Delete(ctx, "person-3"); err != nil {
				t.Fatal(err)
			}
			identify(xs[3], "")
			c.WaitSettled()
			c.StopAll()
			for _, s := range c.P.Servers() { // helpers first: local servers fetch the key server's key
				if err := c.TryRestart(s.Name); err != nil {
					t.Fatal(err)
				}
			}
			c.WaitSettled()
			identify(xs[5], "person-5")
			identify(xs[3], "")
			c.StopAll()
			for _, s := range c.P.Servers() {
				srv, err := engine.ServerOf(c.P, s.Name)
				if err != nil {
					t.Fatal(err)
				}
				if srv.Role == "" || srv.Open == nil {
					t.Fatalf("%s: role %q, open %v", s.Name, srv.Role, srv.Open != nil)
				}
				if srv.Fsck == nil {
					continue
				}
				env := engine.Env{Params: c.P, Self: s.Name, Log: slog.New(slog.DiscardHandler), Metrics: prometheus.NewRegistry(), Fatal: func(error) {}}
				var out bytes.Buffer
				problems, err := srv.Fsck(env, c.DataDir(s.Name), engine.FsckOptions{}, &out)
				if err != nil || len(problems) > 0 {
					t.Fatalf("fsck of %s (%s): %v %v\n%s", s.Name, srv.Role, err, problems, out.String())
				}
			}
		})
	}
}

// TestUnknownModeRefusedEverywhere: a mode that is not registered is an
// error in configuration and in every lookup, never a fallback to another
// mode's engine.
func TestUnknownModeRefusedEverywhere(t *testing.T) {
	lit := inproc.Literal(config.Literal{Mode: "quantum"}, 2)
	if _, err := config.New(lit, t.TempDir()); err == nil {
		t.Fatal("config accepted mode quantum")
	} else if want := "want one of"; !bytes.Contains([]byte(err.Error()), []byte(want)) {
		t.Fatalf("config: %v, want it to list the modes", err)
	}
	if _, err := config.ParseMode("quantum"); err == nil {
		t.Fatal("ParseMode accepted quantum")
	}
	if _, err := engine.LookupMode("quantum"); err == nil {
		t.Fatal("LookupMode found quantum")
	}
}

// TestRegistrationsAreComplete: every registered mode declares what the
// programs look up, and its summary and trust line for help and status.
func TestRegistrationsAreComplete(t *testing.T) {
	for _, m := range config.Modes() {
		s, _ := config.Spec(m)
		md, err := engine.LookupMode(m)
		if err != nil {
			t.Fatal(err)
		}
		if s.Summary == "" || s.Trust == "" || md.Server == nil || md.IdentifyFormula == nil || md.Storage == nil {
			t.Errorf("mode %s: an incomplete registration", m)
		}
	}
}
