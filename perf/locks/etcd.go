package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
)

// Design 1 over etcd's concurrency.Mutex: the same transaction (one
// exclusive, cluster-wide lock on a key drawn from the pool, then its
// release), with a lock service that is one etcd. Each client has its own
// session (lease), as concurrency.Mutex requires for mutual exclusion;
// the clients of a node share one etcd client (one gRPC connection), as a
// service would.

type etcdClients struct {
	sp       Spec
	cli      *clientv3.Client
	sessions []*concurrency.Session
}

func newEtcdClients(ctx context.Context, sp Spec) (*etcdClients, error) {
	if sp.Design != 1 {
		return nil, fmt.Errorf("etcd runs design 1 only, not %d", sp.Design)
	}
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{sp.Etcd}, DialTimeout: 5 * time.Second})
	if err != nil {
		return nil, fmt.Errorf("etcd client: %w", err)
	}
	ec := &etcdClients{sp: sp, cli: cli, sessions: make([]*concurrency.Session, sp.Clients)}
	for i := range ec.sessions {
		s, err := concurrency.NewSession(cli, concurrency.WithTTL(60), concurrency.WithContext(ctx))
		if err != nil {
			ec.close()
			return nil, fmt.Errorf("etcd session %d: %w", i, err)
		}
		ec.sessions[i] = s
	}
	return ec, nil
}

func (ec *etcdClients) close() {
	for _, s := range ec.sessions {
		if s != nil {
			s.Orphan() // the lease expires by itself; revoking 1,000 of them costs a while
		}
	}
	ec.cli.Close()
}

func (ec *etcdClients) run(deadline time.Time) *tally {
	t := &tally{}
	runClients(ec.sp, len(ec.sessions), deadline, func(ctx context.Context, i int, r *rand.Rand) {
		s := ec.sessions[i]
		for range ec.sp.Txns {
			m := concurrency.NewMutex(s, "/lockbench/"+poolKey(r, ec.sp.Pool))
			err := m.Lock(ctx)
			if stopped(ctx, err, t) {
				return
			}
			if err != nil {
				t.fail(err)
				continue
			}
			// The unlock gets its own time: a lock the point's end
			// interrupted must still be given back.
			uctx, ucancel := context.WithTimeout(context.Background(), 10*time.Second)
			err = m.Unlock(uctx)
			ucancel()
			if err != nil {
				t.fail(err)
				continue
			}
			t.locks.Add(1)
			t.txns.Add(1)
		}
	})
	return t
}
