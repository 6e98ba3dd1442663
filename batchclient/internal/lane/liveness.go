package lane

import (
	"time"

	"github.com/smallnest/rpcx/protocol"
)

// A lane judges its peer frozen only on evidence the peer itself gave: this
// side wrote something the peer had to answer (a frame, whose entries take
// answers or credits, or a heartbeat), the peer sent no byte since that
// write started, HeartbeatTimeout has passed since the write put its bytes
// on the wire, and no byte the peer sent waits unread in the socket. Time this process spent without CPU (a starved writer
// that wrote nothing, a starved reader with the answer in its socket) is
// not the peer's silence.
//
// owedSince is when the oldest write not yet followed by any byte from the
// peer started (unix nanos), 0 at first: the start, since the answer may
// be read before the writer notes the write. owedWritten is when that
// write's bytes went out: the peer's time to answer runs from there, so a
// writer starved between taking the time and writing is not counted.

// owe records that a write the peer has to answer, started at start (unix
// nanos), has put bytes on the wire, or ran a whole attempt with the peer
// taking none of its pending bytes. An older claim stays while the peer
// has not spoken since it.
func (l *Lane) owe(start int64) {
	for {
		old := l.owedSince.Load()
		if old != 0 && old > l.lastRecv.Load() {
			return
		}
		if l.owedSince.CompareAndSwap(old, start) {
			l.owedWritten.Store(time.Now().UnixNano())
			return
		}
	}
}

// forgive gives the peer a whole HeartbeatTimeout from now to answer what
// it owes. The writer calls it when its heartbeat tick came far later than
// due (over half of HeartbeatTimeout): this process, or the whole machine
// (a virtual machine paused for a snapshot or a migration, with the
// monotonic clock moving on), did not run for that long, and neither, as
// likely, did the peer, which needs time to answer once both run again.
// Its silence over the pause is no evidence (TestMachinePauseKeepsHealthyPeer);
// a peer that stays silent is judged frozen a HeartbeatTimeout later.
func (l *Lane) forgive(now time.Time) {
	if l.owedSince.Load() != 0 {
		l.owedWritten.Store(now.UnixNano())
	}
}

// heard records that the reader got bytes from the peer: it is alive, and
// has answered whatever was owed so far.
func (l *Lane) heard() { l.lastRecv.Store(time.Now().UnixNano()) }

// frozenFor reports how long the peer has owed an answer, and whether that
// makes it frozen: more than HeartbeatTimeout, with no byte heard since the
// write and none waiting unread.
func (l *Lane) frozenFor() (time.Duration, bool) {
	owed := l.owedSince.Load()
	if owed == 0 || l.lastRecv.Load() >= owed {
		return 0, false
	}
	waited := time.Since(time.Unix(0, max(owed, l.owedWritten.Load())))
	if waited <= l.cfg.HeartbeatTimeout || unreadBytes(l.conn) > 0 {
		return waited, false
	}
	return waited, true
}

// progressReader is the lane's connection as its reader reads it: every
// read that returns bytes counts as the peer being heard from, even in the
// middle of a frame that takes long to arrive.
type progressReader struct{ l *Lane }

func (r progressReader) Read(b []byte) (int, error) {
	n, err := r.l.conn.Read(b)
	if n > 0 {
		r.l.heard()
	}
	return n, err
}

// noteRead records, with Config.IdleTimeout set, that the reader read a
// message: traffic, unless it is the answer to one of the lane's own
// heartbeats and those do not count (Config.IdleHeartbeats).
func (l *Lane) noteRead(h *protocol.Header) {
	if l.cfg.IdleTimeout <= 0 {
		return
	}
	if h.IsHeartbeat() && h.MessageType() == protocol.Response && !l.cfg.IdleHeartbeats {
		return
	}
	l.lastTraffic.Store(time.Now().UnixNano())
}

// LastTraffic is when the lane last wrote a frame or read a message (see
// noteRead), or when it began; kept only with Config.IdleTimeout set. It
// is what rpcx's client renews its connection's deadline on
// (Option.IdleTimeout).
func (l *Lane) LastTraffic() time.Time { return time.Unix(0, l.lastTraffic.Load()) }
