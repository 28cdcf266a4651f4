package blind

import (
	"context"

	dto "github.com/prometheus/client_model/go"

	"github.com/idface/idface/engine"
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
		res, _ := h.passes.Do(context.Background(), &pass{q: q, started: func(View) { close(in); <-out }})
		if res.src != nil {
			h.bufs.Put(&res.src)
		}
	}()
	<-in
	return func() { close(out) }
}
