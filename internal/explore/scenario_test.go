package explore

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/smallnest/rpcx/client"
	"github.com/smallnest/rpcx/protocol"
)

// A scenario is one run of the explorer: a fleet, an XClient's settings,
// the hooks and error funcs in place, and a few calls made one after the
// other. Everything in it comes from its seed (generate), so that a seed
// replays it.

// Server roles.
const (
	roleLive = "live" // an rpcx server
	roleSlow = "slow" // an rpcx server whose handlers sleep slowFor first
	roleDown = "down" // an address nothing listens on
	roleHung = "hung" // a listener that accepts and reads, and never answers
)

// Handler kinds: where the service is registered.
const (
	kindMethod   = "method"   // s.RegisterName, a method
	kindFunction = "function" // s.RegisterFunctionName
	kindHandler  = "handler"  // s.AddHandler
)

// Handler outcomes.
const (
	outValue   = "value"   // a reply
	outError   = "error"   // an error, with a partly filled reply and response metadata
	outPanic   = "panic"   // a panic
	outEmpty   = "empty"   // a reply whose encoding is empty where the codec allows (bytes, AddHandler's Write(nil)), a zero reply otherwise
	outBig     = "big"     // a 64 KiB compressible reply
	outHuge    = "huge"    // a reply over 16 MiB
	outBlock   = "block"   // waits for its context to end (at most blockCap)
	outNoReply = "noreply" // an AddHandler handler that returns nil without writing
)

// Calls.
const (
	opCall      = "Call"
	opGo        = "Go"
	opOneshot   = "Oneshot"
	opBroadcast = "Broadcast"
	opFork      = "Fork"
	opInform    = "Inform"
)

// TLS settings.
const (
	tlsOff   = ""
	tlsOK    = "tls"
	tlsWrong = "tls-wrong-roots" // the client does not trust the server's certificate
)

const (
	slowFor  = 100 * time.Millisecond
	blockCap = 1500 * time.Millisecond
	// blockLate is how long a blocked handler waits after its context
	// ended before it returns.
	blockLate = 50 * time.Millisecond
	bigPad    = 64 << 10
	hugePad   = 17 << 20
	// argPadSmall is above rpcx's compression threshold (1 KiB).
	argPadSmall = 2 << 10
)

// Scenario is one generated scenario.
type Scenario struct {
	Seed       uint64
	FailMode   client.FailMode
	SelectMode client.SelectMode // SelectByUser: the explorer's ordered selector
	Retries    int
	Servers    []string // roles, in selection order
	Serialize  protocol.SerializeType
	Kind       string
	Compress   bool
	TLS        string

	ServerPlugins      bool
	ClientPlugins      bool
	RewritePayload     bool // the client plugin's ClientBeforeEncode rewrites Payload
	ClientErrorFunc    bool
	ServerErrorFunc    bool
	HandleServiceError bool

	Calls []CallSpec
}

// CallSpec is one call of a scenario.
type CallSpec struct {
	Op       string
	Outcome  string
	Deadline time.Duration // 0: none; negative: already past
	// ServerTimeout, when not 0, is a "__ServerTimeout" (milliseconds) the
	// caller puts in its own request metadata.
	ServerTimeout int
	ArgPad        int  // bytes of padding in the argument
	Maps          bool // the caller passes request and response metadata maps
}

// homogeneous reports whether the scenario's servers are interchangeable:
// the selection is rpcx's own (random, round robin, hash), whose order is
// not reproducible, or Failbackup races two servers, so every server
// behaves alike and names are masked.
func (sc *Scenario) homogeneous() bool {
	return sc.SelectMode != client.SelectByUser || sc.FailMode == client.Failbackup
}

// servicePath is the path the scenario's XClient calls.
func (sc *Scenario) servicePath() string {
	p := map[string]string{kindMethod: "Svc", kindFunction: "Fn", kindHandler: "H"}[sc.Kind]
	if sc.Serialize == protocol.SerializeNone {
		p += "B"
	}
	return p
}

// has reports whether a server of the role is in the fleet.
func (sc *Scenario) has(role string) bool {
	for _, r := range sc.Servers {
		if r == role {
			return true
		}
	}
	return false
}

// hasHuge reports whether a call has an argument or reply over 16 MiB.
func (sc *Scenario) hasHuge() bool {
	for _, c := range sc.Calls {
		if c.Outcome == outHuge || c.ArgPad == hugePad {
			return true
		}
	}
	return false
}

// String is the scenario on one line.
func (sc *Scenario) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "seed=%d %s/%s retries=%d servers=%v st=%s kind=%s", sc.Seed, sc.FailMode, sc.SelectMode, sc.Retries, sc.Servers, stName(sc.Serialize), sc.Kind)
	for _, f := range []struct {
		on   bool
		name string
	}{
		{sc.Compress, "gzip"}, {sc.TLS != "", sc.TLS}, {sc.ServerPlugins, "server-plugins"},
		{sc.ClientPlugins, "client-plugins"}, {sc.RewritePayload, "rewrite-payload"},
		{sc.ClientErrorFunc, "ClientErrorFunc"}, {sc.ServerErrorFunc, "ServerErrorFunc"},
		{sc.HandleServiceError, "HandleServiceError"},
	} {
		if f.on {
			b.WriteString(" " + f.name)
		}
	}
	b.WriteString(" calls=[")
	for i, c := range sc.Calls {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(c.String())
	}
	b.WriteString("]")
	return b.String()
}

