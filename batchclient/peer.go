package batchclient

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync/atomic"
	"time"

	"github.com/smallnest/rpcx/client"

	"github.com/rpcxbatch/rpcxbatch/batchclient/internal/dial"
	"github.com/rpcxbatch/rpcxbatch/batchclient/internal/lane"
	"github.com/rpcxbatch/rpcxbatch/internal/plainconn"
)

// Status is the state of the connection to one address, as Info reports it.
type Status int

const (
	// NotConnected: the client has no connection to the address (never
	// used, or stopped with Stop). Calls to it take the plain rpcx path.
	NotConnected Status = iota
	// Down: the client is connecting, the last attempt failed, or the
	// server has no batch plugin (Info.Plain); calls wait, fail with
	// ErrPeerDown, or take plain rpcx respectively.
	Down
	// Connected: a lane pool to the server's batch plugin is up.
	Connected
)

func (s Status) String() string {
	return [...]string{"not_connected", "down", "connected"}[s]
}

// Info describes the connection to one address.
type Info struct {
	Status Status
	// Lanes is the number of lanes when Connected.
	Lanes int
	// Incarnation is the server's incarnation id, when Connected.
	Incarnation uint64
	// Plain is true when the server answered that it has no batch plugin:
	// calls to it go over plain rpcx.
	Plain bool
	// Err is the last connect error, when Down.
	Err error
}

type peerState int

const (
	stateConnecting peerState = iota
	stateBatch
	statePlain
	stateDown
	stateStopped
	// stateForgotten: the peer gave up on a server nobody used while it was
	// down and left the client's table; a call that still holds it looks
	// the address up again.
	stateForgotten
)

// errForgotten tells route to look the address up again.
var errForgotten = errors.New("batchclient: peer forgotten")

// unused reports whether the peer has been down since downSince and
// unused for the ForgetDown option's time.
func (p *peer) unused(downSince time.Time) bool {
	last := time.Unix(0, p.lastUsed.Load())
	if last.Before(downSince) {
		last = downSince
	}
	return time.Since(last) > p.env.forgetDown
}

// peer is the client's connection to one address: a manager goroutine that
// connects, watches and reconnects the lane pool in the background, and the
// plain rpcx client used where the batch path does not apply.
type peer struct {
	// view is the peer's state as callers read it, replaced whole (never
	// changed in place) at every change, so the call path takes no lock.
	view atomic.Pointer[peerView]
	// env is what the peer needs from its Client (peerenv.go); pick reads
	// its first fields, in view's cache line.
	env     peerEnv
	network string
	addr    string
	// plain is the plain rpcx client, its dial and its calls in use
	// (plaindial.go).
	plain *plainconn.Slot

	// key is the address as the client's table knows it.
	key string
	// lastUsed is when a call last found the peer down, connecting or
	// plain (unix nanos); see Options.ForgetDown.
	lastUsed atomic.Int64

	// laneDown receives a notice from every lane of the pool that fails.
	laneDown chan struct{}
	// saturated receives a notice from a lane of the pool that cannot keep
	// up alone (lanepool.go).
	saturated chan struct{}
	// reprobe asks the manager of a plain peer to ask the server again
	// whether it has the batch plugin (its plain connection broke).
	reprobe chan struct{}
	// demand is told when a call finds the peer down, demandNow when an
	// XClient asks for a fresh connect (see redial.go).
	demand, demandNow chan struct{}
	stop              chan struct{}
	done              chan struct{}
}

// peerView is one state of a peer: what pick and info read.
type peerView struct {
	state peerState
	lanes []*lane.Lane
	err   error
	// moved, while the pool's last change in size has keys waiting for
	// their old lanes, says which (lanepool.go).
	moved *keyMove
	// conn, in a connecting view, is the connection of the attempt under
	// way once it is up (its TCP dial and TLS done, ConnCreated run) while
	// the handshake runs; in a down view, that connection when the
	// handshake then failed (closed). Only for attempts an XClient waits
	// for (dial.Attempt.Early): rpcx's dial would have succeeded there.
	conn net.Conn
	// early, in a down view, says the failed attempt was one an XClient
	// waited for (its dial ran the connection hooks); a background
	// redial's failure is not an XClient's outcome (see awaitFresh).
	early bool
	// changed is closed when this view is replaced.
	changed chan struct{}
}

