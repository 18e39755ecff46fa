// Package apperr carries named error codes from domain code to the one HTTP error handler.
package apperr

import (
	"errors"
	"fmt"
	"net/http"
)

// Error is a domain error with a stable, client-facing code and the HTTP status it maps to.
type Error struct {
	Status  int    // HTTP status
	Code    string // named code, e.g. "agent_exists"
	Message string // human readable, safe to show to clients
	Details any    // optional structured details (JSON-serialisable)
	cause   error  // internal cause; logged, never sent
}

func (e *Error) Error() string {
	if e.cause != nil {
		return e.Code + ": " + e.Message + ": " + e.cause.Error()
	}
	return e.Code + ": " + e.Message
}

// Unwrap exposes the internal cause.
func (e *Error) Unwrap() error { return e.cause }

// Is matches another *Error by code, so sentinels work with errors.Is after With/Wrap.
func (e *Error) Is(target error) bool {
	var t *Error
	if errors.As(target, &t) {
		return t.Code == e.Code
	}
	return false
}

// New builds an error with a status, code and message.
func New(status int, code, message string) *Error {
	return &Error{Status: status, Code: code, Message: message}
}

// Msg returns a copy with another message.
func (e *Error) Msg(format string, args ...any) *Error {
	c := *e
	c.Message = fmt.Sprintf(format, args...)
	return &c
}

// WithDetails returns a copy carrying details.
func (e *Error) WithDetails(details any) *Error {
	c := *e
	c.Details = details
	return &c
}

// Wrap returns a copy that records an internal cause (never sent to clients).
func (e *Error) Wrap(cause error) *Error {
	c := *e
	c.cause = cause
	return &c
}

// Constructors for the common statuses.
func BadRequest(code, msg string) *Error   { return New(http.StatusBadRequest, code, msg) }
func Unauthorized(code, msg string) *Error { return New(http.StatusUnauthorized, code, msg) }
func NotFound(code, msg string) *Error     { return New(http.StatusNotFound, code, msg) }
func Conflict(code, msg string) *Error     { return New(http.StatusConflict, code, msg) }
func Unprocessable(code, msg string) *Error {
	return New(http.StatusUnprocessableEntity, code, msg)
}
func Unavailable(code, msg string) *Error { return New(http.StatusServiceUnavailable, code, msg) }
func BadGateway(code, msg string) *Error  { return New(http.StatusBadGateway, code, msg) }

// Generic codes shared by every module (DESIGN.md §4).
var (
	ErrInvalidRequest   = BadRequest("invalid_request", "invalid request")
	ErrNotFound         = NotFound("not_found", "not found")
	ErrMethodNotAllowed = New(http.StatusMethodNotAllowed, "method_not_allowed", "method not allowed")
	ErrPayloadTooLarge  = New(http.StatusRequestEntityTooLarge, "payload_too_large", "request body too large")
	ErrInternal         = New(http.StatusInternalServerError, "internal", "internal error")
	ErrUnavailable      = Unavailable("unavailable", "service unavailable")
)

// Invalid is shorthand for a 400 invalid_request with a message.
func Invalid(format string, args ...any) *Error { return ErrInvalidRequest.Msg(format, args...) }

// From extracts an *Error, or nil.
func From(err error) *Error {
	var e *Error
	if errors.As(err, &e) {
		return e
	}
	return nil
}
