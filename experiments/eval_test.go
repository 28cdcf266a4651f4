package experiments

import (
	"fmt"
	"math"
	"slices"
	"testing"

	"github.com/idface/idface/template"
)

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

func TestSyntheticWith(t *testing.T) {
	a, _ := NewSynthetic(20, 3, 64, 0.5, 9)
	b, err := NewSyntheticWith(SyntheticOptions{People: 20, Samples: 3, Dim: 64, Intra: 0.5, Seed: 9})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.EqualFunc(a.Samples, b.Samples, slices.Equal) || !slices.Equal(a.Labels, b.Labels) {
		t.Fatal("Gamma = 0 differs from NewSynthetic")
	}
	for _, rotate := range []bool{false, true} {
		t.Run(fmt.Sprintf("gamma=0.5/rotate=%v", rotate), func(t *testing.T) {
			o := SyntheticOptions{People: 300, Samples: 2, Dim: 64, Intra: 0.6, Seed: 4, Gamma: 0.5, Rotate: rotate}
			s, err := NewSyntheticWith(o)
			if err != nil {
				t.Fatal(err)
			}
			again, _ := NewSyntheticWith(o)
			if !slices.EqualFunc(s.Samples, again.Samples, slices.Equal) {
				t.Fatal("not deterministic")
			}
			// Mean |x_j| over the first and the last eighth of coordinates.
			var head, tail, intra float64
			for i, x := range s.Samples {
				var n float64
				for j, v := range x {
					n += float64(v) * float64(v)
					switch {
					case j < 8:
						head += math.Abs(float64(v))
					case j >= 56:
						tail += math.Abs(float64(v))
					}
				}
				if math.Abs(n-1) > 1e-5 {
					t.Fatalf("sample %d has norm^2 %v", i, n)
				}
				if i%2 == 1 {
					for j := range x {
						intra += float64(x[j]) * float64(s.Samples[i-1][j])
					}
				}
			}
			ratio := head / tail
			if !rotate && ratio < 2 || rotate && (ratio < 0.8 || ratio > 1.25) {
				t.Fatalf("head/tail magnitude ratio %.2f", ratio)
			}
			if m := intra / 300; math.Abs(m-0.6) > 0.05 {
				t.Fatalf("mean intra-class cosine %.3f, want about 0.6", m)
			}
		})
	}
	for _, bad := range []SyntheticOptions{
		{People: 2, Samples: 2, Dim: 8, Intra: 0.5, Gamma: -1},
		{People: 2, Samples: 2, Dim: 1, Intra: 0.5, Gamma: 1},
		{People: 2, Samples: 2, Dim: 8, Intra: 2, Gamma: 1},
		{People: 0, Samples: 2, Dim: 8, Intra: 0.5, Gamma: 1},
	} {
		if _, err := NewSyntheticWith(bad); err == nil {
			t.Errorf("%+v accepted", bad)
		}
	}
}

func TestEvaluateLevels(t *testing.T) {
	s, err := NewSyntheticWith(SyntheticOptions{People: 150, Samples: 3, Dim: 128, Intra: 0.35, Seed: 5, Gamma: 0.5})
	if err != nil {
		t.Fatal(err)
	}
	tern, err := Evaluate(s.Samples, s.Labels, 85, []int{21}, 50000, 2)
	if err != nil {
		t.Fatal(err)
	}
	g4, _ := template.ParseLevels("4:8,16,24,37")
	lp := []LevelPair{
		{template.TernaryLevels(85), template.TernaryLevels(21)},
		{g4, template.TernaryLevels(21)},
	}
	rs, err := EvaluateLevels(s.Samples, s.Labels, lp, 50000, 2)
	if err != nil {
		t.Fatal(err)
	}
	if len(rs) != 2 || rs[0].Scores != "levels" || rs[0].GalleryLevels != "1:85" || rs[1].QueryLevels != "1:21" {
		t.Fatalf("%+v", rs)
	}
	// G = T_alpha, Q = T_beta is the ternary row, metric for metric.
	want := tern[1]
	want.Scores, want.Alpha, want.Beta, want.GalleryLevels, want.QueryLevels = "levels", 0, 0, "1:85", "1:21"
	if rs[0] != want {
		t.Fatalf("levels 1:85 x 1:21 = %+v\nternary (85,21) = %+v", rs[0], tern[1])
	}
	// A float gallery bounds every gallery transform from above (here).
	ceil, err := EvaluateLevels(s.Samples, s.Labels, []LevelPair{{Query: template.TernaryLevels(21)}}, 50000, 2)
	if err != nil || ceil[0].GalleryLevels != "float" || ceil[0].TAR1e3 < rs[1].TAR1e3 || rs[1].TAR1e3 < rs[0].TAR1e3 {
		t.Fatalf("float gallery %+v (%v); 4-level %v; ternary %v", ceil, err, rs[1].TAR1e3, rs[0].TAR1e3)
	}
	bad, _ := template.ParseLevels("2:100,100")
	if _, err := EvaluateLevels(s.Samples, s.Labels, []LevelPair{{bad, template.TernaryLevels(21)}}, 1000, 2); err == nil {
		t.Fatal("levels past d accepted")
	}
}