func (c CallSpec) String() string {
	s := c.Op + ":" + c.Outcome
	switch {
	case c.Deadline > 0:
		s += " dl=" + c.Deadline.String()
	case c.Deadline < 0:
		s += " dl=past"
	}
	if c.ServerTimeout > 0 {
		s += fmt.Sprintf(" __ServerTimeout=%d", c.ServerTimeout)
	}
	if c.ArgPad > 0 {
		s += fmt.Sprintf(" argpad=%d", c.ArgPad)
	}
	if c.Maps {
		s += " maps"
	}
	return s
}

func stName(st protocol.SerializeType) string {
	switch st {
	case protocol.SerializeNone:
		return "none"
	case protocol.JSON:
		return "json"
	case protocol.MsgPack:
		return "msgpack"
	}
	return fmt.Sprint(int(st))
}

// generate makes the scenario of a seed. The choices are weighted towards
// what real services do (one or two live servers, values and errors) while
// reaching every dimension often enough that the CI seeds cover each.
func generate(seed uint64) *Scenario {
	r := rand.New(rand.NewPCG(seed, 0x43e))
	chance := func(p float64) bool { return r.Float64() < p }
	pick := func(xs ...string) string { return xs[r.IntN(len(xs))] }
	sc := &Scenario{Seed: seed}

	sc.FailMode = []client.FailMode{client.Failover, client.Failfast, client.Failtry, client.Failbackup}[r.IntN(4)]
	if chance(0.6) {
		sc.SelectMode = client.SelectByUser
	} else {
		sc.SelectMode = []client.SelectMode{client.RandomSelect, client.RoundRobin, client.WeightedRoundRobin, client.ConsistentHash}[r.IntN(4)]
	}
	sc.Retries = r.IntN(4)
	n := 1 + r.IntN(3)
	if sc.homogeneous() {
		role := roleLive
		if chance(0.15) {
			role = roleSlow
		}
		for range n {
			sc.Servers = append(sc.Servers, role)
		}
	} else {
		for range n {
			switch x := r.Float64(); {
			case x < 0.55:
				sc.Servers = append(sc.Servers, roleLive)
			case x < 0.7:
				sc.Servers = append(sc.Servers, roleSlow)
			case x < 0.88:
				sc.Servers = append(sc.Servers, roleDown)
			default:
				sc.Servers = append(sc.Servers, roleHung)
			}
		}
	}
	switch x := r.Float64(); {
	case x < 0.5:
		sc.Serialize = protocol.MsgPack
	case x < 0.8:
		sc.Serialize = protocol.JSON
	default:
		sc.Serialize = protocol.SerializeNone
	}
	sc.Kind = pick(kindMethod, kindMethod, kindFunction, kindHandler)
	sc.Compress = chance(0.2)
	switch x := r.Float64(); {
	case x < 0.1:
		sc.TLS = tlsOK
	case x < 0.13:
		sc.TLS = tlsWrong
	}
	sc.ServerPlugins = chance(0.5)
	sc.ClientPlugins = chance(0.5)
	sc.RewritePayload = sc.ClientPlugins && chance(0.2)
	// rpcx's ClientErrorFunc is process-wide: a scenario that sets it runs
	// alone, so it is rarer than the other switches.
	sc.ClientErrorFunc = chance(0.1)
	sc.ServerErrorFunc = chance(0.2)
	sc.HandleServiceError = chance(0.3)

	hung := sc.has(roleHung)
	calls := 1 + r.IntN(3)
	for range calls {
		c := CallSpec{Maps: chance(0.6)}
		switch x := r.Float64(); {
		case x < 0.35:
			c.Op = opCall
		case x < 0.5:
			c.Op = opGo
		case x < 0.65:
			c.Op = opOneshot
		case x < 0.77:
			c.Op = opBroadcast
		case x < 0.89:
			c.Op = opFork
		default:
			c.Op = opInform
		}
		switch x := r.Float64(); {
		case x < 0.35:
			c.Outcome = outValue
		case x < 0.55:
			c.Outcome = outError
		case x < 0.65:
			c.Outcome = outPanic
		case x < 0.75:
			c.Outcome = outEmpty
		case x < 0.85:
			c.Outcome = outBig
		case x < 0.88:
			c.Outcome = outHuge
		default:
			c.Outcome = outBlock
		}
		if c.Outcome == outBlock && sc.Kind == kindHandler {
			// An AddHandler handler has no context to wait on: its way
			// of not answering is to return nil without writing.
			c.Outcome = outNoReply
		}
		switch x := r.Float64(); {
		case x < 0.45:
		case x < 0.8:
			c.Deadline = 300 * time.Millisecond
		case x < 0.95:
			c.Deadline = 2 * time.Second
		default:
			c.Deadline = -time.Second
		}
		if chance(0.12) {
			c.ServerTimeout = 100
			if c.Outcome != outNoReply && chance(0.5) {
				c.Outcome = outBlock
				if sc.Kind == kindHandler {
					c.Outcome = outNoReply
				}
			}
		}
		// rpcx waits forever for a hung server and a handler that never
		// answers: such calls must carry a deadline.
		if (hung || c.Outcome == outNoReply || (c.Outcome == outBlock && c.ServerTimeout == 0)) && c.Deadline <= 0 {
			c.Deadline = 300 * time.Millisecond
		}
		switch x := r.Float64(); {
		case x < 0.15:
			c.ArgPad = argPadSmall
		case x < 0.18:
			c.ArgPad = hugePad
		}
		sc.Calls = append(sc.Calls, c)
	}
	return sc
}
