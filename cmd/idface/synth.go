package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/idface/idface/experiments"
	"github.com/idface/idface/internal/codec/npy"
)

func init() {
	register("synth", "write synthetic templates (.npy) and their ids", cmdSynth)
}

// synthResult is 'synth --json'.
type synthResult struct {
	Templates int    `json:"templates"`
	Dim       int    `json:"dim"`
	People    int    `json:"people"`
	Samples   int    `json:"samples"`
	Seed      uint64 `json:"seed"`
	Out       string `json:"out"`
	IDs       string `json:"ids"`
	Labels    string `json:"labels"`
}

func cmdSynth(args []string, stdout, stderr io.Writer) error {
	fs := newFlags("synth", "idface synth --people P [--samples S] [--dim 512] [--intra 0.5] [--seed N] --out X.npy [--ids ids.txt] [--labels labels.txt] [--sample K]\n\n"+
		"Draws P synthetic people with S samples each (float32 unit templates) and\n"+
		"writes them to X.npy, their ids (person-P/sample-S) to ids.txt and their\n"+
		"people (person-P, for idface calibrate and eval) to labels.txt. With\n"+
		"--sample K only sample K of every person is written (e.g. 0 to enroll, 1 to\n"+
		"query). Another --seed draws other people, and names them so: its ids\n"+
		"and labels start with seed-N/ (seed-3/person-P/sample-S), so that the ids\n"+
		"of two synthetic sets never collide; seed 1, the default, has none.\n\n"+
		"With --json one object on stdout: templates, dim, people, samples, seed,\n"+
		"out, ids, labels (the files written; \"\" for none).", stderr)
	people := fs.Int("people", 0, "number of people")
	samples := fs.Int("samples", 1, "samples per person")
	dim := fs.Int("dim", 512, "template dimension")
	intra := fs.Float64("intra", 0.5, "mean cosine between two samples of one person")
	seed := fs.Uint64("seed", 1, "seed: another draws other people, whose ids and labels start with seed-N/")
	out := fs.String("out", "", "output .npy")
	ids := fs.String("ids", "", "output id list")
	labels := fs.String("labels", "", "output label list (the person of each template)")
	only := fs.Int("sample", -1, "write only this sample index of every person")
	asJSON := fs.Bool("json", false, "print one JSON object")
	if err := parse(fs, args); err != nil {
		return err
	}
	if err := required(fs, "people", "out"); err != nil {
		return err
	}
	if *only >= *samples {
		return fmt.Errorf("--sample %d: there are only %d samples per person", *only, *samples)
	}
	s, err := experiments.NewSynthetic(*people, *samples, *dim, *intra, *seed)
	if err != nil {
		return err
	}
	// Another seed's person-0 is someone else: its ids say which seed, so
	// that enrolling two synthetic sets never refuses one as a duplicate
	// (the default keeps the README's person-7/sample-0).
	prefix := ""
	if *seed != 1 {
		prefix = fmt.Sprintf("seed-%d/", *seed)
	}
	m := &npy.Matrix{Cols: *dim}
	var names, persons strings.Builder
	for i, x := range s.Samples {
		k := i % *samples
		if *only >= 0 && k != *only {
			continue
		}
		m.F32 = append(m.F32, x...)
		m.Rows++
		fmt.Fprintf(&names, "%sperson-%d/sample-%d\n", prefix, s.Labels[i], k)
		fmt.Fprintf(&persons, "%sperson-%d\n", prefix, s.Labels[i])
	}
	if err := npy.WriteFile(*out, m); err != nil {
		return err
	}
	for _, f := range []struct {
		path string
		text *strings.Builder
	}{{*ids, &names}, {*labels, &persons}} {
		if f.path == "" {
			continue
		}
		if err := os.WriteFile(f.path, []byte(f.text.String()), 0o644); err != nil {
			return err
		}
	}
	if *asJSON {
		return json.NewEncoder(stdout).Encode(synthResult{Templates: m.Rows, Dim: *dim, People: *people, Samples: *samples, Seed: *seed,
			Out: *out, IDs: *ids, Labels: *labels})
	}
	fmt.Fprintf(stderr, "wrote %d templates of dimension %d to %s\n", m.Rows, *dim, *out)
	return nil
}
