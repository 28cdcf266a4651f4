package replicated

// Pending is the number of queries the decider holds parts of.
func (d *Decider) Pending() int { return d.queries.Len() }

// PairLabel is the refusal counter's label of the pair of holders a, b.
var PairLabel = pairLabel
