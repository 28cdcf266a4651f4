package config

// Limits bound what any one peer can make a server hold. Over a limit the
// peer gets a clear error and every other peer is still served.
type Limits struct {
	// StreamsPerPeer is how many requests one peer may have in progress.
	StreamsPerPeer int
	// Streams is how many requests the server has in progress in all.
	Streams int
	// ConnsPerPeer caps one certificate's open connections.
	ConnsPerPeer int
}

// Limits returns the concurrency limits.
func (p *Params) Limits() Limits {
	return Limits{StreamsPerPeer: 64, Streams: 512, ConnsPerPeer: 8}
}
