package hemode

import (
	"context"
	"runtime"

	dto "github.com/prometheus/client_model/go"

	"github.com/idface/idface/engine"
	"github.com/idface/idface/heidface"
)

// SetAfterReserve runs f at local server e once it has reserved an
// enrollment's slots, before it encrypts them (f may block to hold the
// enrollment there), until the returned function is called.
func SetAfterReserve(e engine.Engine, f func()) (restore func()) {
	l := e.(*Local)
	l.afterReserve.Store(&f)
	return func() { l.afterReserve.Store(nil) }
}

// Passes is a local server's passes over its groups and the identifies
// summed in them.
func Passes(e engine.Engine) (passes, identifies float64) {
	l := e.(*Local)
	value := func(c interface{ Write(*dto.Metric) error }) float64 {
		var m dto.Metric
		_ = c.Write(&m)
		return m.GetCounter().GetValue()
	}
	return value(l.m.passes), value(l.m.passed)
}

// Hold stops local server e's passes until the returned release is
// called: it runs a pass of a job whose groups' answers nobody reads yet,
// so every worker waits to hand one over, and the identifies that arrive
// meanwhile gather for the next pass.
func Hold(e engine.Engine) (release func()) {
	l := e.(*Local)
	n := runtime.GOMAXPROCS(0) + 1 // a group more than the workers
	job := &sumJob{ctx: context.Background(), groups: make([]heidface.EncGroup, n), results: make([]chan sumOut, n)}
	for i := range job.results {
		job.results[i] = make(chan sumOut) // unbuffered: a worker waits until it is read
	}
	go l.passes.Do(context.Background(), job)
	<-job.results[0] // the pass runs; its first worker takes the last group and waits again
	return func() {
		for _, c := range job.results[1:] {
			<-c
		}
	}
}
