package lane

import "runtime"

// yieldToCaller lets the caller the reader has just woken run before the
// reader reads on. Woken, the caller waits in the processor's next slot
// while the reader goes on; with no byte buffered, the reader's next read
// finds the socket empty (a read returning EAGAIN) and parks the reader
// in the network poller, and only then does the caller run. At one caller
// that read and park are on the path of every call (a plain rpcx
// client's reader does the same). Yielding runs the caller at once; the
// reader, put on the global run queue, reads on after it, or on the other
// processor, whose thread the caller's wake-up started. Only after a
// frame that woke one caller and left nothing buffered: a frame of many
// replies is a lane under load, whose reader must not wait behind every
// caller it woke.
func yieldToCaller() { runtime.Gosched() }
