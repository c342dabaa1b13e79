package httpapi

import (
	"context"
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	dto "github.com/prometheus/client_model/go"
)

// SKULabel is the label a per-sale series carries its sale's SKU in. A
// series with it is shown without the admin token only once its sale is
// published (see PublicMetrics).
const SKULabel = "sku"

// metricsHandler serves /metrics on the main listener, behind the admin
// guard: every series to a request that carried the admin token, only the
// public ones where none is configured (the guard then let a loopback
// request through, one that any user or proxy of this host can send).
func (s *Server) metricsHandler() http.Handler {
	if s.cfg.AdminToken != "" {
		return promhttp.HandlerFor(s.cfg.Metrics.Registry, promhttp.HandlerOpts{})
	}
	return s.PublicMetrics()
}

// PublicMetrics returns a handler of the Prometheus text that anyone who
// reaches it may read, for a listener without the admin token (--metrics-addr):
// every series, except those of a sale not yet published. A sale is
// published once it opens (its opensAt has passed): before that, a shop may
// keep a drop secret, and though GET /sale/{sku} answers whoever already
// knows the SKU, nothing public lists SKUs, and a scrape would list them all
// with their live figures. A series of a SKU this server does not know
// (an edge knows none: it has no catalog) is left out too. It returns nil
// without Config.Metrics.
//
// The decision is per SKU, the catalog's current sale for it, read at each
// scrape through the catalog's cache: at most one record read per SKU per
// catalog TTL.
func (s *Server) PublicMetrics() http.Handler {
	if s.cfg.Metrics == nil {
		return nil
	}
	return promhttp.HandlerFor(publishedOnly{g: s.cfg.Metrics.Registry, published: s.published}, promhttp.HandlerOpts{})
}

// published reports whether the SKU's current sale has opened.
func (s *Server) published(sku string) bool {
	if s.cfg.Catalog == nil {
		return false
	}
	sale, err := s.cfg.Catalog.BySKU(context.Background(), sku)
	return err == nil && !s.cfg.Now().Before(sale.OpensAt)
}

// publishedOnly gathers g's series but those labelled with the SKU of a
// sale not published.
type publishedOnly struct {
	g         prometheus.Gatherer
	published func(sku string) bool
}

func (p publishedOnly) Gather() ([]*dto.MetricFamily, error) {
	families, err := p.g.Gather()
	decided := map[string]bool{}
	kept := families[:0]
	for _, f := range families {
		series := f.Metric[:0]
		for _, m := range f.Metric {
			if sku, ok := labelOf(m, SKULabel); ok {
				pub, seen := decided[sku]
				if !seen {
					pub = p.published(sku)
					decided[sku] = pub
				}
				if !pub {
					continue
				}
			}
			series = append(series, m)
		}
		f.Metric = series
		if len(series) > 0 {
			kept = append(kept, f)
		}
	}
	return kept, err
}

func labelOf(m *dto.Metric, name string) (string, bool) {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue(), true
		}
	}
	return "", false
}
