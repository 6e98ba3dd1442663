package batchclient

import (
	"time"

	"github.com/rpcxbatch/rpcxbatch/codec"
)

// readTimeoutOf returns the server read timeout a handshake response's
// metadata announces (codec.MetaReadTimeout), or 0.
func readTimeoutOf(meta map[string]string) time.Duration {
	d, err := time.ParseDuration(meta[codec.MetaReadTimeout])
	if err != nil || d < 0 {
		return 0
	}
	return d
}

// sendEvery is the longest a lane may go without writing anything, or 0
// when it may stay silent: a third of the server's read timeout (rpcx
// closes a connection it reads nothing from for that long), so that a
// heartbeat written late by a busy process still arrives in time.
func (l *lane) sendEvery() time.Duration {
	return l.hs.ReadTimeout / 3
}

// tickEvery is how often the writer checks whether a heartbeat is due.
func (l *lane) tickEvery() time.Duration {
	d := l.cfg.HeartbeatInterval / 2
	if s := l.sendEvery(); s > 0 {
		d = min(d, s/2)
	}
	return max(d, time.Millisecond)
}

// sendDue reports whether the lane has written nothing for sendEvery.
func (l *lane) sendDue() bool {
	s := l.sendEvery()
	return s > 0 && time.Since(time.Unix(0, l.lastSent.Load())) >= s
}
