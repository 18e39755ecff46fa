package cmd

import (
	"context"

	"github.com/svc-dev/svc/modules/connections"
	"github.com/svc-dev/svc/modules/mcp"
)

// mcpConnections adapts the connections service to the tool-server registry: an
// mcp_server connection contributes a header (HTTP transports) or environment variables
// (stdio transports).
type mcpConnections struct{ svc *connections.Service }

var _ mcp.Connections = mcpConnections{}

// ResolveMCP implements mcp.Connections.
func (m mcpConnections) ResolveMCP(ctx context.Context, name string) (mcp.Auth, error) {
	c, err := m.svc.Resolve(ctx, name)
	if err != nil {
		return mcp.Auth{}, err
	}
	return mcp.Auth{Header: c.Header, Value: c.Value, Env: c.Env}, nil
}
