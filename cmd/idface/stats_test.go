package main

import (
	"bytes"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/idface/idface/config"
	"github.com/idface/idface/engine"
	"github.com/idface/idface/harness/members"
)

// TestStatsCommand: 'idface stats --url' reads the window a server's
// /metrics shows (engine.ScoreStats), and says when none is complete.
func TestStatsCommand(t *testing.T) {
	tau := 0.25
	decider := members.Member(t, "decider", "m", "")
	p, err := config.New(config.Literal{Mode: config.ModeBlind, Dim: 64, Tau: &tau, StatsWindow: config.MinStatsWindow,
		Parties:   []config.Member{members.Member(t, "p1", "m", ""), members.Member(t, "p2", "m", "")},
		Decider:   &decider,
		Clients:   []config.Member{members.Member(t, "op", "", config.RoleOperator)},
		ClusterID: "00112233445566778899aabbccddeeff"}, "")
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	st := engine.NewScoreStats(p, reg)
	srv := httptest.NewServer(promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	defer srv.Close()
	run := func() string {
		t.Helper()
		var out, errb bytes.Buffer
		if err := cmdStats([]string{"--url", srv.URL + "/metrics"}, &out, &errb); err != nil {
			t.Fatalf("%v: %s", err, errb.String())
		}
		return out.String()
	}
	if out := run(); !strings.Contains(out, "no complete window yet") {
		t.Fatalf("before a window: %s", out)
	}
	for i := range config.MinStatsWindow + 7 {
		st.Observe(i % 30)
	}
	out := run()
	if !strings.Contains(out, "last complete window of 100 queries (1 windows so far)") || strings.Count(out, "best score") != engine.StatsBuckets {
		t.Fatalf("after a window:\n%s", out)
	}
	ws, err := fetchStats(srv.URL + "/metrics")
	if err != nil || ws.Queries != config.MinStatsWindow || ws.Buckets[len(ws.Buckets)-1].Below != "+Inf" {
		t.Fatalf("%+v, %v", ws, err)
	}
	if _, err := parseStats(strings.NewReader("idface_best_score_windows_total x\n")); err == nil {
		t.Fatal("a malformed page was read")
	}
	if _, err := parseStats(strings.NewReader("go_goroutines 7\n")); err == nil || !strings.Contains(err.Error(), "no score statistics") {
		t.Fatalf("a page without statistics: %v", err)
	}
}
