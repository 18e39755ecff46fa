package observability

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are the run and node series of the control plane.
type Metrics struct {
	runs  *prometheus.CounterVec
	nodes *prometheus.HistogramVec
}

// NewMetrics registers svc_runs_total{status} and svc_node_duration_seconds{kind,status} on reg.
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	m := &Metrics{
		runs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "svc_runs_total",
			Help: "Runs that ended (or parked), by final status: completed, failed, waiting.",
		}, []string{"status"}),
		nodes: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "svc_node_duration_seconds",
			Help:    "Node execution time by node kind and span status (ok, error, waiting).",
			Buckets: []float64{.0005, .001, .005, .01, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 300},
		}, []string{"kind", "status"}),
	}
	// A registry that already holds the series (a plane built twice in one process) keeps them.
	if err := reg.Register(m.runs); err != nil {
		are, ok := err.(prometheus.AlreadyRegisteredError)
		if !ok {
			return nil, err
		}
		if m.runs, ok = are.ExistingCollector.(*prometheus.CounterVec); !ok {
			return nil, err
		}
	}
	if err := reg.Register(m.nodes); err != nil {
		are, ok := err.(prometheus.AlreadyRegisteredError)
		if !ok {
			return nil, err
		}
		if m.nodes, ok = are.ExistingCollector.(*prometheus.HistogramVec); !ok {
			return nil, err
		}
	}
	return m, nil
}

func (m *Metrics) runFinished(status string) {
	if status == "" {
		status = "unknown"
	}
	m.runs.WithLabelValues(status).Inc()
}

func (m *Metrics) nodeFinished(kind, status string, d time.Duration) {
	m.nodes.WithLabelValues(kind, status).Observe(d.Seconds())
}
