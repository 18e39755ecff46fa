package dataplane

import (
	"net/http"

	"github.com/svc-dev/svc/platform/apperr"
)

// Error codes of the data plane. Under /v1/ they are written in the OpenAI error shape
// ({"error":{"message","type","code"}}) so that client SDKs surface them.
var (
	// ErrModelNotFound: the model field is not a registered logical id (engine names included).
	ErrModelNotFound = apperr.NotFound("model_not_found", "model not found")
	// ErrModalityNotSupported: the upstream answered 404 for the endpoint.
	ErrModalityNotSupported = apperr.NotFound("modality_not_supported", "the model does not support this modality")
	// ErrCredential: a credentialRef could not be resolved.
	ErrCredential = apperr.BadGateway("credential_error", "credential could not be resolved")
	// ErrUpstreamUnreachable: the upstream could not be connected to.
	ErrUpstreamUnreachable = apperr.BadGateway("upstream_unreachable", "the model's upstream is unreachable")
	// ErrUpstreamTimeout: the upstream stayed silent longer than the upstream timeout.
	ErrUpstreamTimeout = apperr.New(http.StatusGatewayTimeout, "upstream_timeout", "the model's upstream timed out")
	// ErrUpstream: the upstream answered an error; its status (4xx) or 502 (5xx) and its
	// message are passed on.
	ErrUpstream = apperr.BadGateway("upstream_error", "the model's upstream returned an error")
	// ErrUpstreamAuth: the upstream refused the credential (401/403).
	ErrUpstreamAuth = apperr.BadGateway("upstream_auth_failed", "the model's upstream rejected the credential")
	// ErrUpstreamProtocol: the upstream answered something that is not its API's format.
	ErrUpstreamProtocol = apperr.BadGateway("upstream_protocol", "the model's upstream answered an unreadable response")
	// ErrSpeechFailed: text-to-speech came back empty or aborted.
	ErrSpeechFailed = apperr.BadGateway("speech_failed", "speech synthesis produced no audio")
	// ErrClientGone: the client closed the request before the upstream answered. Nothing
	// can be delivered; the status (nginx's 499) keeps it out of the 5xx error logs.
	ErrClientGone = apperr.New(499, "client_closed_request", "the client closed the request")
	// ErrEngineUnavailable: the model is registered but its binding has no engine here.
	ErrEngineUnavailable = apperr.Unavailable("engine_unavailable", "the model's engine is not available")
)
