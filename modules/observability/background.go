package observability

import (
	"context"
	"errors"
	"sync"
)

// background runs one goroutine between start and stop (the span writer, the retention
// purge). The goroutine's context outlives the caller's but ends at stop, which waits for it.
type background struct {
	mu     sync.Mutex
	cancel context.CancelFunc
	done   chan struct{}
}

// start runs run in a goroutine; it refuses a second start before stop.
func (b *background) start(ctx context.Context, run func(ctx context.Context)) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.cancel != nil {
		return errors.New("observability: already started")
	}
	ctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	done := make(chan struct{})
	b.cancel, b.done = cancel, done
	go func() {
		defer close(done)
		run(ctx)
	}()
	return nil
}

// stop cancels the goroutine and waits for it; a no-op when not started.
func (b *background) stop() {
	b.mu.Lock()
	cancel, done := b.cancel, b.done
	b.cancel, b.done = nil, nil
	b.mu.Unlock()
	if cancel != nil {
		cancel()
		<-done
	}
}
