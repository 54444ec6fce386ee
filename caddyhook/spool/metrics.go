package spool

import (
	"errors"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
)

// Metric descriptors; values are read from Stats at scrape time.
var (
	descDepth       = prometheus.NewDesc("caddy_hooks_spool_depth", "Events queued for delivery, in flight included.", nil, nil)
	descBytes       = prometheus.NewDesc("caddy_hooks_spool_bytes", "Logical bytes held by the spool (queued and dead letters).", nil, nil)
	descMaxBytes    = prometheus.NewDesc("caddy_hooks_spool_max_bytes", "Configured spool capacity in bytes.", nil, nil)
	descDead        = prometheus.NewDesc("caddy_hooks_spool_dead_letters", "Dead letters currently held.", nil, nil)
	descOldestAge   = prometheus.NewDesc("caddy_hooks_spool_oldest_age_seconds", "Age of the earliest-accepted queued event.", nil, nil)
	descDeliveries  = prometheus.NewDesc("caddy_hooks_spool_deliveries_total", "Events delivered to the gateway.", nil, nil)
	descRetries     = prometheus.NewDesc("caddy_hooks_spool_retries_total", "Failed delivery attempts scheduled for retry.", nil, nil)
	descDeadLetters = prometheus.NewDesc("caddy_hooks_spool_dead_letters_total", "Events moved to the dead-letter bucket.", nil, nil)
	descAppended    = prometheus.NewDesc("caddy_hooks_spool_appended_total", "Events durably accepted into the spool.", nil, nil)
	descCommits     = prometheus.NewDesc("caddy_hooks_spool_commits_total", "Spool write transactions (each one fsync).", nil, nil)
)

// Collector exports a Store's Stats as Prometheus metrics computed at scrape
// time. The store it reads can be swapped with Bind, so one registration
// survives config reloads.
type Collector struct {
	store atomic.Pointer[Store]
}

// NewCollector returns a Collector reading s (nil: reports nothing until Bind).
func NewCollector(s *Store) *Collector {
	c := new(Collector)
	c.Bind(s)
	return c
}

// Bind makes c read s from the next scrape on (nil: report nothing).
func (c *Collector) Bind(s *Store) { c.store.Store(s) }

// Describe implements prometheus.Collector.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descDepth, descBytes, descMaxBytes, descDead, descOldestAge,
		descDeliveries, descRetries, descDeadLetters, descAppended, descCommits} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	s := c.store.Load()
	if s == nil {
		return
	}
	st := s.Stats()
	gauge := func(d *prometheus.Desc, v float64) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v)
	}
	counter := func(d *prometheus.Desc, v uint64) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v))
	}
	gauge(descDepth, float64(st.Depth))
	gauge(descBytes, float64(st.Bytes))
	gauge(descMaxBytes, float64(st.MaxBytes))
	gauge(descDead, float64(st.Dead))
	gauge(descOldestAge, st.OldestAge.Seconds())
	counter(descDeliveries, st.Delivered)
	counter(descRetries, st.Retries)
	counter(descDeadLetters, st.DeadLetters)
	counter(descAppended, st.Appended)
	counter(descCommits, st.Commits)
}

// RegisterMetrics registers a Collector for s on reg. If a spool Collector is
// already registered there (a config reload), it is rebound to s instead, so
// calling this once per provisioning is safe.
func RegisterMetrics(reg prometheus.Registerer, s *Store) error {
	err := reg.Register(NewCollector(s))
	if are, ok := errors.AsType[prometheus.AlreadyRegisteredError](err); ok {
		if existing, ok := are.ExistingCollector.(*Collector); ok {
			existing.Bind(s)
			return nil
		}
	}
	return err
}
