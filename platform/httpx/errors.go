package httpx

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/labstack/echo/v4"
	"github.com/svc-dev/svc/platform/apperr"
)

// Envelope is the error body of every control-plane and admin endpoint.
type Envelope struct {
	Error EnvelopeError `json:"error"`
}

// EnvelopeError is the inner object of Envelope.
type EnvelopeError struct {
	Code    string `json:"code"`
	Message string `json:"message"`
	Details any    `json:"details,omitempty"`
}

// OpenAIEnvelope is the error body under the OpenAI-compatible prefix.
type OpenAIEnvelope struct {
	Error OpenAIError `json:"error"`
}

// OpenAIError carries our code in "code" and a coarse class in "type".
type OpenAIError struct {
	Message string `json:"message"`
	Type    string `json:"type"`
	Code    string `json:"code"`
	Param   any    `json:"param"`
	Details any    `json:"details,omitempty"`
}

// ErrTooLarge is the 413 for a body over limit bytes.
func ErrTooLarge(limit int64) *apperr.Error {
	return apperr.ErrPayloadTooLarge.Msg("request body is larger than the limit of %d bytes", limit)
}

// ToAppError maps any error to an *apperr.Error; unknown errors become 500 internal.
func ToAppError(err error) *apperr.Error {
	if ae := apperr.From(err); ae != nil {
		return ae
	}
	var mbe *http.MaxBytesError
	if errors.As(err, &mbe) {
		return ErrTooLarge(mbe.Limit)
	}
	var he *echo.HTTPError
	if errors.As(err, &he) {
		msg := fmt.Sprint(he.Message)
		switch he.Code {
		case http.StatusNotFound:
			return apperr.ErrNotFound.Msg("no route for this path")
		case http.StatusMethodNotAllowed:
			return apperr.ErrMethodNotAllowed.Msg("method not allowed on this path")
		case http.StatusRequestEntityTooLarge:
			return apperr.ErrPayloadTooLarge
		case http.StatusBadRequest:
			return apperr.Invalid("%s", msg)
		case http.StatusUnauthorized:
			return apperr.Unauthorized("unauthorized", msg)
		case http.StatusServiceUnavailable:
			return apperr.ErrUnavailable.Msg("%s", msg)
		}
		if he.Code < 500 {
			return apperr.New(he.Code, strings.ToLower(strings.ReplaceAll(http.StatusText(he.Code), " ", "_")), msg)
		}
	}
	return apperr.ErrInternal.Wrap(err)
}

func errorHandler(opts Options) echo.HTTPErrorHandler {
	return func(err error, c echo.Context) {
		if c.Response().Committed {
			return
		}
		ae := ToAppError(err)
		if ae.Status >= 500 {
			opts.Logger.Error().Str("request_id", RequestID(c)).Str("code", ae.Code).Err(err).Msg("request failed")
		}
		if ae.Status == http.StatusMethodNotAllowed {
			// echo sets Allow; keep it.
		}
		var body any
		if opts.OpenAIPrefix != "" && strings.HasPrefix(c.Request().URL.Path, opts.OpenAIPrefix) {
			typ := "invalid_request_error"
			switch {
			case ae.Status == http.StatusUnauthorized:
				typ = "authentication_error"
			case ae.Status == http.StatusNotFound:
				typ = "not_found_error"
			case ae.Status >= 500:
				typ = "server_error"
			}
			body = OpenAIEnvelope{Error: OpenAIError{Message: ae.Message, Type: typ, Code: ae.Code, Details: ae.Details}}
		} else {
			body = Envelope{Error: EnvelopeError{Code: ae.Code, Message: ae.Message, Details: ae.Details}}
		}
		var werr error
		if c.Request().Method == http.MethodHead {
			werr = c.NoContent(ae.Status)
		} else {
			werr = c.JSON(ae.Status, body)
		}
		if werr != nil {
			opts.Logger.Debug().Err(werr).Msg("writing error response")
		}
	}
}

func newRequestID() string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return "req_" + hex.EncodeToString(b[:])
}