func newPeer(env peerEnv, key, network, addr string) *peer {
	p := &peer{env: env, key: key, network: network, addr: addr,
		laneDown: make(chan struct{}, 64), saturated: make(chan struct{}, 1),
		reprobe: make(chan struct{}, 1), demand: make(chan struct{}, 1), demandNow: make(chan struct{}, 1),
		stop: make(chan struct{}), done: make(chan struct{})}
	// Every lane of the pool tells this peer's manager when it fails, and
	// when it cannot keep up alone.
	p.env.lane.Down = p.laneDown
	p.env.lane.Saturated = p.saturated
	p.view.Store(&peerView{state: stateConnecting, changed: make(chan struct{})})
	p.plain = newPlainSlot(p)
	p.lastUsed.Store(time.Now().UnixNano())
	go p.run()
	return p
}

// setPool publishes the pool's lanes after a change in their number, with
// the keys that wait for their old lanes (moved, nil once none waits);
// only the manager goroutine calls it.
func (p *peer) setPool(lanes []*lane.Lane, moved *keyMove) {
	old := p.view.Swap(&peerView{state: stateBatch, lanes: lanes, moved: moved, changed: make(chan struct{})})
	close(old.changed)
}

// refusedHandshake reports whether err is the server's refusal of a lane's
// handshake (a client.ServiceError, such as its AuthFunc's), not "no
// batch service" or a failure to reach it.
func refusedHandshake(err error) bool {
	var se client.ServiceError
	return errors.As(err, &se) && !errors.Is(err, dial.ErrNoBatchService)
}

// setState publishes a new view; only the manager goroutine calls it.
func (p *peer) setState(s peerState, lanes []*lane.Lane, err error) {
	p.setView(&peerView{state: s, lanes: lanes, err: err})
}

// setView publishes v, whose changed it makes; only the manager goroutine
// calls it.
func (p *peer) setView(v *peerView) {
	v.changed = make(chan struct{})
	old := p.view.Swap(v)
	close(old.changed)
	s := v.state
	if s != stateDown && s != stateConnecting {
		// Back, plain, stopped or forgotten: no longer a server that is
		// shutting down (see drain.go).
		p.env.drainClear(p.key)
	}
}

