package main

import (
	"fmt"
	"io"
	"sync"
	"time"
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
