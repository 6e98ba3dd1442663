package batchserver_test

// Copies of two of rpcx v1.9.4's server plugins (serverplugin/
// req_rate_limiting.go and serverplugin/alias.go), hooks verbatim. rpcx's
// serverplugin package cannot be imported here: it also holds the redis and
// mDNS plugins, and importing it would add github.com/redis/go-redis/v9,
// github.com/go-redis/redis_rate/v10 and their dependencies to this module.
// The copies use the same token bucket (github.com/juju/ratelimit, already
// a dependency through rpcx) and return the same server.ErrReqReachLimit.

import (
	"context"
	"time"

	"github.com/juju/ratelimit"
	"github.com/smallnest/rpcx/protocol"
	"github.com/smallnest/rpcx/server"
)

// ReqRateLimitingPlugin is rpcx's serverplugin.ReqRateLimitingPlugin.
type ReqRateLimitingPlugin struct {
	FillInterval time.Duration
	Capacity     int64
	bucket       *ratelimit.Bucket
	block        bool // blocks or return error if reach the limit
}

// NewReqRateLimitingPlugin is rpcx's serverplugin.NewReqRateLimitingPlugin.
func NewReqRateLimitingPlugin(fillInterval time.Duration, capacity int64, block bool) *ReqRateLimitingPlugin {
	tb := ratelimit.NewBucket(fillInterval, capacity)

	return &ReqRateLimitingPlugin{
		FillInterval: fillInterval,
		Capacity:     capacity,
		bucket:       tb,
		block:        block,
	}
}

// PostReadRequest can limit request processing.
func (plugin *ReqRateLimitingPlugin) PostReadRequest(ctx context.Context, r *protocol.Message, e error) error {
	if plugin.block {
		plugin.bucket.Wait(1)
		return nil
	}

	count := plugin.bucket.TakeAvailable(1)
	if count == 1 {
		return nil
	}
	return server.ErrReqReachLimit
}

var aliasAppliedKey = "__aliasAppliedKey"

type aliasPair struct {
	servicePath, serviceMethod string
}

// AliasPlugin is rpcx's serverplugin.AliasPlugin.
type AliasPlugin struct {
	Aliases          map[string]*aliasPair
	ReseverseAliases map[string]*aliasPair
}

// Alias sets a alias for the serviceMethod.
func (p *AliasPlugin) Alias(aliasServicePath, aliasServiceMethod string, servicePath, serviceMethod string) {
	p.Aliases[aliasServicePath+"."+aliasServiceMethod] = &aliasPair{
		servicePath:   servicePath,
		serviceMethod: serviceMethod,
	}
	p.ReseverseAliases[servicePath+"."+serviceMethod] = &aliasPair{
		servicePath:   aliasServicePath,
		serviceMethod: aliasServiceMethod,
	}
}

// NewAliasPlugin creates a new NewAliasPlugin
func NewAliasPlugin() *AliasPlugin {
	return &AliasPlugin{
		Aliases:          make(map[string]*aliasPair),
		ReseverseAliases: make(map[string]*aliasPair),
	}
}

// PostReadRequest converts the alias of this service.
func (p *AliasPlugin) PostReadRequest(ctx context.Context, r *protocol.Message, e error) error {
	var sp = r.ServicePath
	var sm = r.ServiceMethod

	k := sp + "." + sm
	if p.Aliases != nil {
		if pm := p.Aliases[k]; pm != nil {
			r.ServicePath = pm.servicePath
			r.ServiceMethod = pm.serviceMethod
			if r.Metadata == nil {
				r.Metadata = make(map[string]string)
			}
			r.Metadata[aliasAppliedKey] = "true"
		}
	}
	return nil
}

// PreWriteResponse restore servicePath and serviceMethod. (As in rpcx
// v1.9.4, its signature lacks the error argument, so rpcx never calls it.)
func (p *AliasPlugin) PreWriteResponse(ctx context.Context, r *protocol.Message, res *protocol.Message) error {
	if r.Metadata[aliasAppliedKey] != "true" {
		return nil
	}
	var sp = r.ServicePath
	var sm = r.ServiceMethod

	k := sp + "." + sm
	if p.ReseverseAliases != nil {
		if pm := p.ReseverseAliases[k]; pm != nil {
			r.ServicePath = pm.servicePath
			r.ServiceMethod = pm.serviceMethod
			delete(r.Metadata, aliasAppliedKey)
			if res != nil {
				res.ServicePath = pm.servicePath
				res.ServiceMethod = pm.serviceMethod
			}
		}
	}
	return nil
}
