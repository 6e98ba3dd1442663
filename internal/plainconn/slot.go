package plainconn

import (
	"context"
	"fmt"
	"sync"

	"github.com/smallnest/rpcx/client"
)

// Config says how a Slot makes its client and what it reports.
type Config struct {
	// Addr names the address in error messages.
	Addr string
	// Dial makes a new rpcx client and connects it (Connect does it
	// cancellably); ctx ends when the slot is closed. It runs on the
	// slot's dial goroutine, one at a time. A client it returns with an
	// error is dropped unused.
	Dial func(ctx context.Context) (*client.Client, error)
	// Stopped is what Use returns once the slot is closed (Close or
	// CloseIdle); a dial that ends after that reports it wrapped, with
	// Addr.
	Stopped error
	// Refuse, when set, is asked under the slot's lock before a client is
	// handed out: a non-nil error is returned to the caller instead, and a
	// dial that ends while it refuses has its client closed. The slot's
	// owner uses it for a state of its own (the peer's "forgotten").
	Refuse func() error
	// OnRedial, when set, is called under the slot's lock when a dial
	// starts to replace a client whose connection broke.
	OnRedial func()
	// OnInstall, when set, is called under the slot's lock when a dial has
	// made c the slot's client.
	OnInstall func(c *client.Client)
}

// Slot is the plain rpcx client of one address: dialled on first use, one
// dial at a time whichever number of callers wait for it, each caller
// waiting only as long as its context allows; redialled when its
// connection broke; counted in use by each call, so that CloseIdle and
// Retire close a client no call still uses. The zero Slot is not usable:
// make one with NewSlot. A Slot is safe for concurrent use.
type Slot struct {
	cfg Config
	// ctx is the dials' context; cancel (Close) ends it.
	ctx    context.Context
	cancel context.CancelFunc
	// wg counts the dial goroutines; Close waits for it.
	wg sync.WaitGroup

	// mu guards cur, retired, dialing, uses, stopped and every lease's
	// fields. It is held while a call takes the client in use, so
	// CloseIdle sees every call that started. Config's hooks run under it.
	mu sync.Mutex
	// cur is the client handed out, nil before the first dial and after
	// CloseIdle, Close or Retire took it away.
	cur *lease
	// retired are clients Retire took away that calls still use: each is
	// closed when its last use ends, or by Close.
	retired map[*lease]struct{}
	// dialing is the dial under way, if any.
	dialing *dial
	// uses counts the calls in use on any of the slot's clients (cur and
	// retired).
	uses int
	// stopped: the slot was closed; no dial starts any more.
	stopped bool
}

// lease is one client of the slot and the calls using it.
type lease struct {
	c      *client.Client
	uses   int
	closed bool
}

// dial is one connect under way; done is closed when it is over, with c
// installed as the slot's client or err set.
type dial struct {
	done chan struct{}
	c    *client.Client
	err  error
}

// Lease is a client in use by one call: the call runs on Client, and calls
// Done once when it is over.
type Lease struct {
	// Client is the connected rpcx client.
	Client *client.Client
	s      *Slot
	l      *lease
}

// NewSlot returns an empty slot that dials with cfg.Dial on first use.
func NewSlot(cfg Config) *Slot {
	s := &Slot{cfg: cfg}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	return s
}

// live reports whether c's connection is still usable, by rpcx's own
// marks.
func live(c *client.Client) bool { return !c.IsShutdown() && !c.IsClosing() }

// take marks one more call in use on l; under mu.
func (s *Slot) take(l *lease) Lease {
	l.uses++
	s.uses++
	return Lease{Client: l.c, s: s, l: l}
}

// refused is Config.Refuse's answer; under mu.
func (s *Slot) refused() error {
	if s.cfg.Refuse == nil {
		return nil
	}
	return s.cfg.Refuse()
}

// Use returns the slot's client in use until the Lease's Done, connecting
// it when there is none or its connection broke. The caller waits for the
// connect only as long as ctx allows (ctx's error then); the connect
// itself belongs to the slot, and later callers join it rather than queue
// behind it. A failed connect is reported to every caller waiting for it,
// with the dial's error.
func (s *Slot) Use(ctx context.Context) (Lease, error) {
	for {
		s.mu.Lock()
		if err := s.refused(); err != nil {
			s.mu.Unlock()
			return Lease{}, err
		}
		if s.cur != nil && live(s.cur.c) {
			u := s.take(s.cur)
			s.mu.Unlock()
			return u, nil
		}
		if s.stopped {
			s.mu.Unlock()
			return Lease{}, s.cfg.Stopped
		}
		d := s.dialing
		if d == nil {
			if s.cur != nil && s.cfg.OnRedial != nil {
				s.cfg.OnRedial()
			}
			d = &dial{done: make(chan struct{})}
			s.dialing = d
			s.wg.Add(1)
			go s.run(d)
		}
		s.mu.Unlock()
		select {
		case <-d.done:
		case <-ctx.Done():
			return Lease{}, ctx.Err()
		}
		if d.err != nil {
			return Lease{}, d.err
		}
		s.mu.Lock()
		if s.cur != nil && s.cur.c == d.c && s.refused() == nil {
			// Handed out as dialled, even if it broke at once: the call
			// reports that failure rather than dial again.
			u := s.take(s.cur)
			s.mu.Unlock()
			return u, nil
		}
		s.mu.Unlock()
	}
}

