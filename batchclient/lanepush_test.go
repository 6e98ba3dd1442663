package batchclient_test

import (
	"context"
	"net"
	"sync"
	"testing"
	"time"

	metrics "github.com/rcrowley/go-metrics"
	"github.com/smallnest/rpcx/protocol"
	"github.com/smallnest/rpcx/server"
	"github.com/stretchr/testify/require"

	"github.com/rpcxbatch/rpcxbatch/batchclient"
	"github.com/rpcxbatch/rpcxbatch/batchserver"
	"github.com/rpcxbatch/rpcxbatch/internal/testkit/testsvc"
)

// rememberer keeps the connection every call came on, to push on later.
type rememberer struct {
	mu    sync.Mutex
	conns map[net.Conn]bool
}

// Run remembers its call's connection after 20 ms.
func (r *rememberer) Run(ctx context.Context, a *RunArgs, rep *RunReply) error {
	time.Sleep(20 * time.Millisecond)
	c := ctx.Value(server.RemoteConnContextKey).(net.Conn)
	r.mu.Lock()
	r.conns[c] = true
	r.mu.Unlock()
	return nil
}

// A handler keeps the connection its call came in on to push to its
// client later (rpcx's bidirectional pattern): a client that listens for
// pushes keeps the lanes its load opened, so every push reaches it, as it
// would over the plain connection. (With lanes retired, 6 of 7 pushes
// failed.)
func TestPushListenerKeepsItsLanes(t *testing.T) {
	s := server.NewServer()
	_, err := batchserver.New(s, batchserver.WithPoolSize(4), batchserver.WithWindow(100))
	require.NoError(t, err)
	r := &rememberer{conns: map[net.Conn]bool{}}
	require.NoError(t, s.RegisterName("Run", r, ""))
	addr, stop, err := testsvc.Serve(s)
	require.NoError(t, err)
	t.Cleanup(testsvc.StopWhenIdle(s, stop))
	reg := metrics.NewRegistry()
	c := newClient(t, batchclient.WithLaneRange(1, 4), batchclient.WithLaneIdle(50*time.Millisecond),
		batchclient.WithMetrics(reg))
	ch := make(chan *protocol.Message, 100)
	c.RegisterServerMessageChan(addr, ch)
	waitConnected(t, c, addr)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	for range 250 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 10 {
				var rep RunReply
				if err := c.Call(ctx, addr, "Run", "Run", &RunArgs{}, &rep); err != nil {
					t.Errorf("call: %v", err)
					return
				}
			}
		}()
	}
	wg.Wait()
	time.Sleep(500 * time.Millisecond) // idle: the pool shrinks
	r.mu.Lock()
	defer r.mu.Unlock()
	failed := 0
	for conn := range r.conns {
		if err := s.SendMessage(conn, "Push", "x", nil, []byte("hi")); err != nil {
			failed++
		}
	}
	time.Sleep(100 * time.Millisecond)
	added := reg.Get("rpcxbatch.client.lanes.added").(metrics.Counter).Count()
	retired := reg.Get("rpcxbatch.client.lanes.retired").(metrics.Counter).Count()
	t.Logf("lanes added %d retired %d; conns remembered %d, pushes failed %d, delivered %d", added, retired, len(r.conns), failed, len(ch))
	require.Equal(t, len(r.conns), len(ch), "every push reaches the live client")
}
