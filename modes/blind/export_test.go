package blind

import (
	"context"
	"errors"
	"fmt"
	"slices"

	dto "github.com/prometheus/client_model/go"

	"github.com/idface/idface/engine"
	"github.com/idface/idface/engine/blindbase"
	"github.com/idface/idface/protocol"
	"github.com/idface/idface/sharing/additive"
)

// Passes is a holder's passes over its shares and the queries scored in
// them; Hold stops its passes until the returned release is called.
func Passes(e engine.Engine) (passes, queries float64) {
	value := func(c interface{ Write(*dto.Metric) error }) float64 {
		var m dto.Metric
		_ = c.Write(&m)
		return m.GetCounter().GetValue()
	}
	switch h := e.(type) {
	case *Holder[uint8]:
		return value(h.m.passes), value(h.m.passed)
	case *Holder[uint16]:
		return value(h.m.passes), value(h.m.passed)
	}
	return 0, 0
}

func Hold(e engine.Engine) (release func()) {
	switch h := e.(type) {
	case *Holder[uint8]:
		return hold(h)
	case *Holder[uint16]:
		return hold(h)
	}
	return func() {}
}

// hold runs a pass that waits, inside, for release: the queries that
// arrive meanwhile gather for the next pass.
func hold[E additive.Elem](h *Holder[E]) func() {
	q, err := additive.NewQuery(h.p.Dim(), []int32{0}, []int8{1})
	if err != nil {
		panic(err)
	}
	in, out := make(chan struct{}), make(chan struct{})
	go func() {
		res, _ := h.passes.Do(context.Background(), &pass{ctx: context.Background(), q: q, started: func(blindbase.View) { close(in); <-out }})
		if res.src != nil {
			h.bufs.Put(&res.src)
		}
	}()
	<-in
	return func() { close(out) }
}

// HoldQueued queues a pass that, once it runs, waits for release (from a
// review): started is closed when it runs.
func HoldQueued(e engine.Engine) (started <-chan struct{}, release func()) {
	h := e.(*Holder[uint8])
	q, err := additive.NewQuery(h.p.Dim(), []int32{0}, []int8{1})
	if err != nil {
		panic(err)
	}
	in, out := make(chan struct{}), make(chan struct{})
	go h.passes.Do(context.Background(), &pass{ctx: context.Background(), q: q, started: func(blindbase.View) { close(in); <-out }})
	return in, func() { close(out) }
}

// CheckMergedPass runs one pass of four queries over holder e's rows: a
// plain one, a helper's whose entry digest does not match, one whose
// caller is gone, and another plain one; the two refused must be refused
// (CodeCountedDown: run again; CodeUnavailable) and the two others scored
// exactly as in passes of their own.
func CheckMergedPass(e engine.Engine) error {
	switch h := e.(type) {
	case *Holder[uint8]:
		return checkMergedPass(h)
	case *Holder[uint16]:
		return checkMergedPass(h)
	}
	return fmt.Errorf("not a holder: %T", e)
}

func checkMergedPass[E additive.Elem](h *Holder[E]) error {
	query := func(j int32) *additive.Query {
		q, err := additive.NewQuery(h.p.Dim(), []int32{j, j + 1, j + 5}, []int8{1, -1, 1})
		if err != nil {
			panic(err)
		}
		return q
	}
	gone, cancel := context.WithCancel(context.Background())
	cancel()
	bg := context.Background()
	ps := []*pass{
		{ctx: bg, q: query(0)},
		{ctx: bg, q: query(2), want: &entryDigest{entry: h.Peers()[0], digest: protocol.Digest{{Rows: 12345}}}},
		{ctx: gone, q: query(4)},
		{ctx: bg, q: query(7)},
	}
	merged := h.scorePass(bg, ps)
	for i, code := range map[int]protocol.Code{1: protocol.CodeCountedDown, 2: protocol.CodeUnavailable} {
		var pe *protocol.Error
		if !errors.As(merged[i].err, &pe) || pe.Code != code || merged[i].src != nil {
			return fmt.Errorf("query %d: %v, want a refusal with code %v", i, merged[i].err, code)
		}
	}
	for _, i := range []int{0, 3} {
		alone := h.scorePass(bg, ps[i:i+1])
		if merged[i].err != nil || alone[0].err != nil || len(alone[0].src) == 0 || !slices.Equal(merged[i].src, alone[0].src) {
			return fmt.Errorf("query %d: the merged pass's scores differ from its own pass's (%v, %v)", i, merged[i].err, alone[0].err)
		}
	}
	return nil
}
