package lane

import (
	"time"
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
