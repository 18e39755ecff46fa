package cmd

import (
	"context"

	"github.com/svc-dev/svc/modules/connections"
	"github.com/svc-dev/svc/modules/graph/runtime"
)

// runtimeConnections adapts the connections service to the graph runtime's
// ConnectionResolver: a tool node resolves its connection by name at step time, and any
// error (connection_not_found, connection_disabled, connection_no_secret,
// connection_undecryptable) becomes the node's err value.
type runtimeConnections struct{ svc *connections.Service }

var _ runtime.ConnectionResolver = runtimeConnections{}

// Resolve implements runtime.ConnectionResolver.
func (r runtimeConnections) Resolve(ctx context.Context, name string) (runtime.Credential, error) {
	c, err := r.svc.Resolve(ctx, name)
	if err != nil {
		return runtime.Credential{}, err
	}
	out := runtime.Credential{Header: c.Header, Value: c.Value, Query: c.Query}
	if c.Basic != nil {
		out.Basic = &runtime.BasicAuth{Username: c.Basic.Username, Password: c.Basic.Password}
	}
	return out, nil
}
