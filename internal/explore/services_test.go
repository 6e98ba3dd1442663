package explore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/smallnest/rpcx/protocol"
	"github.com/smallnest/rpcx/server"
	"github.com/smallnest/rpcx/share"
)

// The services every server of a fleet registers: the same behaviour as a
// method (paths "Svc", "SvcB"), a RegisterFunction function ("Fn", "FnB")
// and an AddHandler handler ("H", "HB"), each with struct arguments
// (msgpack, JSON) and with raw bytes (SerializeNone, the "B" paths). The
// argument says what the handler does (an outcome of scenario_test.go).

// Args is the argument of every struct service.
type Args struct {
	N       int
	Outcome string
	Pad     []byte
}

// Reply is the reply of every struct service.
type Reply struct {
	N      int
	Server string
	Pad    []byte
}

// errBad is what a handler returns for outError.
var errBad = errors.New("bad")

// input and output are a call's argument and reply in either form.
type input struct {
	N       int
	Outcome string
	Pad     []byte
}

type output struct {
	N      int
	Server string
	Pad    []byte
	Empty  bool // the reply's encoding is to be empty (bytes, Write(nil))
}

// argBytes is an argument in the bytes form: "outcome|N|" then the pad.
func argBytes(in input) []byte {
	return append([]byte(fmt.Sprintf("%s|%d|", in.Outcome, in.N)), in.Pad...)
}

func parseArgBytes(b []byte) input {
	parts := bytes.SplitN(b, []byte("|"), 3)
	if len(parts) < 3 {
		return input{Outcome: "unparsable:" + bytesString(b)}
	}
	n, _ := strconv.Atoi(string(parts[1]))
	return input{N: n, Outcome: string(parts[0]), Pad: parts[2]}
}

// replyBytes is a reply in the bytes form: "N|server|" then the pad; empty
// for an empty output.
func replyBytes(o output) []byte {
	if o.Empty {
		return []byte{}
	}
	return append([]byte(fmt.Sprintf("%d|%s|", o.N, o.Server)), o.Pad...)
}

// rewritePayload is what a rewriting ClientBeforeEncode does to a request:
// N grows by 1000 (the bytes form gets a "rw" prefix on its outcome).
func rewritePayload(st protocol.SerializeType, p []byte) []byte {
	if st == protocol.SerializeNone {
		return append([]byte("rw"), p...)
	}
	codec := share.Codecs[st]
	var a Args
	if codec == nil || codec.Decode(p, &a) != nil {
		return p
	}
	a.N += 1000
	out, err := codec.Encode(&a)
	if err != nil {
		return p
	}
	return out
}

// pattern is n compressible bytes.
func pattern(n int) []byte {
	return bytes.Repeat([]byte("rpcxbatch-explore "), n/18+1)[:n]
}

// srvState is one server of a fleet, as its handlers see it.
type srvState struct {
	name string
	// replyName is the name the server puts in its replies: "srv" when
	// the scenario has several servers, so that which of them answered a
	// fan-out call does not show in a reply's bytes either.
	replyName string
	slow      bool
	rec       *recorder
}

// behave is every handler's behaviour. res is the response metadata map.
func (s *srvState) behave(ctx context.Context, kind string, in input, res map[string]string, view []string) (output, error) {
	s.rec.handlerStart()
	defer s.rec.handlerEnd()
	s.rec.add(s.name, ev("run", append([]string{"kind", kind, "N", fmt.Sprint(in.N), "outcome", in.Outcome, "pad", fmt.Sprint(len(in.Pad))}, view...)...))
	if res != nil {
		res["srv"] = s.name
	}
	if s.slow {
		time.Sleep(slowFor)
	}
	out := output{N: 2*in.N + len(in.Pad), Server: s.replyName}
	switch strings.TrimPrefix(in.Outcome, "rw") {
	case outError:
		if res != nil {
			res["code"] = "E42"
		}
		out.N = 7
		return out, errBad
	case outPanic:
		panic("boom")
	case outEmpty:
		return output{Empty: true}, nil
	case outBig:
		out.Pad = pattern(bigPad)
	case outHuge:
		out.Pad = pattern(hugePad)
	case outBlock:
		if ctx == nil {
			break
		}
		select {
		case <-ctx.Done():
			// The caller's deadline and the handler's (rpcx sends the
			// time left as __ServerTimeout) end together: answering
			// later makes the caller's side of that race the same on
			// every run.
			time.Sleep(blockLate)
		case <-time.After(blockCap):
		}
		s.rec.add(s.name, ev("end", "ctxerr", errString(ctx.Err())))
		if ctx.Err() != nil {
			return out, ctx.Err()
		}
	}
	return out, nil
}

