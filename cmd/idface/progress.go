package main

import (
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"github.com/schollz/progressbar/v3"
)

// stages reports on w, every so often, which of n stages of a long
// computation runs and how long it has taken: calibrate scores every
// probe against the gallery once per transform, a minute or more on
// 10,000 templates, and said nothing meanwhile.
type stages struct {
	mu    sync.Mutex
	w     io.Writer
	what  string
	n, i  int    // stages, and the one running (from 1)
	name  string // the running stage's
	start time.Time
	began time.Time // the running stage's start
	stop  func()
}

// startStages starts reporting n stages of what every interval (0:
// never); call next as each stage starts and done at the end.
func startStages(w io.Writer, what string, n int, every time.Duration) *stages {
	s := &stages{w: w, what: what, n: n, start: time.Now(), stop: func() {}}
	if every <= 0 {
		return s
	}
	t := time.NewTicker(every)
	quit := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			select {
			case <-t.C:
				s.report()
			case <-quit:
				return
			}
		}
	})
	var once sync.Once
	s.stop = func() {
		once.Do(func() {
			t.Stop()
			close(quit)
			wg.Wait()
		})
	}
	return s
}

// next marks the start of the next stage, name saying what it does.
func (s *stages) next(name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.i++
	s.name, s.began = name, time.Now()
}

// done stops the reports.
func (s *stages) done() { s.stop() }

func (s *stages) report() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.i == 0 {
		return
	}
	// No estimate of what is left: stages differ (a denser query
	// transform scores slower).
	fmt.Fprintf(s.w, "%s %d of %d (%s): %s on it, %s in all\n", s.what, s.i, s.n, s.name,
		time.Since(s.began).Round(time.Second), time.Since(s.start).Round(time.Second))
}

// bar is a bulk command's progress on stderr: on a terminal a bar
// redrawn in place (\r frames); elsewhere (a log file, a pipe) a plain
// line at most every lineEvery, so that a redirected log holds no \r
// frames. done ends it (a bar's line too); calling it again does nothing.
type bar interface {
	Set(n int)
	done(ok bool)
}

// lineEvery is how often a bar off a terminal writes a line.
const lineEvery = 10 * time.Second

// newBar is a progress bar of n items on w, what saying what is done to
// them ("enrolling").
func newBar(n int, what string, w io.Writer) bar {
	if !isTerminal(w) {
		return &lineBar{w: w, what: what, n: n, last: time.Now()}
	}
	return &ttyBar{w: w, pb: progressbar.NewOptions(n, progressbar.OptionSetWriter(w), progressbar.OptionSetDescription(what),
		progressbar.OptionShowCount(), progressbar.OptionThrottle(200*time.Millisecond))}
}

// isTerminal reports whether w is a terminal (a character device).
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

type ttyBar struct {
	w     io.Writer
	pb    *progressbar.ProgressBar
	ended bool
}

func (b *ttyBar) Set(n int) { b.pb.Set(n) }

func (b *ttyBar) done(ok bool) {
	if b.ended {
		return
	}
	b.ended = true
	if ok {
		b.pb.Finish()
	} else {
		b.pb.Exit()
	}
	fmt.Fprintln(b.w)
}

type lineBar struct {
	mu   sync.Mutex // Set may come from the shards' goroutines
	w    io.Writer
	what string
	n    int
	last time.Time
}

func (b *lineBar) Set(n int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if time.Since(b.last) < lineEvery {
		return
	}
	b.last = time.Now()
	fmt.Fprintf(b.w, "%s: %d of %d (%d%%)\n", b.what, n, b.n, 100*n/max(b.n, 1))
}

func (b *lineBar) done(bool) {}
