// Package metrics is the process's Prometheus registry, the HTTP middleware that measures every
// route of a plane, and the /metrics handler. Feature modules register their own series on the
// registry they are handed; nothing uses the global default registry.
package metrics

import (
	"net/http"
	"strconv"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/svc-dev/svc/platform/httpx"
)

// Path is where each plane serves its metrics.
const Path = "/metrics"

// Metrics holds the process registry and the HTTP series shared by the planes.
type Metrics struct {
	reg      *prometheus.Registry
	requests *prometheus.CounterVec
	latency  *prometheus.HistogramVec
}

// New builds a registry with the Go runtime and process collectors and the HTTP series
// svc_http_requests_total{plane,method,route,status} and
// svc_http_request_duration_seconds{plane,method,route}.
func New() *Metrics {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	m := &Metrics{
		reg: reg,
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "svc_http_requests_total",
			Help: "HTTP requests by plane, method, route template and status code.",
		}, []string{"plane", "method", "route", "status"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "svc_http_request_duration_seconds",
			Help: "HTTP request latency by plane, method and route template (streams: until the stream ends).",
			// Inference calls run from milliseconds (cached embeddings) to minutes (long generations).
			Buckets: []float64{.001, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 120, 300},
		}, []string{"plane", "method", "route"}),
	}
	reg.MustRegister(m.requests, m.latency)
	return m
}

// Registry is where modules register their series.
func (m *Metrics) Registry() *prometheus.Registry { return m.reg }

// unmatched labels requests that matched no route, so scanners cannot mint label values.
const unmatched = "unmatched"

// Middleware measures every request of a plane. Mount it with echo's Pre so it wraps the whole
// chain: the route template is known once the inner chain has routed the request, and the
// status once the error handler has written the response.
func (m *Metrics) Middleware(plane string) echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			start := time.Now()
			err := next(c)
			route := c.Path()
			if route == "" {
				route = unmatched
			}
			status := c.Response().Status
			if err != nil && !c.Response().Committed {
				// The error handler has not run yet (it runs after Pre middleware returns);
				// report what it will most likely write.
				status = http.StatusInternalServerError
				if he, ok := err.(*echo.HTTPError); ok {
					status = he.Code
				}
			}
			method := c.Request().Method
			m.requests.WithLabelValues(plane, method, route, strconv.Itoa(status)).Inc()
			m.latency.WithLabelValues(plane, method, route).Observe(time.Since(start).Seconds())
			return err
		}
	}
}

// Handler serves the registry in the Prometheus text format.
func (m *Metrics) Handler() echo.HandlerFunc {
	h := promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{Registry: m.reg})
	return echo.WrapHandler(h)
}

// ResidentEngines registers svc_engines_resident, read from fn at every scrape; the engines
// module feeds it through the composition root.
func (m *Metrics) ResidentEngines(fn func() float64) error {
	g := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "svc_engines_resident",
		Help: "Local inference engines resident (loaded) right now.",
	}, fn)
	err := m.reg.Register(g)
	if are, ok := err.(prometheus.AlreadyRegisteredError); ok {
		// A plane rebuilt in the same process feeds the gauge from its new engines.
		m.reg.Unregister(are.ExistingCollector)
		err = m.reg.Register(g)
	}
	return err
}

// Module mounts GET /metrics on a plane, with its OpenAPI fragment.
func (m *Metrics) Module() httpx.Module { return module{m} }

type module struct{ m *Metrics }

func (mod module) Register(g *echo.Group) { g.GET(Path, mod.m.Handler()) }

func (module) OpenAPI() []byte {
	return []byte(`{"paths":{"/metrics":{"get":{"summary":"Prometheus metrics of this process (text exposition format)","description":"svc_http_requests_total and svc_http_request_duration_seconds by plane and route; on the control plane svc_runs_total and svc_node_duration_seconds; on the inference plane svc_engines_resident; plus Go runtime and process series.","responses":{"200":{"description":"metrics","content":{"text/plain":{"schema":{"type":"string"}}}}}}}}}`)
}
