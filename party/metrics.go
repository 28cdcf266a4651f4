package party

import (
	"fmt"
	"net/http"
	"net/http/pprof"
	"runtime"
	"sync/atomic"
	"time"
)

// metrics are the party's counters, served in the Prometheus text format
// on the debug address. They count requests and bytes, never anything
// about a template.
type metrics struct {
	identifies, identifyErrs atomic.Int64
	identifyNanos            atomic.Int64
	waitNanos, scoreNanos    atomic.Int64 // entry: waiting for helpers' blocks; own columns + scoring
	queriesServed            atomic.Int64
	enrolled, deleted        atomic.Int64
	txnAborts                atomic.Int64
	bytesOut, bytesIn        atomic.Int64
}

// DebugHandler serves /metrics and /debug/pprof/ for operators. Bind it to
// loopback: profiles show code paths, not data, but need no audience.
func (p *Party) DebugHandler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/metrics", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; version=0.0.4")
		p.st.mu.RLock()
		g := p.st.digest()
		pending := len(p.st.pending)
		p.st.mu.RUnlock()
		rows, live := 0, 0
		for _, s := range g {
			rows += int(s.Rows)
			live += int(s.Live)
		}
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		m := &p.m
		for _, l := range []struct {
			name string
			v    any
		}{
			{"idface_rows", rows}, {"idface_live_rows", live}, {"idface_undecided_txns", pending},
			{"idface_identify_total", m.identifies.Load()}, {"idface_identify_errors_total", m.identifyErrs.Load()},
			{"idface_identify_seconds_total", float64(m.identifyNanos.Load()) / 1e9},
			{"idface_identify_wait_seconds_total", float64(m.waitNanos.Load()) / 1e9},
			{"idface_identify_score_seconds_total", float64(m.scoreNanos.Load()) / 1e9},
			{"idface_queries_served_total", m.queriesServed.Load()},
			{"idface_enrolled_total", m.enrolled.Load()}, {"idface_deleted_total", m.deleted.Load()},
			{"idface_txn_aborts_total", m.txnAborts.Load()},
			{"idface_query_bytes_sent_total", m.bytesOut.Load()}, {"idface_query_bytes_received_total", m.bytesIn.Load()},
			{"idface_heap_live_bytes", ms.HeapAlloc}, {"idface_heap_sys_bytes", ms.HeapSys},
			{"idface_uptime_seconds", time.Since(p.started).Seconds()},
		} {
			fmt.Fprintf(w, "%s{party=%q} %v\n", l.name, p.name, l.v)
		}
	})
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	return mux
}