func resMeta(v any) map[string]string {
	m, _ := v.(map[string]string)
	return m
}

// Svc is the method service of struct arguments.
type Svc struct{ s *srvState }

// Do behaves as its argument says.
func (v *Svc) Do(ctx context.Context, a *Args, r *Reply) error {
	_, dl := ctx.Deadline()
	o, err := v.s.behave(ctx, kindMethod, input{a.N, a.Outcome, a.Pad}, resMeta(ctx.Value(share.ResMetaDataKey)), handlerView(ctx.Value, dl))
	if !o.Empty {
		*r = Reply{N: o.N, Server: o.Server, Pad: o.Pad}
	}
	return err
}

// SvcB is the method service of bytes.
type SvcB struct{ s *srvState }

// Do behaves as its argument says.
func (v *SvcB) Do(ctx context.Context, a *[]byte, r *[]byte) error {
	_, dl := ctx.Deadline()
	o, err := v.s.behave(ctx, kindMethod, parseArgBytes(*a), resMeta(ctx.Value(share.ResMetaDataKey)), handlerView(ctx.Value, dl))
	*r = replyBytes(o)
	return err
}

// register registers the services of s on srv.
func (s *srvState) register(srv *server.Server) error {
	if err := srv.RegisterName("Svc", &Svc{s}, ""); err != nil {
		return err
	}
	if err := srv.RegisterName("SvcB", &SvcB{s}, ""); err != nil {
		return err
	}
	if err := srv.RegisterFunctionName("Fn", "Do", func(ctx context.Context, a *Args, r *Reply) error {
		_, dl := ctx.Deadline()
		o, err := s.behave(ctx, kindFunction, input{a.N, a.Outcome, a.Pad}, resMeta(ctx.Value(share.ResMetaDataKey)), handlerView(ctx.Value, dl))
		if !o.Empty {
			*r = Reply{N: o.N, Server: o.Server, Pad: o.Pad}
		}
		return err
	}, ""); err != nil {
		return err
	}
	if err := srv.RegisterFunctionName("FnB", "Do", func(ctx context.Context, a *[]byte, r *[]byte) error {
		_, dl := ctx.Deadline()
		o, err := s.behave(ctx, kindFunction, parseArgBytes(*a), resMeta(ctx.Value(share.ResMetaDataKey)), handlerView(ctx.Value, dl))
		*r = replyBytes(o)
		return err
	}, ""); err != nil {
		return err
	}
	srv.AddHandler("H", "Do", func(c *server.Context) error {
		var a Args
		if err := c.Bind(&a); err != nil {
			return err
		}
		return s.handle(c, input{a.N, a.Outcome, a.Pad}, func(o output) any {
			if o.Empty {
				return nil
			}
			return &Reply{N: o.N, Server: o.Server, Pad: o.Pad}
		})
	})
	srv.AddHandler("HB", "Do", func(c *server.Context) error {
		return s.handle(c, parseArgBytes(c.Payload()), func(o output) any {
			if o.Empty {
				return nil
			}
			return replyBytes(o)
		})
	})
	return nil
}

// handle is an AddHandler handler: it writes the reply, returns the error
// (which rpcx writes), or writes nothing for outNoReply.
func (s *srvState) handle(c *server.Context, in input, reply func(output) any) error {
	o, err := s.behave(nil, kindHandler, in, resMeta(c.Get(share.ResMetaDataKey)), handlerView(c.Get, false))
	if err != nil {
		return err
	}
	if strings.TrimPrefix(in.Outcome, "rw") == outNoReply {
		return nil
	}
	return c.Write(reply(o))
}
