package config_test

import (
	"testing"

	"github.com/idface/idface/config"
)

func TestSplitServer(t *testing.T) {
	for _, c := range []struct {
		name, member string
		shard        int
	}{
		{"p1", "p1", config.Coordinator}, {"p1#c", "p1", config.Coordinator}, {"p1#0", "p1", 0}, {"p1#12", "p1", 12},
		{"p1#-1", "p1", config.Coordinator}, {"p1#01", "p1", config.Coordinator}, {"p1#x", "p1", config.Coordinator},
	} {
		if m, s := config.SplitServer(c.name); m != c.member || s != c.shard {
			t.Errorf("SplitServer(%q) = %q, %d; want %q, %d", c.name, m, s, c.member, c.shard)
		}
	}
}
