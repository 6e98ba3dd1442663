package batchclient

import (
	"context"
	"net"
	"time"

	"github.com/smallnest/rpcx/client"

	"github.com/rpcxbatch/rpcxbatch/internal/plainconn"
)

// The plain fallback's client lives in a plainconn.Slot owned by the peer:
// one dial at a time (Stop cancels and joins it), each caller waiting for
// it only as long as its own context allows, every call counted in use so
// that forgetPlain and retirePlain close a client no call still uses.

// newPlainSlot makes the slot of p's plain client.
func newPlainSlot(p *peer) *plainconn.Slot {
	return plainconn.NewSlot(plainconn.Config{
		Addr:    p.addr,
		Stopped: ErrStopped,
		Dial: func(ctx context.Context) (*client.Client, error) {
			pc := p.env.newPlainClient(p.key)
			return pc, plainconn.Connect(ctx, pc, p.env.rpcx, p.network, p.addr)
		},
		Refuse: func() error {
			if p.view.Load().state == stateForgotten {
				// forgetPlain has taken the client away: route looks again.
				return errForgotten
			}
			return nil
		},
		OnRedial: func() {
			// The plain connection broke, most often because the server
			// restarted: maybe with the batch plugin now.
			select {
			case p.reprobe <- struct{}{}:
			default:
			}
		},
		OnInstall: func(pc *client.Client) {
			if p.view.Load().state == stateBatch {
				// The server gained the batch plugin while this dial was
				// under way (its manager may have looked for a plain client
				// to retire before this one was in place): retired as run
				// does.
				time.AfterFunc(p.env.reprobePlain, func() { p.retirePlain(pc) })
			}
		},
	})
}

// adoptPlain makes conn, the connection an XClient's connect made to a
// server that turned out plain (ConnCreated has run for it), the peer's
// plain rpcx client's, as rpcx's client keeps the connection it dialled:
// one connection, and one ConnCreated, as on plain rpcx. When the slot has
// a client already, or the application dials with a connection factory of
// its own, conn is closed.
func (p *peer) adoptPlain(conn net.Conn) {
	if plainconn.AppFactory(p.network) {
		// rpcx would dial with the application's factory: so does the
		// plain client.
		conn.Close()
		return
	}
	pc := p.env.newPlainClient(p.key)
	if pp, ok := pc.Plugins.(plainPlugins); ok {
		pp.adopted = conn
		pc.Plugins = pp
	}
	if err := plainconn.Adopt(pc, p.addr, conn); err != nil {
		return
	}
	if !p.plain.Install(pc) {
		pc.Close()
		return
	}
	p.env.plainAdopted(p.key, conn)
}

// plainRef is a plain rpcx client in use by one call; done ends the use.
type plainRef struct {
	pc  *client.Client
	use plainconn.Lease
}

func (r plainRef) done() { r.use.Done() }

// usePlain returns the peer's plain rpcx client, connecting it when needed,
// in use until the caller's done. The caller waits for the connect only as
// long as ctx allows.
func (p *peer) usePlain(ctx context.Context) (plainRef, error) {
	u, err := p.plain.Use(ctx)
	return plainRef{pc: u.Client, use: u}, err
}

// forgetPlain takes an unused plain peer out of the client's table and
// closes its plain client, unless a call is running on it (a long one,
// started before ForgetDown): then it reports false, and the peer stays.
func (p *peer) forgetPlain() bool {
	// Under the slot's lock, which usePlain holds to hand the client out:
	// no call starts on it once it is found unused.
	return p.plain.CloseIdle(func() {
		p.env.forget(p)
		p.setState(stateForgotten, nil, nil)
	})
}

// currentPlain is the peer's plain client, if it has one.
func (p *peer) currentPlain() *client.Client { return p.plain.Current() }

// retirePlain closes pc, the plain client of a peer that has since found
// the batch plugin, once no call uses it, unless pc is no longer the
// peer's or the peer is plain again (its calls use pc).
func (p *peer) retirePlain(pc *client.Client) {
	p.plain.Retire(pc, func() bool { return p.view.Load().state != statePlain })
}
