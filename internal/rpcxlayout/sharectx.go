package rpcxlayout

import (
	"sync"

	"github.com/smallnest/rpcx/share"
)

// tagsLockField locates share.Context's unexported lock, which must be set
// for its methods to work.
var tagsLockField = locate[share.Context, *sync.Mutex]("tagsLock")

// CanSetShareContextLock reports whether SetShareContextLock works: false
// when share.Context has no tagsLock field of type *sync.Mutex.
func CanSetShareContextLock() bool { return tagsLockField.ok }

// SetShareContextLock makes mu the lock of sc, as share.NewContext makes a
// lock of its own, so that a share.Context built in place (not with
// NewContext) works. Where CanSetShareContextLock reports false it does
// nothing and returns false.
func SetShareContextLock(sc *share.Context, mu *sync.Mutex) bool {
	if !tagsLockField.ok {
		return false
	}
	*tagsLockField.in(sc) = mu
	return true
}