// run connects a new client for d and installs it, unless the slot was
// closed or refuses meanwhile.
func (s *Slot) run(d *dial) {
	defer s.wg.Done()
	c, err := s.cfg.Dial(s.ctx)
	s.mu.Lock()
	s.dialing = nil
	switch {
	case err == nil && (s.stopped || s.refused() != nil):
		c.Close()
		err = fmt.Errorf("%w: %s", s.cfg.Stopped, s.cfg.Addr)
	case err != nil && s.ctx.Err() != nil:
		// Cut short by Close: the slot's stop, not the dialer's words for
		// it, is the cause.
		err = fmt.Errorf("%w: %s", s.cfg.Stopped, s.cfg.Addr)
	case err == nil:
		// A broken client it replaces is left as it is: rpcx has shut it
		// down, and calls still holding it end with its error.
		s.cur = &lease{c: c}
		if s.cfg.OnInstall != nil {
			s.cfg.OnInstall(c)
		}
	}
	d.c, d.err = c, err
	s.mu.Unlock()
	close(d.done)
}

// Install makes c, a client connected by the slot's owner, the slot's
// client, as a dial would, and reports true; unless the slot is closed or
// refuses, has a live client, or a dial under way: then c is not taken
// (the caller closes it) and Install reports false.
func (s *Slot) Install(c *client.Client) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopped || s.dialing != nil || (s.cur != nil && live(s.cur.c)) || s.refused() != nil {
		return false
	}
	s.cur = &lease{c: c}
	if s.cfg.OnInstall != nil {
		s.cfg.OnInstall(c)
	}
	return true
}

// Done ends the call's use of its client; a client retired meanwhile is
// closed when its last call is done. Call it once; it does nothing on the
// zero Lease.
func (u Lease) Done() {
	if u.l == nil {
		return
	}
	s := u.s
	s.mu.Lock()
	defer s.mu.Unlock()
	u.l.uses--
	s.uses--
	if _, ok := s.retired[u.l]; ok && u.l.uses == 0 {
		delete(s.retired, u.l)
		closeLease(u.l)
	}
}

// closeLease closes l's client once.
func closeLease(l *lease) {
	if !l.closed {
		l.closed = true
		l.c.Close()
	}
}

// Current returns the slot's client, or nil when it has none.
func (s *Slot) Current() *client.Client {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cur == nil {
		return nil
	}
	return s.cur.c
}

// Retire takes c out of the slot, if it is still the slot's client and
// keep (asked under the slot's lock; nil means yes) allows it, and closes
// it once no call uses it: at once when none does. A later Use dials a
// new client.
func (s *Slot) Retire(c *client.Client, keep func() bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cur == nil || s.cur.c != c || (keep != nil && !keep()) {
		return
	}
	l := s.cur
	s.cur = nil
	if l.uses == 0 {
		closeLease(l)
		return
	}
	if s.retired == nil {
		s.retired = make(map[*lease]struct{})
	}
	s.retired[l] = struct{}{}
}

// CloseIdle closes the slot if no call uses any of its clients: it runs
// then (nil for nothing) under the slot's lock, so that no call starts in
// between, closes the client, makes later calls of Use get Config.Stopped,
// and reports true. When a call is running it does nothing and reports
// false. A dial under way is not waited for: its client is closed when it
// ends.
func (s *Slot) CloseIdle(then func()) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.uses > 0 {
		return false
	}
	if then != nil {
		then()
	}
	s.stopped = true
	if s.cur != nil {
		closeLease(s.cur)
		s.cur = nil
	}
	return true
}

// Close stops the slot: no dial starts any more, a dial under way is
// cancelled and waited for (over TCP and unix sockets that is at once;
// other networks' connects end within rpcx's ConnectTimeout), and every
// client of the slot is closed, in use or not. Later calls of Use get
// Config.Stopped. Close is idempotent.
func (s *Slot) Close() {
	s.mu.Lock()
	s.stopped = true
	s.mu.Unlock()
	s.cancel()
	s.wg.Wait()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cur != nil {
		closeLease(s.cur)
		s.cur = nil
	}
	for l := range s.retired {
		closeLease(l)
	}
	s.retired = nil
}
