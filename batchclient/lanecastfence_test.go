package batchclient_test

import (
	"cmp"
	"context"
	"encoding/binary"
	"sync"
	"testing"
	"time"

	metrics "github.com/rcrowley/go-metrics"

	"github.com/rpcxbatch/rpcxbatch/batchclient"
)

// slowSeqs checks, per key, that sends arrive in order and that two of a
// key's sends never run at once; each takes delay, half a millisecond if
// zero.
type slowSeqs struct {
	delay    time.Duration
	mu       sync.Mutex
	last     map[uint32]uint32
	running  map[uint32]int
	outOrder int
	overlap  int
}

func (k *slowSeqs) handle(_ context.Context, b []byte) {
	key, seq := binary.BigEndian.Uint32(b), binary.BigEndian.Uint32(b[4:])
	k.mu.Lock()
	if seq != k.last[key]+1 {
		k.outOrder++
	}
	k.last[key] = seq
	k.running[key]++
	if k.running[key] > 1 {
		k.overlap++
	}
	k.mu.Unlock()
	time.Sleep(cmp.Or(k.delay, 500*time.Microsecond))
	k.mu.Lock()
	k.running[key]--
	k.mu.Unlock()
}

// Keyed sends keep their order, and never two of a key's run at once,
// while unkeyed casts flow beside them and lanes come and go: a key moves
// only once its old lane's fence call is answered, after the sends before
// it ran. (Judged by credits, casts after the fence were counted in place
// of slow sends before it: 3-10 out of order, 2-8 run at once.)
func TestKeyedSendsKeepOrderBesideCasts(t *testing.T) {
	const (
		senders = 100
		casters = 100
		perKey  = 200
		cycles  = 4
	)
	addr, seqs := serveKeyedOrder(t, 4, 100, 0)

	reg := metrics.NewRegistry()
	c := newClient(t, batchclient.WithLaneRange(1, 4), batchclient.WithLaneIdle(20*time.Millisecond),
		batchclient.WithMetrics(reg))
	waitConnected(t, c, addr)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	load := keyedLoad{keys: senders, perKey: perKey, cycles: cycles, casters: casters, casts: 500, between: func() {
		time.Sleep(100 * time.Millisecond)
	}}
	requireKeyedOrder(t, seqs, load.run(t, ctx, c, addr), reg)
}
