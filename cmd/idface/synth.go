package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/idface/idface/experiments"
	"github.com/idface/idface/internal/codec/npy"
	"github.com/idface/idface/internal/codec/store"
)

func init() {
	register("synth", "write synthetic templates (.npy, JSON lines or CSV) and their ids", cmdSynth)
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
	fs := newFlags("synth", "idface synth --people P [--samples S] [--dim 512] [--intra 0.5] [--seed N] --out X.npy|X.jsonl|X.csv [--ids ids.txt] [--labels labels.txt] [--sample K]\n\n"+
		"Draws P synthetic people with S samples each (float32 unit templates) and\n"+
		"writes them to X, their ids (person-P/sample-S) to ids.txt and their\n"+
		"people (person-P, for idface calibrate and eval) to labels.txt. With\n"+
		"--sample K only sample K of every person is written (e.g. 0 to enroll, 1 to\n"+
		"query). Another --seed draws other people, and names them so: its ids\n"+
		"and labels start with seed-N/ (seed-3/person-P/sample-S), so that the ids\n"+
		"of two synthetic sets never collide; seed 1, the default, has none.\n\n"+
		"The format is --out's extension (or --format, which must agree with it):\n"+
		".npy (float32); .jsonl or .ndjson, one JSON object per line: with --ids\n"+
		"{\"id\": ..., \"template\": [...]}, what 'idface enroll --templates X.jsonl'\n"+
		"(no --ids) and the gateway's POST /v1/enroll take, else {\"template\":\n"+
		"[...]}, what identify and POST /v1/identify take; .csv, one template a\n"+
		"line (no ids). Any other extension is refused.\n\n"+
		"With --json one object on stdout: templates, dim, people, samples, seed,\n"+
		"out, ids, labels (the files written; \"\" for none).", stderr)
	people := fs.Int("people", 0, "number of people")
	samples := fs.Int("samples", 1, "samples per person")
	dim := fs.Int("dim", 512, "template dimension")
	intra := fs.Float64("intra", 0.5, "mean cosine between two samples of one person")
	seed := fs.Uint64("seed", 1, "seed: another draws other people, whose ids and labels start with seed-N/")
	out := fs.String("out", "", "output file: .npy, .jsonl (.ndjson) or .csv")
	format := fs.String("format", "", "npy, jsonl or csv (default: --out's extension, which must agree)")
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
	f, err := synthFormat(*out, *format)
	if err != nil {
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
	var idList []string
	for i, x := range s.Samples {
		k := i % *samples
		if *only >= 0 && k != *only {
			continue
		}
		m.F32 = append(m.F32, x...)
		m.Rows++
		id := fmt.Sprintf("%sperson-%d/sample-%d", prefix, s.Labels[i], k)
		idList = append(idList, id)
		fmt.Fprintln(&names, id)
		fmt.Fprintf(&persons, "%sperson-%d\n", prefix, s.Labels[i])
	}
	if *ids == "" {
		idList = nil // the objects carry ids only when the ids file is written too
	}
	if err := writeSynth(*out, f, m, idList); err != nil {
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

// synthFormat is the format synth writes to out: format, which must
// agree with out's extension, or the extension's.
func synthFormat(out, format string) (string, error) {
	ext := ""
	switch strings.ToLower(filepath.Ext(out)) {
	case ".npy":
		ext = "npy"
	case ".jsonl", ".ndjson":
		ext = "jsonl"
	case ".csv":
		ext = "csv"
	}
	switch {
	case format != "" && format != "npy" && format != "jsonl" && format != "csv":
		return "", fmt.Errorf("--format %s: synth writes npy, jsonl or csv", format)
	case ext == "":
		return "", fmt.Errorf("--out %s: synth writes .npy, .jsonl (.ndjson) or .csv files, named so, as enroll and identify tell the format by the name", out)
	case format != "" && format != ext:
		return "", fmt.Errorf("--out %s with --format %s: the extension says %s; name the file .%s", out, format, ext, format)
	}
	return ext, nil
}

// writeSynth writes m to path in format: npy, csv, or JSON lines whose
// objects carry ids when ids is not nil.
func writeSynth(path, format string, m *npy.Matrix, ids []string) error {
	if format == "npy" {
		return npy.WriteFile(path, m)
	}
	return store.WriteFileFunc(path, 0o644, func(f *os.File) error {
		w := bufio.NewWriterSize(f, 1<<20)
		var b []byte
		for i := range m.Rows {
			b = b[:0]
			if format == "jsonl" {
				if ids != nil {
					id, _ := json.Marshal(ids[i])
					b = append(append(append(b, `{"id":`...), id...), ',')
				} else {
					b = append(b, '{')
				}
				b = append(b, `"template":[`...)
			}
			for k, v := range m.F32[i*m.Cols : (i+1)*m.Cols] {
				if k > 0 {
					b = append(b, ',')
				}
				b = strconv.AppendFloat(b, float64(v), 'g', -1, 32) // the shortest that reads back as v
			}
			if format == "jsonl" {
				b = append(b, "]}"...)
			}
			if _, err := w.Write(append(b, '\n')); err != nil {
				return err
			}
		}
		return w.Flush()
	})
}
