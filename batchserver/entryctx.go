package batchserver

import (
	"context"
	"net"
	"strconv"
	"sync"
	"time"

	"github.com/smallnest/rpcx/protocol"
	"github.com/smallnest/rpcx/server"
	"github.com/smallnest/rpcx/share"

	"github.com/rpcxbatch/rpcxbatch/codec"
	"github.com/rpcxbatch/rpcxbatch/internal/rpcxlayout"
)

// entryCtx is everything a handler's context holds for one entry, in one
// allocation: the *share.Context the handler gets (as rpcx hands one to a
// plain request), and, as its parent, the values rpcx would have put in it
// (the connection, the start time, the request and response metadata) and
// the caller's deadline.
//
// rpcx builds a plain request's context with share.WithValue and three
// SetValue calls: a map, a mutex and the context, about 370 bytes and half
// a dozen allocations, plus a deadline context, which at hundreds of
// thousands of entries a second is much of the server's garbage. Here the
// share.Context's own tag map starts empty (it makes one the first time a
// handler sets or looks up a value, as it would for any share.Context) and
// the four values are answered by entryCtx.Value below it. A handler sees
// the same keys with the same values either way.
type entryCtx struct {
	sc       share.Context
	tagsLock sync.Mutex // sc's lock

	conn  net.Conn
	start int64 // boxed only when a handler asks for it

	hasDeadline bool
	// serverTimeout says the request metadata holds rpcx's
	// "__ServerTimeout" beside what reqMeta holds, which the map gets when
	// it is made (codec.Entry.ServerTimeout: the entry's only metadata,
	// not decoded into a map of its own).
	serverTimeout bool
	// metaDeadline says the deadline (dl) is the one the request
	// metadata's "__ServerTimeout" gave, as rpcx gives a handler, and not
	// the caller's: it came first, or the caller had none. The entry is
	// refused unrun only past the caller's (see deadlinePassed).
	metaDeadline bool
	// direct says the entry's response is written as rpcx writes an
	// AddHandler handler's (server.Context) and a recovered panic's:
	// straight to the connection, without the write hooks.
	direct bool
	// hs is the request hooks present when the entry's frame was
	// delivered (see req below). Beside the bools, not after req: they
	// then share one word, and the struct fits a smaller size class.
	hs hookSet
	dl deadlineCtx // used only when hasDeadline

	metaMu  sync.Mutex // guards reqMeta and resMeta (made on first use)
	reqMeta map[string]string
	resMeta map[string]string

	// req is the entry as an rpcx request message; nil when the server's
	// plugins have no request hooks (hs; see entryhooks.go).
	req *protocol.Message

	// frame is the entry's frame, whose bytes the entry holds until it
	// finishes (bytewindow.go).
	frame *frameHold
}

// hooks returns the request hooks to run for the entry.
func (e *entryCtx) hooks() hookSet { return e.hs }

// newEntryCtx builds an entry's context. reqMeta may be nil; it is made on
// first use. deadline is used when hasDeadline.
func newEntryCtx(conn net.Conn, arrived time.Time, reqMeta map[string]string, hasDeadline bool, deadline time.Time) *entryCtx {
	e := &entryCtx{conn: conn, start: arrived.UnixNano(), reqMeta: reqMeta, hasDeadline: hasDeadline}
	e.dl.deadline = deadline
	// share.Context's lock is unexported and must be set for its methods
	// to work. If rpcx ever changes the struct, contexts are built with
	// share.WithValue instead, as before.
	if rpcxlayout.CanSetShareContextLock() {
		e.sc.Context = e
		rpcxlayout.SetShareContextLock(&e.sc, &e.tagsLock)
	} else {
		e.sc = *share.WithValue(e, server.RemoteConnContextKey, conn)
	}
	return e
}

// shareContext is the context the handler and the plugins see.
func (e *entryCtx) shareContext() *share.Context { return &e.sc }

// responseMetadata is the response metadata the handler set, or nil.
func (e *entryCtx) responseMetadata() map[string]string {
	e.metaMu.Lock()
	defer e.metaMu.Unlock()
	return e.resMeta
}

// end ends the entry: a handler still holding the context sees it done.
func (e *entryCtx) end() {
	if e.hasDeadline {
		e.dl.cancel()
	}
}

// Deadline returns the caller's deadline, if it had one.
func (e *entryCtx) Deadline() (time.Time, bool) {
	if !e.hasDeadline {
		return time.Time{}, false
	}
	return e.dl.Deadline()
}

// Done is closed at the caller's deadline or when the entry ends; without
// a deadline it is nil (never done), as for a plain request.
func (e *entryCtx) Done() <-chan struct{} {
	if !e.hasDeadline {
		return nil
	}
	return e.dl.Done()
}

// Err reports why Done closed.
func (e *entryCtx) Err() error {
	if !e.hasDeadline {
		return nil
	}
	return e.dl.Err()
}

// Value answers the keys rpcx sets on a plain request's context. The
// metadata maps are made on first use, and the same map is returned after.
func (e *entryCtx) Value(key any) any {
	switch key {
	case server.RemoteConnContextKey:
		return e.conn
	case server.StartRequestContextKey:
		return e.start
	case reqMetaKey:
		return e.metadata(&e.reqMeta)
	case resMetaKey:
		return e.metadata(&e.resMeta)
	}
	if e.hasDeadline {
		// Package context's lookup of the cancelCtx below a context: a
		// context derived from this one becomes a child, not a goroutine.
		return e.dl.Value(key)
	}
	return nil
}

// metadata returns *m, made on first use.
func (e *entryCtx) metadata(m *map[string]string) map[string]string {
	e.metaMu.Lock()
	defer e.metaMu.Unlock()
	if *m == nil {
		*m = make(map[string]string)
		if m == &e.reqMeta && e.serverTimeout {
			// The time left as the caller sent it: the deadline is the
			// frame's arrival plus that time (entryContext).
			(*m)[share.ServerTimeout] = strconv.FormatInt((e.dl.deadline.UnixNano()-e.start)/int64(time.Millisecond), 10)
		}
	}
	return *m
}

// requestMetadata is entry e's request metadata as rpcx hands a request's
// to its plugins and AuthFunc: e.Metadata, or, when the entry carried only
// the server timeout, the map the handler sees too, made now, which e
// keeps from here on.
func (e *entryCtx) requestMetadata(en *codec.Entry) map[string]string {
	if en.ServerTimeout {
		en.Metadata, en.ServerTimeout = e.metadata(&e.reqMeta), false
	}
	return en.Metadata
}

// String names the context in debug output, as context types do.
func (e *entryCtx) String() string { return "rpcxbatch.entryContext" }

var _ context.Context = (*entryCtx)(nil)
