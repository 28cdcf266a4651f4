package experiments

import (
	"errors"
	"fmt"
	"math"
)

// Capacity planning (idface plan; issue 21 item 4). A linear model from
// one measured run (BenchResult of idface bench --clients C --json), not a
// measurement: each identify's work and bytes grow with the rows scanned
// (every mode scans every row), a server's memory with the rows it holds,
// and the CPU an identify costs is what the run's servers used at their
// saturated rate: Cores / IdentifyPerS core-seconds, all servers of the
// cluster together. A party that needs more than one machine runs that
// many shards (cluster init --shards S, in every mode), each holding and
// scanning about 1/S of the rows; the model leaves out what sharding
// adds (the coordinators, and in blind, replicated and HE mode the
// helper's merge: docs/RESULTS.md, "Shards").

// PlanTarget is what a deployment must carry and the machines it has.
type PlanTarget struct {
	Rows         int     // enrolled identities
	QPS          float64 // identifications a second, sustained
	MachineCores int     // cores of one machine
	MachineGB    float64 // memory of one machine, GB
	MachineGbit  float64 // network of one machine, Gbit/s (0: not a limit)
}

// Plan is the model's answer for one target.
type Plan struct {
	Rows int     `json:"rows"`
	QPS  float64 `json:"qps"`
	// Per server of the cluster (every party and the mode's helper
	// server): cores busy at QPS, resident memory, network both ways.
	CoresPerServer  float64 `json:"cores_per_server"`
	MemGBPerParty   float64 `json:"mem_gb_per_party"`
	NetGbitPerServe float64 `json:"net_gbit_per_server"`
	// Machines per party (shards): enough memory for its rows, cores for
	// its share of the work and network for its share of the bytes.
	MachinesPerParty int `json:"machines_per_party"`
	// IdentifyMsP50 is the measured p50 scaled to the rows one machine
	// scans (Rows / MachinesPerParty), were the shards to scan in
	// parallel as the measured run did; the shards' merge is not in it.
	IdentifyMsP50 float64 `json:"identify_ms_p50_model"`
	// Basis names the run the model scaled.
	Basis string `json:"basis"`
}

// PlanFrom scales the measured run b to the target t.
func PlanFrom(b BenchResult, t PlanTarget) (Plan, error) {
	servers, cores := b.Servers, b.HostCores
	switch {
	case b.IDs <= 0 || b.IdentifyPerS <= 0 || b.Clients < 2:
		return Plan{}, errors.New("the run has no saturated rate: measure with idface bench --clients 8 (or more) --json")
	case b.RSSMBPerParty <= 0 || b.BytesPerIdent <= 0 || b.IdentifyP50 <= 0:
		return Plan{}, errors.New("the run lacks memory, bytes or latency figures: measure with idface bench --json")
	case servers < 1 || cores < 1:
		return Plan{}, fmt.Errorf("the run does not say its servers (%d) or its machine's cores (%d): measure with this build's idface bench --json", servers, cores)
	case b.Shards > 1:
		// The model shares a run's CPU evenly over its servers; a sharded
		// run's coordinators and shards do not share it so.
		return Plan{}, fmt.Errorf("the run is of a sharded cluster (%d shards): plan from an unsharded run (the plan says how many shards to run)", b.Shards)
	case t.Rows < 1 || t.QPS <= 0 || t.MachineCores < 1 || t.MachineGB <= 0:
		return Plan{}, fmt.Errorf("a target of %d rows at %g identifications a second on machines of %d cores and %g GB", t.Rows, t.QPS, t.MachineCores, t.MachineGB)
	}
	f := float64(t.Rows) / float64(b.IDs)
	mode := b.Mode
	if b.HideProbes {
		mode += " (hidden probes)"
	}
	coreS := float64(cores) / b.IdentifyPerS * f // one identify, every server
	p := Plan{Rows: t.Rows, QPS: t.QPS,
		CoresPerServer:  coreS * t.QPS / float64(servers),
		MemGBPerParty:   b.RSSMBPerParty * f / 1e3,
		NetGbitPerServe: 2 * b.BytesPerIdent * f * t.QPS * 8 / 1e9 / float64(servers),
		Basis: fmt.Sprintf("%s, %d rows, %d clients: %.1f identifications/s on %d cores, %.0f MB per party, %.2f MB per identify",
			mode, b.IDs, b.Clients, b.IdentifyPerS, cores, b.RSSMBPerParty, b.BytesPerIdent/1e6)}
	p.MachinesPerParty = max(1, int(math.Ceil(p.MemGBPerParty/t.MachineGB)), int(math.Ceil(p.CoresPerServer/float64(t.MachineCores))))
	if t.MachineGbit > 0 {
		p.MachinesPerParty = max(p.MachinesPerParty, int(math.Ceil(p.NetGbitPerServe/t.MachineGbit)))
	}
	p.IdentifyMsP50 = b.IdentifyP50 * f / float64(p.MachinesPerParty)
	return p, nil
}
