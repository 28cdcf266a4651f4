package abis

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os/exec"
	"time"

	"github.com/idface/idface/internal/codec/npy"
	"github.com/idface/idface/internal/codec/strictjson"
)

// Extractor turns a face record (the BDB of a CBEFF face BIR, ISO/IEC
// 19794-5) into a template of the cluster's dimension. The face model is
// the operator's choice: CommandExtractor runs any program;
// FixtureExtractor reads fixture records for tests and the demo.
type Extractor interface {
	Extract(ctx context.Context, record []byte) ([]float32, error)
}

// ExitNoFace is the exit status by which an extractor command says the
// record holds no usable face (answered FailQuality).
const ExitNoFace = 3

// maxTemplateOut bounds what an extractor may write.
const maxTemplateOut = 4 << 20

// CommandExtractor runs Argv for each record: the record on its stdin,
// the template on its stdout as a JSON array of numbers or a .npy of one
// row; exit status ExitNoFace when the record has no usable face, any
// other non-zero status a failure (FailInternal). It is killed after
// Timeout (default 30 s).
type CommandExtractor struct {
	Argv    []string
	Timeout time.Duration
}

func (c *CommandExtractor) Extract(ctx context.Context, record []byte) ([]float32, error) {
	if len(c.Argv) == 0 {
		return nil, errors.New("abis: no extractor command")
	}
	to := c.Timeout
	if to <= 0 {
		to = 30 * time.Second
	}
	ctx, cancel := context.WithTimeout(ctx, to)
	defer cancel()
	cmd := exec.CommandContext(ctx, c.Argv[0], c.Argv[1:]...)
	cmd.Stdin = bytes.NewReader(record)
	out := &limitBuffer{max: maxTemplateOut}
	var stderr limitBuffer
	stderr.max = 4096
	cmd.Stdout, cmd.Stderr = out, &stderr
	err := cmd.Run()
	var ee *exec.ExitError
	if errors.As(err, &ee) && ee.ExitCode() == ExitNoFace {
		return nil, fail(FailQuality, "extractor: no usable face: %s", stderr.b.Bytes())
	}
	if err != nil {
		return nil, fmt.Errorf("abis: extractor %s: %v: %s", c.Argv[0], err, stderr.b.Bytes())
	}
	if out.over {
		return nil, fmt.Errorf("abis: extractor wrote more than %d bytes", maxTemplateOut)
	}
	return ParseTemplate(out.b.Bytes())
}

// ParseTemplate reads an extractor's output: a .npy of one row (or a
// 1-D array) or a JSON array of numbers.
func ParseTemplate(b []byte) ([]float32, error) {
	if bytes.HasPrefix(b, []byte("\x93NUMPY")) {
		m, err := npy.Read(bytes.NewReader(b))
		if err != nil {
			return nil, fmt.Errorf("abis: extractor output: %w", err)
		}
		if m.Rows != 1 {
			return nil, fmt.Errorf("abis: extractor output has %d rows, want 1", m.Rows)
		}
		return m.RowF32(0, nil), nil
	}
	x, err := strictjson.Array(bytes.TrimSpace(b), "template", nil)
	if err != nil {
		return nil, fmt.Errorf("abis: extractor output: %w", err)
	}
	return x, nil
}

// FixtureExtractor reads the template a fixture record carries
// (FixtureRecord): for tests and the demo, never for people's faces.
type FixtureExtractor struct{}

func (FixtureExtractor) Extract(_ context.Context, record []byte) ([]float32, error) {
	x, err := FixtureTemplate(record)
	if err != nil {
		return nil, fail(FailQuality, "%v", err)
	}
	return x, nil
}

type limitBuffer struct {
	b    bytes.Buffer
	max  int
	over bool
}

func (l *limitBuffer) Write(p []byte) (int, error) {
	if room := l.max - l.b.Len(); len(p) > room {
		l.over = true
		l.b.Write(p[:max(room, 0)])
		return len(p), nil
	}
	return l.b.Write(p)
}
