package batchclient_test

import (
	"context"
	"maps"
	"runtime"
	"testing"
	"time"

	"github.com/smallnest/rpcx/share"
	"github.com/stretchr/testify/require"

	"github.com/rpcxbatch/rpcxbatch/internal/testkit/testsvc"
)

// A caller that shares its rpcx share.Context between goroutines guards
// the response-metadata map with the context's lock. Call takes that lock
// when it fills the map also when ctx is derived from the share.Context
// (a timeout added, a value): rpcx v1.9.4's Call takes it only when ctx is
// the share.Context itself, and writes unlocked otherwise, as the old
// code did; under the race detector that is a data race with the caller's
// locked reads.
func TestResponseMetadataLockedThroughDerivedContext(t *testing.T) {
	bc := newClient(t)
	for _, plain := range []bool{false, true} {
		addr := startMetaServer(t, plain)
		sc := share.NewContext(context.Background())
		res := map[string]string{}
		sc.SetValue(share.ResMetaDataKey, res)

		stop, readerDone := make(chan struct{}), make(chan struct{})
		go func() {
			defer close(readerDone)
			for {
				select {
				case <-stop:
					return
				default:
				}
				sc.Lock()
				_ = maps.Clone(res)
				sc.Unlock()
				runtime.Gosched()
			}
		}()
		for i := 0; i < 200; i++ {
			ctx, cancel := context.WithTimeout(sc, 5*time.Second)
			err := bc.Call(ctx, addr, "Meta", "Set", &MetaArgs{Set: map[string]string{"a": "1"}}, &testsvc.Reply{})
			cancel()
			require.NoError(t, err)
		}
		close(stop)
		<-readerDone
		require.Equal(t, map[string]string{"a": "1", share.ServerAddress: addr}, res, "plain server %v", plain)
	}
}
