package hemode

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"

	dto "github.com/prometheus/client_model/go"

	"github.com/idface/idface/engine"
	"github.com/idface/idface/heidface"
	"github.com/idface/idface/template"
)

// SetAfterReserve runs f at local server e once it has reserved an
// enrollment's slots, before it encrypts them (f may block to hold the
// enrollment there, holding no lock but changeMu), until the returned
// function is called. It wraps the server's encryptor, whose Delta is the
// first step after the reservation (addRows); set it while no identify
// runs, which copies the encryptor without a lock.
func SetAfterReserve(e engine.Engine, f func()) (restore func()) {
	l := e.(*Local)
	l.changeMu.Lock() // Delta runs under it
	defer l.changeMu.Unlock()
	inner := l.local
	l.local = heldEncryptor{Encryptor: inner, before: f}
	return func() {
		l.changeMu.Lock()
		defer l.changeMu.Unlock()
		l.local = inner
	}
}

// heldEncryptor runs before ahead of every Delta; its copies (identify's
// workers) are the inner encryptor's.
type heldEncryptor struct {
	heidface.Encryptor
	before func()
}

func (h heldEncryptor) Delta(slots []int, zs []template.Ternary) (heidface.EncGroup, error) {
	h.before()
	return h.Encryptor.Delta(slots, zs)
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

// CheckSumGroup sums group 0 for three jobs in one sumGroup: two over
// local server e's group 0 with different queries and one over another
// group (a job whose snapshot saw a different group, as after an
// enrollment between two identifies' snapshots); each must get exactly
// what IPDB gives it alone.
func CheckSumGroup(e engine.Engine) error {
	l := e.(*Local)
	r := rand.New(rand.NewPCG(11, 12))
	vec := func() []float32 {
		x := make([]float32, l.p.Dim())
		for i := range x {
			x[i] = float32(r.NormFloat64())
		}
		return x
	}
	l.mu.RLock()
	g0 := l.groups[0]
	l.mu.RUnlock()
	z, err := template.Transform(vec(), l.p.Alpha())
	if err != nil {
		return err
	}
	enc := l.local.Copy()
	other, err := enc.Delta([]int{0}, []template.Ternary{z})
	if err != nil {
		return err
	}
	y1, err1 := l.tr.Apply(vec())
	y2, err2 := l.tr.Apply(vec())
	if err := errors.Join(err1, err2); err != nil {
		return err
	}
	ctb := l.he.CiphertextBytes()
	jobs := []*sumJob{
		{ctx: context.Background(), y: y1, groups: []heidface.EncGroup{g0}},
		{ctx: context.Background(), y: y2, groups: []heidface.EncGroup{other}},
		{ctx: context.Background(), y: y2, groups: []heidface.EncGroup{g0}},
	}
	for _, j := range jobs {
		j.results = []chan sumOut{make(chan sumOut, 1)}
	}
	l.sumGroup(enc, jobs, 0, ctb)
	for i, j := range jobs {
		got := <-j.results[0]
		want := make([]byte, 2*ctb)
		if err := enc.IPDB(j.groups[0], j.y, want); err != nil {
			return err
		}
		if got.err != nil || !bytes.Equal(got.b, want) {
			return fmt.Errorf("job %d: %v, or its sums differ from IPDB's alone", i, got.err)
		}
	}
	return nil
}

// ShardQuery runs local shard e's query to its key server shard under
// qid, as its coordinator's ShardIdentify would: the ids and ranks the
// local shard receives.
func ShardQuery(ctx context.Context, e engine.Engine, topK int, probe []float32, qid [16]byte) ([]string, []uint16, error) {
	res, perr := e.(*Local).query(ctx, topK, probe, qid)
	if perr != nil {
		return nil, nil, perr
	}
	return res.ids, res.ranks, nil
}
