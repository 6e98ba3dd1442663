package batchclient_test

import (
	"context"
	"reflect"
	"testing"
	"time"

	"github.com/smallnest/rpcx/client"
	"github.com/smallnest/rpcx/server"
	"github.com/stretchr/testify/require"
	"github.com/vmihailenco/msgpack/v5"

	"github.com/rpcxbatch/rpcxbatch/batchserver"
	"github.com/rpcxbatch/rpcxbatch/internal/testkit/testsvc"
)

// Credentials has an encoder registered on its pointer type that leaves
// the secret out, as a service might to keep it off the wire: rpcx runs it
// for the *Credentials a call hands it.
type Credentials struct {
	User   string
	Secret string
}

// Seen is what the server received.
type Seen struct {
	User   string
	Secret string
}

// Vault reports the credentials it was sent.
type Vault struct{}

// Check copies the credentials it received into the reply.
func (Vault) Check(_ context.Context, c *Credentials, r *Seen) error {
	r.User, r.Secret = c.User, c.Secret
	return nil
}

func init() {
	msgpack.Register((*Credentials)(nil), func(e *msgpack.Encoder, v reflect.Value) error {
		if v.IsNil() {
			return e.EncodeNil()
		}
		c := v.Interface().(*Credentials)
		if err := e.EncodeMapLen(2); err != nil {
			return err
		}
		for _, s := range []string{"User", c.User, "Secret", ""} {
			if err := e.EncodeString(s); err != nil {
				return err
			}
		}
		return nil
	}, nil)
}

// A codec registered with msgpack.Register((*T)(nil), ...) runs on the
// batch path as on plain rpcx: the same bytes reach the server.
func TestCodecRegisteredOnPointerSameAsPlainRPCX(t *testing.T) {
	serve := func(batch bool) string {
		s := server.NewServer()
		if batch {
			_, err := batchserver.New(s)
			require.NoError(t, err)
		}
		require.NoError(t, s.RegisterName("Vault", new(Vault), ""))
		addr, stop, err := testsvc.Serve(s)
		require.NoError(t, err)
		t.Cleanup(testsvc.StopWhenIdle(s, stop))
		return addr
	}
	plainAddr, batchAddr := serve(false), serve(true)
	ctx := ctxT(t, 10*time.Second)
	args := &Credentials{User: "ann", Secret: "hunter2"}

	pc := client.NewClient(client.DefaultOption)
	require.NoError(t, pc.Connect("tcp", plainAddr))
	t.Cleanup(func() { pc.Close() })
	var viaRPCX Seen
	require.NoError(t, pc.Call(ctx, "Vault", "Check", args, &viaRPCX))
	require.Equal(t, Seen{User: "ann"}, viaRPCX, "rpcx runs the encoder registered on *Credentials")

	c := newClient(t)
	require.False(t, waitConnected(t, c, batchAddr).Plain)
	var viaBatch Seen
	require.NoError(t, c.Call(ctx, batchAddr, "Vault", "Check", args, &viaBatch))
	require.Equal(t, viaRPCX, viaBatch)
}
