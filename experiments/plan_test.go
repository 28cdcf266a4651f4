package experiments

import (
	"math"
	"strings"
	"testing"
)

// TestPlanFrom: the model scales a run linearly in rows: ten times the
// rows, ten times the cores, memory and network and the latency per
// machine; a party gets the machines its memory or its cores need,
// whichever is more; a run without a saturated rate or without its host
// is refused, saying how to measure.
func TestPlanFrom(t *testing.T) {
	run := BenchResult{Mode: "blind", IDs: 1_000_000, Clients: 8, IdentifyPerS: 40, IdentifyP50: 30,
		RSSMBPerParty: 1200, BytesPerIdent: 2e6, Servers: 3, HostCores: 2}
	small, err := PlanFrom(run, PlanTarget{Rows: 1_000_000, QPS: 40, MachineCores: 32, MachineGB: 256})
	if err != nil {
		t.Fatal(err)
	}
	// 2 cores / 40 per s = 50 core-ms an identify; at 40/s, 2 cores over 3 servers.
	if math.Abs(small.CoresPerServer-2.0/3) > 1e-9 || small.MemGBPerParty != 1.2 || small.MachinesPerParty != 1 || small.IdentifyMsP50 != 30 {
		t.Fatalf("at the run's size: %+v", small)
	}
	if want := 2 * 2e6 * 40 * 8 / 1e9 / 3; math.Abs(small.NetGbitPerServe-want) > 1e-9 {
		t.Fatalf("network %v, want %v", small.NetGbitPerServe, want)
	}
	big, err := PlanFrom(run, PlanTarget{Rows: 1_000_000_000, QPS: 40, MachineCores: 32, MachineGB: 256})
	if err != nil {
		t.Fatal(err)
	}
	// 1,200 GB: 5 machines of 256 GB; 667 cores per server: 21 machines
	// of 32 (the network is no limit here).
	if math.Abs(big.CoresPerServer-1000*small.CoresPerServer) > 1e-6 || big.MemGBPerParty != 1200 || big.MachinesPerParty != 21 {
		t.Fatalf("at 10^9 rows: %+v", big)
	}
	if math.Abs(big.IdentifyMsP50-30*1000/21.0) > 1e-9 {
		t.Fatalf("latency model %v", big.IdentifyMsP50)
	}
	// 2 * 2e9 bytes * 40/s * 8 / 3 = 427 Gbit/s per server: 18 machines of
	// 25 Gbit/s, fewer than the cores need; of 10 Gbit/s, 43.
	for gbit, want := range map[float64]int{25: 21, 10: 43} {
		p, err := PlanFrom(run, PlanTarget{Rows: 1_000_000_000, QPS: 40, MachineCores: 32, MachineGB: 256, MachineGbit: gbit})
		if err != nil || p.MachinesPerParty != want {
			t.Fatalf("network %g Gbit/s: %d machines, want %d (%v)", gbit, p.MachinesPerParty, want, err)
		}
	}
	for name, b := range map[string]BenchResult{
		"no clients": func() BenchResult { b := run; b.Clients, b.IdentifyPerS = 1, 0; return b }(),
		"no host":    func() BenchResult { b := run; b.HostCores = 0; return b }(),
	} {
		if _, err := PlanFrom(b, PlanTarget{Rows: 1, QPS: 1, MachineCores: 1, MachineGB: 1}); err == nil || !strings.Contains(err.Error(), "idface bench") {
			t.Errorf("%s: %v", name, err)
		}
	}
}
