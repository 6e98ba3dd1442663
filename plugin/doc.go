// Package plugin holds the rpcx plugins that tie rpcxbatch into rpcx's
// service registries: Advertise wraps any rpcx register plugin (etcd,
// consul, zookeeper, redis, nacos, mdns) so that the services it publishes
// tell clients, in their metadata, whether the server is a batch peer.
//
// The package starts no goroutines.
package plugin
