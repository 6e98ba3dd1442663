package benchkit

import (
	"context"
	"sync"
	"time"
)

// Every runs f every d, on a goroutine of its own, until the returned
// stop is called; stop returns once that goroutine is gone and may be
// called more than once. The runs' progress lines use it.
func Every(d time.Duration, f func()) (stop func()) {
	quit := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		tick := time.NewTicker(d)
		defer tick.Stop()
		for {
			select {
			case <-quit:
				return
			case <-tick.C:
			}
			f()
		}
	})
	var once sync.Once
	return func() {
		once.Do(func() {
			close(quit)
			wg.Wait()
		})
	}
}

// Sleep waits d, or until ctx ends: how long a timed run lasts.
func Sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}
