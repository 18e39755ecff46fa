// Package httpx is the one echo setup shared by both planes: the central error handler,
// request ids, access log, panic recovery, CORS, body limits, JSON binding and SSE.
package httpx

import (
	"context"
	"net/http"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/labstack/echo/v4"
	"github.com/labstack/echo/v4/middleware"
	"github.com/rs/zerolog"
	"github.com/svc-dev/svc/platform/apperr"
)

// Module is a feature folder mounted on a plane: it registers its routes and contributes
// its part of the plane's OpenAPI document (a JSON object with "paths" and optional
// "components").
type Module interface {
	Register(g *echo.Group)
	OpenAPI() []byte
}

// Starter is implemented by modules with background work (schedulers, sweeps, engines).
type Starter interface {
	Start(ctx context.Context) error
	Stop(ctx context.Context) error
}

// Options configure NewEcho.
type Options struct {
	Logger      zerolog.Logger
	CORSOrigins []string
	// BodyLimit bounds request bodies (bytes); 0 means 4 MiB.
	BodyLimit int64
	// BodyLimitSkip lets routes that stream large bodies (artifacts) apply their own limit.
	BodyLimitSkip func(c echo.Context) bool
	// OpenAIPrefix: errors on paths under this prefix use the OpenAI error shape
	// {"error":{"message","type","code"}} so that OpenAI-style SDKs surface our codes.
	OpenAIPrefix string
}

// HeaderRequestID is the request id header, accepted from clients or minted.
const HeaderRequestID = echo.HeaderXRequestID

// NewEcho builds an echo instance with the shared middleware chain and error handler.
func NewEcho(opts Options) *echo.Echo {
	e := echo.New()
	e.HideBanner = true
	e.HidePort = true
	if opts.BodyLimit <= 0 {
		opts.BodyLimit = 4 << 20
	}
	e.HTTPErrorHandler = errorHandler(opts)
	e.Use(middleware.RequestIDWithConfig(middleware.RequestIDConfig{
		Generator: newRequestID,
		RequestIDHandler: func(c echo.Context, id string) {
			c.Set("request_id", id)
		},
	}))
	e.Use(accessLog(opts.Logger))
	e.Use(middleware.RecoverWithConfig(middleware.RecoverConfig{
		DisableErrorHandler: false,
		LogErrorFunc: func(c echo.Context, err error, stack []byte) error {
			opts.Logger.Error().Str("request_id", RequestID(c)).Err(err).Bytes("stack", stack).Msg("panic")
			return err
		},
	}))
	if len(opts.CORSOrigins) > 0 {
		e.Use(middleware.CORSWithConfig(middleware.CORSConfig{
			AllowOrigins:  opts.CORSOrigins,
			AllowMethods:  []string{http.MethodGet, http.MethodHead, http.MethodPut, http.MethodPatch, http.MethodPost, http.MethodDelete},
			AllowHeaders:  []string{"Content-Type", "Authorization", HeaderRequestID, "X-Service-Signature", "Last-Event-ID"},
			ExposeHeaders: []string{HeaderRequestID},
			MaxAge:        600,
		}))
	}
	e.Use(rejectBadURL)
	limit := opts.BodyLimit
	skip := opts.BodyLimitSkip
	e.Use(func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			if skip != nil && skip(c) {
				return next(c)
			}
			r := c.Request()
			if r.ContentLength > limit {
				return ErrTooLarge(limit)
			}
			if r.Body != nil {
				r.Body = http.MaxBytesReader(c.Response(), r.Body, limit)
			}
			return next(c)
		}
	})
	return e
}

// RequestID returns the id of the current request.
func RequestID(c echo.Context) string {
	if v, ok := c.Get("request_id").(string); ok {
		return v
	}
	return c.Response().Header().Get(HeaderRequestID)
}

func accessLog(logger zerolog.Logger) echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			start := time.Now()
			err := next(c)
			if err != nil {
				c.Error(err) // write the response now so the status is known
			}
			status := c.Response().Status
			ev := logger.Info()
			if status >= 500 {
				ev = logger.Error()
			}
			ev.Str("request_id", RequestID(c)).
				Str("method", c.Request().Method).
				Str("path", c.Request().URL.Path).
				Int("status", status).
				Dur("latency", time.Since(start)).
				Msg("request")
			return nil
		}
	}
}

// IsSSE reports whether the route streams (so middleware that buffers must skip it).
func IsSSE(c echo.Context) bool {
	return strings.Contains(c.Request().Header.Get("Accept"), "text/event-stream")
}

// rejectBadURL refuses paths and queries holding NUL, other control characters or invalid
// UTF-8: no route can use them, and PostgreSQL would refuse them as text (a 500 otherwise).
func rejectBadURL(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		u := c.Request().URL
		for _, s := range []string{u.Path, u.RawQuery} {
			if !utf8.ValidString(s) || strings.IndexFunc(s, unicode.IsControl) >= 0 {
				return apperr.Invalid("the URL holds control characters or invalid UTF-8")
			}
		}
		for _, vs := range c.QueryParams() {
			for _, v := range vs {
				if !utf8.ValidString(v) || strings.IndexFunc(v, unicode.IsControl) >= 0 {
					return apperr.Invalid("a query parameter holds control characters or invalid UTF-8")
				}
			}
		}
		for _, v := range c.ParamValues() {
			if !utf8.ValidString(v) || strings.IndexFunc(v, unicode.IsControl) >= 0 {
				return apperr.Invalid("a path parameter holds control characters or invalid UTF-8")
			}
		}
		return next(c)
	}
}
