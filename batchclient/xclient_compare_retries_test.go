package batchclient_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/smallnest/rpcx/client"
)

// TestXClientCompareRetryCounts: Call under Failfast, Failtry and Failover
// with Option.Retries of -1, 0 and 1, on a server that answers, one that
// refuses in its handler, a server down and two down:
// the same errors, replies and handler runs on both XClients. rpcx's loop
// makes no attempt at all with Retries below 0 under Failtry and Failover
// (and returns nil), and one attempt more than Retries otherwise; the
// drop-in makes its first attempt outside the loop, so the counts at the
// loop's edges are what this pins.
func TestXClientCompareRetryCounts(t *testing.T) {
	modes := []struct {
		name string
		fm   client.FailMode
	}{{"Failfast", client.Failfast}, {"Failtry", client.Failtry}, {"Failover", client.Failover}}
	cases := []struct {
		name string
		cfg  cmpFleetConfig
		args CmpArgs
	}{
		{name: "answers", cfg: cmpFleetConfig{n: 1}},
		{name: "service error", cfg: cmpFleetConfig{n: 1}, args: CmpArgs{Fail: map[string]string{"*": "refused by the handler"}}},
		// Down servers only: with one up and one down, which of them
		// rpcx's round robin asks first is its map's order, drawn apart
		// on each XClient (TestXClientCompareFailModes covers that fleet
		// with Retries 2, where every call ends on the live one).
		{name: "the server down", cfg: cmpFleetConfig{dead: 1}},
		{name: "both down", cfg: cmpFleetConfig{dead: 2}},
	}
	for _, tc := range cases {
		f := startCmpFleet(t, tc.cfg)
		for _, mode := range modes {
			for _, retries := range []int{-1, 0, 1} {
				t.Run(fmt.Sprintf("%s/%s/Retries=%d", tc.name, mode.name, retries), func(t *testing.T) {
					opt := client.DefaultOption
					opt.Retries = retries
					opt.RetryInterval = time.Millisecond
					mk := func(m xcMaker) client.XClient {
						return newCmpXClient(t, m, mode.fm, client.RoundRobin, f.discovery(t, nil), opt)
					}
					// Sorted, not in order: rpcx's round robin starts
					// where its map iteration puts the live server.
					compareCalls(t, f, false, mk, func(_ xcMaker, xc client.XClient) []cmpOutcome {
						var out []cmpOutcome
						for range 4 {
							args := tc.args
							args.A, args.B = 1, 7
							out = append(out, callOnce(t, f, xc, 10*time.Second, false, &args, -1))
						}
						return out
					}, nil)
				})
			}
		}
	}
}
