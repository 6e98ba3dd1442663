package lane

import (
	"fmt"
	"time"

	"github.com/rpcxbatch/rpcxbatch/codec"
)

// sendEvery is the longest a lane may go without writing anything, or 0
// when it may stay silent: a third of the server's read timeout (rpcx
// closes a connection it reads nothing from for that long), so that a
// heartbeat written late by a busy process still arrives in time.
func (l *Lane) sendEvery() time.Duration {
	return l.hs.ReadTimeout / 3
}

// tickEvery is how often the writer checks whether a heartbeat is due.
func (l *Lane) tickEvery() time.Duration {
	d := l.cfg.HeartbeatInterval / 2
	if s := l.sendEvery(); s > 0 {
		d = min(d, s/2)
	}
	return max(d, time.Millisecond)
}

// sendDue reports whether the lane has written nothing for sendEvery.
func (l *Lane) sendDue() bool {
	s := l.sendEvery()
	return s > 0 && time.Since(time.Unix(0, l.lastSent.Load())) >= s
}

// heartbeat gives up on a peer that owes an answer past HeartbeatTimeout
// (liveness.go) and
// sends an rpcx heartbeat when it was quiet for HeartbeatInterval, or when
// the lane wrote nothing for long enough that the server's read timeout
// would cut it (sendDue). A caller writing its own frame at that moment
// (combine.go) is the lane's traffic: no heartbeat then.
func (l *Lane) heartbeat() error {
	if waited, frozen := l.frozenFor(); frozen {
		return fmt.Errorf("%w: nothing heard for %v after a write it had to answer", ErrHeartbeat, waited.Round(time.Millisecond))
	}
	quiet := time.Since(time.Unix(0, l.lastRecv.Load()))
	if quiet < l.cfg.HeartbeatInterval && !l.sendDue() {
		return nil
	}
	if !l.acquireSocket() {
		return nil
	}
	defer l.releaseSocket()
	ws := &l.ws
	// A frame's end comes first.
	if err := l.writeRest(ws); err != nil {
		return err
	}
	h := codec.HeartbeatHeader()
	ws.buf = codec.AppendMessage(ws.buf[:0], &h, "", "", nil, nil)
	return l.write(ws, ws.buf, time.Time{})
}
