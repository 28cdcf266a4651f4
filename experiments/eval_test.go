package experiments

import "testing"

func TestEvaluateSynthetic(t *testing.T) {
	s, err := NewSynthetic(200, 4, 128, 0.5, 3)
	if err != nil {
		t.Fatal(err)
	}
	rs, err := Evaluate(s.Samples, s.Labels, 85, []int{85, 40}, 100000, 1)
	if err != nil {
		t.Fatal(err)
	}
	if len(rs) != 3 || rs[0].Scores != "float" || rs[2].Beta != 40 {
		t.Fatalf("%+v", rs)
	}
	for _, r := range rs {
		if r.Accuracy < 0.95 || r.Rank1 < 0.9 || r.EER > 0.05 || r.TAR1e3 < r.TAR1e4 || r.TPIR1e2 < r.TPIR1e3 {
			t.Fatalf("implausible metrics for well-separated people: %+v", r)
		}
		if r.Genuine != 200*6 || r.Mated != 100*3 || r.NonMated != 100*4 || r.GallerySz != 100 {
			t.Fatalf("pair/probe counts: %+v", r)
		}
	}
	// Indistinguishable people: chance-level accuracy.
	s, _ = NewSynthetic(100, 3, 64, 0.0, 4)
	rs, _ = Evaluate(s.Samples, s.Labels, 42, nil, 20000, 1)
	if rs[0].Accuracy > 0.7 || rs[0].EER < 0.3 {
		t.Fatalf("random templates scored too well: %+v", rs[0])
	}
}
