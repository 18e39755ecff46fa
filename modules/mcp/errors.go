package mcp

import "github.com/svc-dev/svc/platform/apperr"

// Named errors of the tool-server registry.
var (
	ErrServerNotFound = apperr.NotFound("mcp_server_not_found", "tool server not found")
	ErrUnavailable    = apperr.Unavailable("mcp_unavailable", "tool server unreachable")
	ErrToolFailed     = apperr.BadGateway("mcp_tool_error", "tool call failed")
	ErrInvalidServer  = apperr.BadRequest("invalid_request", "invalid tool server config")
)