// run owns the lane pool: it connects, waits for a lane to die or for Stop,
// tears the pool down, and reconnects with backoff.
func (p *peer) run() {
	defer close(p.done)
	backoff, maxBackoff := p.env.reconnectMin, p.env.reconnectMax
	first, plain := true, false
	// early: the next attempt is one a caller waits for (the first, or an
	// XClient's: see redial.go).
	early := true
	var downSince time.Time
	for {
		lanes, conn, err := p.connect(early && !plain)
		switch {
		case errors.Is(err, dial.ErrNoBatchService), refusedHandshake(err), err != nil && plain:
			// A plain server, or one that was plain and could not be asked
			// again just now: its calls go on over plain rpcx (which meets
			// any outage itself), and it is asked again later. So does a
			// server that refused the handshake itself (its AuthFunc
			// refused the token): each call then meets that refusal as on
			// plain rpcx, with the reply's metadata, a oneway call refused
			// unanswered, and a call whose own metadata carries a token
			// the server takes goes through.
			if conn != nil {
				// The connection the XClient's dial made: the plain
				// client takes it over, as rpcx's client keeps the one it
				// dialled.
				p.adoptPlain(conn)
			}
			if !plain {
				p.env.metrics.fallbacks.Inc(1)
				p.setState(statePlain, nil, nil)
				plain = true
			}
			if !p.waitReprobe() {
				p.setState(stateStopped, nil, ErrStopped)
				return
			}
			if p.unused(time.Time{}) && p.forgetPlain() {
				// A plain server no call has used for ForgetDown: most
				// likely one a discovery dropped. It is asked no more;
				// a later call starts afresh.
				return
			}
			continue
		case err != nil:
			if downSince.IsZero() {
				downSince = time.Now()
			}
			p.setView(&peerView{state: stateDown, err: err, conn: upConn(err, early), early: early})
			var wake redialWake
			for wake = wakeIdle; wake == wakeIdle; {
				if p.unused(downSince) {
					// Down, and nobody has asked for it for a while: most
					// likely a server that left for good (a discovery
					// dropped it). Stop redialling it; a later call starts
					// afresh.
					p.env.forget(p)
					p.setState(stateForgotten, nil, err)
					// Its plain client too, and a dial of it under way (a
					// SendRaw's): the peer is done with it.
					p.plain.Close()
					return
				}
				wake = p.waitRedial(backoff, redialsAlone(err))
			}
			if wake == wakeStop {
				p.setState(stateStopped, nil, ErrStopped)
				return
			}
			early = wake == wakeNow
			backoff = min(backoff*2, maxBackoff)
			p.setState(stateConnecting, nil, err)
			continue
		}
		early = false
		downSince = time.Time{}
		if !first {
			p.env.metrics.reconnects.Inc(1)
		}
		first = false
		backoff, maxBackoff = p.env.reconnectMin, p.env.reconnectMax
		p.setState(stateBatch, lanes, nil)
		if plain {
			// The server gained the batch plugin. Calls that took the plain
			// client before the switch may still be running on it: it is
			// closed ReprobePlain later, unless the server is plain again.
			plain = false
			if pc := p.currentPlain(); pc != nil {
				time.AfterFunc(p.env.reprobePlain, func() { p.retirePlain(pc) })
			}
		}

		dead, lanes, idle := p.serve(lanes)
		if idle {
			// Idle for rpcx's IdleTimeout: the connections close, as
			// rpcx's does, and the next call connects afresh (a new
			// peer), as rpcx's next call dials.
			why := fmt.Errorf("%w: %s: idle for the option's IdleTimeout", ErrConnection, p.addr)
			p.env.forget(p)
			p.setState(stateForgotten, nil, why)
			for _, l := range lanes {
				l.Close(why)
			}
			p.env.pushLost(p.key, lanes[0].Conn().RemoteAddr(), why)
			p.plain.Close()
			return
		}
		if dead != nil && dead.Draining() {
			// The server is shutting down gracefully (see drain.go).
			drained := p.drainPool(lanes)
			// rpcx's client tells its server-message channel when its
			// connection ends, and a graceful Shutdown ends it.
			p.env.pushLost(p.key, lanes[0].Conn().RemoteAddr(), fmt.Errorf("%w: %s shut down gracefully", ErrConnection, p.addr))
			if !drained {
				p.setState(stateStopped, nil, ErrStopped)
				return
			}
			// Most often a restart: look for the server again soon.
			maxBackoff = min(p.env.reconnectMax, drainRedialMax)
			continue
		}
		// One lane down means the pool is suspect (a restart, a freeze): a
		// new pool is built against whatever incarnation answers next. The
		// other lanes' calls fail with the dead lane's cause.
		why := p.env.stopCause()
		if dead != nil {
			why = dead.Err()
		}
		p.setState(stateConnecting, nil, nil)
		for _, l := range lanes {
			l.Close(why)
		}
		p.env.pushLost(p.key, lanes[0].Conn().RemoteAddr(), why)
		if dead == nil {
			p.setState(stateStopped, nil, ErrStopped)
			return
		}
	}
}

