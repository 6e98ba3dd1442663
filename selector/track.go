package selector

import (
	"context"
	"sync"
)

type trackKey struct{}

// tried is the set of servers selected so far for one call.
type tried struct {
	mu   sync.Mutex // guards seen
	seen map[string]bool
}

// Track returns a context in which LocalFirst and RandomOrder remember the
// servers they have handed out, so that the retries of one call (rpcx's
// Failover and Failtry modes reuse the call's context) go to servers not
// yet tried, until every server has been tried once. Make a new tracked
// context per call; one shared by several calls spreads them over the
// servers instead.
func Track(ctx context.Context) context.Context {
	if _, ok := ctx.Value(trackKey{}).(*tried); ok {
		return ctx
	}
	return context.WithValue(ctx, trackKey{}, &tried{seen: make(map[string]bool)})
}

func trackerOf(ctx context.Context) *tried {
	if ctx == nil {
		return nil
	}
	t, _ := ctx.Value(trackKey{}).(*tried)
	return t
}

// pick returns the first of candidates that t has not handed out yet and
// marks it; when every candidate was handed out it starts over.
func (t *tried) pick(candidates []string) string {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, c := range candidates {
		if !t.seen[c] {
			t.seen[c] = true
			return c
		}
	}
	if len(candidates) == 0 {
		return ""
	}
	clear(t.seen)
	t.seen[candidates[0]] = true
	return candidates[0]
}
