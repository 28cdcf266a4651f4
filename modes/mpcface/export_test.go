package mpcface

import (
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/idface/idface/config"
	"github.com/idface/idface/engine"
)

// BlockWords exposes the streamed block size to the package's external
// tests, which build queries by hand.
func BlockWords(p *config.Params) int { return blockWords(p, 2*p.Beta()) }

// Batched reads an entry's batch counters: batches run and the identifies
// in them.
func Batched(e engine.Engine) (batches, batched float64) {
	m := e.(*Engine).m
	return value(m.batches), value(m.batched)
}

func value(c prometheus.Counter) float64 {
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		return -1
	}
	return m.GetCounter().GetValue()
}