// connect dials and handshakes the pool's first lanes (lanepool.go).
// early is dial.Attempt's: the first lane's connection is published in a
// connecting view once it is up, and when the server turns out plain it
// is returned with the error, for the plain client to take over.
func (p *peer) connect(early bool) ([]*lane.Lane, net.Conn, error) {
	d := &p.env.dial
	a := dial.Attempt{Early: early}
	if early {
		a.Up = func(conn net.Conn) { p.setView(&peerView{state: stateConnecting, conn: conn}) }
	}
	conn, hs, err := d.Dial(p.stop, a)
	if err != nil {
		return nil, conn, err
	}
	n := p.firstLanes(p.laneCap(hs.PoolSize))
	lanes := []*lane.Lane{lane.New(p.env.lane, p.key, conn, hs)}
	for len(lanes) < n {
		conn, hs2, err := d.Dial(p.stop, dial.Attempt{Early: early})
		if conn != nil && err != nil {
			conn.Close() // plain: the pool's first lane found the plugin
		}
		if err == nil && hs2.Incarnation != hs.Incarnation {
			conn.Close()
			err = fmt.Errorf("%w: server restarted while the pool was being built", ErrConnection)
		}
		if err != nil {
			for _, l := range lanes {
				l.Close(err)
			}
			return nil, nil, err
		}
		lanes = append(lanes, lane.New(p.env.lane, p.key, conn, hs2))
	}
	return lanes, nil, nil
}

// pick returns a lane for the call, or the plain client (in use until its
// done) when the peer is plain, waiting while the pool is being (re)built.
func (p *peer) pick(ctx context.Context, k entryKey) (*lane.Lane, plainRef, error) {
	for {
		v := p.view.Load()
		lanes, err := v.lanes, v.err
		switch v.state {
		case stateBatch:
			if !k.keyed {
				return lanes[p.env.rr.Add(1)%uint64(len(lanes))], plainRef{}, nil
			}
			l := lanes[lane.Jump(k.hash, len(lanes))]
			if m := v.moved; m == nil || m.from[lane.Jump(k.hash, len(m.from))] == l {
				return l, plainRef{}, nil
			}
			// The key moved in the pool's last change: its entries go to
			// the new lane once the old one has run what it had
			// (lanepool.go). The wait is the old lane's round trip.
		case statePlain:
			p.lastUsed.Store(time.Now().UnixNano())
			pr, err := p.usePlain(ctx)
			return nil, pr, err
		case stateDown:
			p.lastUsed.Store(time.Now().UnixNano())
			p.env.metrics.errDown.Inc(1)
			p.wanted()
			var se client.ServiceError
			if errors.As(err, &se) {
				// The server answered and refused (its AuthFunc): the
				// caller gets the refusal as plain rpcx would give it.
				return nil, plainRef{}, err
			}
			return nil, plainRef{}, fmt.Errorf("%w: %s: %w", ErrPeerDown, p.addr, err)
		case stateStopped:
			return nil, plainRef{}, ErrStopped
		case stateForgotten:
			return nil, plainRef{}, errForgotten
		}
		p.lastUsed.Store(time.Now().UnixNano())
		select {
		case <-v.changed:
		case <-ctx.Done():
			return nil, plainRef{}, ctx.Err()
		}
	}
}

// waitReprobe waits, for a plain peer, until it is time to ask the server
// again (ReprobePlain, or at once when the plain connection broke); it
// reports false on Stop.
func (p *peer) waitReprobe() bool {
	t := time.NewTimer(p.env.reprobePlain)
	defer t.Stop()
	select {
	case <-p.stop:
		return false
	case <-p.reprobe:
	case <-t.C:
	}
	return true
}

// shutdown stops the manager, waits for it, and closes the plain client
// (cancelling its dial under way).
func (p *peer) shutdown() {
	select {
	case <-p.stop:
	default:
		close(p.stop)
	}
	<-p.done
	p.plain.Close()
}

func (p *peer) info() Info {
	v := p.view.Load()
	switch v.state {
	case stateBatch:
		return Info{Status: Connected, Lanes: len(v.lanes), Incarnation: v.lanes[0].Handshake().Incarnation}
	case statePlain:
		return Info{Status: Down, Plain: true}
	case stateStopped:
		return Info{Status: NotConnected}
	}
	return Info{Status: Down, Err: v.err}
}
