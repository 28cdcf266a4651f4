package hemode

import (
	"slices"
	"testing"

	"github.com/idface/idface/config"
	"github.com/idface/idface/heidface"
)

// TestSchemesAreHeidface: config's declaration of mode he's schemes (data:
// names, slots, slot bits) gives heidface's column groups for every
// weight, so the enrollment cap the client reads from config
// (Params.MaxEnrollBatch) is the one the local servers hold to.
func TestSchemesAreHeidface(t *testing.T) {
	spec, err := config.Spec(config.ModeHE)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, s := range spec.Schemes {
		names = append(names, s.Name)
	}
	if !slices.Equal(names, heidface.Schemes()) {
		t.Fatalf("config declares schemes %v, heidface has %v", names, heidface.Schemes())
	}
	for _, s := range spec.Schemes {
		for _, w := range [][2]int{{1, 1}, {255, 63}, {512, 512}, {128, 16}, {300, 7}, {64, 255}} {
			hs, err := heidface.New(s.Name, 512, w[0], w[1])
			if err != nil {
				t.Fatal(err)
			}
			if got, want := s.GroupRows(w[0], w[1]), hs.GroupRows(); got != want {
				t.Errorf("scheme %s, alpha %d, beta %d: config says %d rows a group, heidface %d", s.Name, w[0], w[1], got, want)
			}
		}
	}
}
