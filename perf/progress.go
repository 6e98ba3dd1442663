package main

import (
	"context"
	"fmt"
	"time"

	"github.com/rpcxbatch/rpcxbatch/internal/benchkit"
)

// startProgress prints, once a second while a run lasts, how far it got:
// operations done by the writers against the point's total and, for casts
// and sends, how many the server has run. It returns the function that
// stops it; the goroutine is gone when that returns.
func startProgress(env *runEnv, pt Point, path string, done *doneCounter) (stop func()) {
	if !env.cfg.Progress {
		return func() {}
	}
	total := int64(pt.Writers * pt.Messages)
	t0 := time.Now()
	return benchkit.Every(time.Second, func() {
		line := fmt.Sprintf("  %s %s %s w=%d pace=%dms %4.0fs: %d/%d done",
			pt.Op, path, pt.Payload, pt.Writers, pt.PaceMS, time.Since(t0).Seconds(), done.sum(), total)
		if !replied(pt.Op) {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			if n, err := env.ctl.count(ctx); err == nil {
				line += fmt.Sprintf(", %d run on the server", n)
			}
			cancel()
		}
		fmt.Fprintln(env.progress, line)
	})
}
