package dataplane

import (
	"context"
	"io"
	"sync"
	"sync/atomic"
	"time"
)

// watchdog cancels an upstream exchange that stays silent longer than its limit. Silence,
// not total duration, is what is bounded: a stream may last as long as the model talks.
// Activity is recorded with an atomic store (cheap on every chunk); only the timer's own
// callback re-arms the timer.
type watchdog struct {
	limit  time.Duration
	start  time.Time
	last   atomic.Int64 // time.Since(start) at the last activity
	fired  atomic.Bool
	cancel context.CancelFunc

	mu      sync.Mutex
	timer   *time.Timer
	stopped bool
}

// startWatchdog derives a context from parent that is cancelled after limit of silence.
func startWatchdog(parent context.Context, limit time.Duration) (context.Context, *watchdog) {
	ctx, cancel := context.WithCancel(parent)
	w := &watchdog{limit: limit, start: time.Now(), cancel: cancel}
	w.mu.Lock()
	w.timer = time.AfterFunc(limit, w.check)
	w.mu.Unlock()
	return ctx, w
}

func (w *watchdog) check() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.stopped {
		return
	}
	idle := time.Since(w.start) - time.Duration(w.last.Load())
	if idle >= w.limit {
		w.fired.Store(true)
		w.cancel()
		return
	}
	w.timer.Reset(w.limit - idle)
}

// kick records activity.
func (w *watchdog) kick() { w.last.Store(int64(time.Since(w.start))) }

// timedOut reports whether the watchdog cancelled the exchange.
func (w *watchdog) timedOut() bool { return w.fired.Load() }

// stop ends the watchdog and cancels its context (the exchange is over).
func (w *watchdog) stop() {
	w.mu.Lock()
	w.stopped = true
	w.timer.Stop()
	w.mu.Unlock()
	w.cancel()
}

// activeReader kicks the watchdog whenever data flows.
type activeReader struct {
	r io.Reader
	w *watchdog
}

func (a activeReader) Read(p []byte) (int, error) {
	n, err := a.r.Read(p)
	if n > 0 {
		a.w.kick()
	}
	return n, err
}
