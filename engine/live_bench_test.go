package engine_test

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/flashsale/flashsale"
	"github.com/flashsale/flashsale/engine"
)

// BenchmarkLiveFeed is one round of the live feed (the figures of a sale
// built, encoded and written to every subscriber) with 0, 1, 10 and 100
// subscribers reading the stream over loopback HTTP, each round waited
// for until every subscriber has read its event. The difference from 0
// subscribers, divided by their number, is what one subscriber costs:
// server and clients on the same processors, so an upper bound
// (docs/benchmarks/live-feed.md).
func BenchmarkLiveFeed(b *testing.B) {
	for _, n := range []int{0, 1, 10, 100} {
		b.Run(fmt.Sprintf("subscribers=%d", n), func(b *testing.B) {
			eng, err := engine.Open(context.Background(), engine.Config{DataDir: b.TempDir()})
			if err != nil {
				b.Fatal(err)
			}
			srv := httptest.NewServer(eng.Handler)
			b.Cleanup(func() { srv.Close(); eng.Close() })
			ctx := context.Background()
			if _, err := eng.Control.Create(ctx, &flashsale.Sale{SKU: "bench", Name: "Benchmark", InitialStock: 10_000,
				OpensAt: time.Now().Add(-time.Second), AdmissionPerSecond: 100}); err != nil {
				b.Fatal(err)
			}
			if err := eng.Warmer.WarmOnce(ctx); err != nil {
				b.Fatal(err)
			}
			got := make(chan struct{}, 1024)
			cctx, cancel := context.WithCancel(ctx)
			b.Cleanup(cancel)
			for range n {
				req, _ := http.NewRequestWithContext(cctx, "GET", srv.URL+"/admin/sales/bench/live", nil)
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					b.Fatal(err)
				}
				go func() {
					defer resp.Body.Close()
					rd := bufio.NewReaderSize(resp.Body, 64<<10)
					for {
						line, err := rd.ReadSlice('\n')
						if err != nil {
							return
						}
						if bytes.HasPrefix(line, []byte("event: sale")) {
							got <- struct{}{}
						}
					}
				}()
				<-got // subscribed: its first event read
			}
			for b.Loop() {
				if err := eng.API.LiveOnce(ctx); err != nil {
					b.Fatal(err)
				}
				for range n {
					<-got
				}
			}
		})
	}
}

// BenchmarkLiveFeedFanOut is BenchmarkLiveFeed without the network: the
// subscribers are the handler writing to memory, so what is measured is
// the server's own work per subscriber (a channel send, a goroutine woken,
// a write and a flush), not the kernel's or the clients'.
func BenchmarkLiveFeedFanOut(b *testing.B) {
	for _, n := range []int{0, 1, 10, 100} {
		b.Run(fmt.Sprintf("subscribers=%d", n), func(b *testing.B) {
			eng, err := engine.Open(context.Background(), engine.Config{DataDir: b.TempDir()})
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { eng.Close() })
			ctx := context.Background()
			if _, err := eng.Control.Create(ctx, &flashsale.Sale{SKU: "bench", Name: "Benchmark", InitialStock: 10_000,
				OpensAt: time.Now().Add(-time.Second), AdmissionPerSecond: 100}); err != nil {
				b.Fatal(err)
			}
			if err := eng.Warmer.WarmOnce(ctx); err != nil {
				b.Fatal(err)
			}
			got := make(chan struct{}, 1024)
			cctx, cancel := context.WithCancel(ctx)
			served := make(chan struct{}, n)
			b.Cleanup(func() {
				cancel()
				for range n {
					<-served
				}
			})
			for range n {
				req := httptest.NewRequestWithContext(cctx, "GET", "/admin/sales/bench/live", nil)
				req.RemoteAddr = "127.0.0.1:1234"
				w := &eventCounter{h: http.Header{}, got: got}
				go func() {
					defer func() { served <- struct{}{} }()
					eng.Handler.ServeHTTP(w, req)
				}()
				<-got
			}
			for b.Loop() {
				if err := eng.API.LiveOnce(ctx); err != nil {
					b.Fatal(err)
				}
				for range n {
					<-got
				}
			}
		})
	}
}

// eventCounter is a streaming ResponseWriter that keeps nothing and
// signals each event `sale` written.
type eventCounter struct {
	h   http.Header
	got chan<- struct{}
}

func (e *eventCounter) Header() http.Header { return e.h }
func (e *eventCounter) WriteHeader(int)     {}
func (e *eventCounter) Flush()              {}
func (e *eventCounter) Write(b []byte) (int, error) {
	if bytes.Contains(b, []byte("\nevent: sale\n")) {
		e.got <- struct{}{}
	}
	return len(b), nil
}

// BenchmarkAdminSaleView is one GET /admin/sales/{sku} through the handler:
// what a console polling the operator's view once a second would cost the
// server per watcher, record reads included, against the feed's.
func BenchmarkAdminSaleView(b *testing.B) {
	eng, err := engine.Open(context.Background(), engine.Config{DataDir: b.TempDir()})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { eng.Close() })
	ctx := context.Background()
	if _, err := eng.Control.Create(ctx, &flashsale.Sale{SKU: "bench", Name: "Benchmark", InitialStock: 10_000,
		OpensAt: time.Now().Add(-time.Second), AdmissionPerSecond: 100}); err != nil {
		b.Fatal(err)
	}
	if err := eng.Warmer.WarmOnce(ctx); err != nil {
		b.Fatal(err)
	}
	req := httptest.NewRequest("GET", "/admin/sales/bench", nil)
	req.RemoteAddr = "127.0.0.1:1234" // the operator routes answer loopback
	w := &discard{h: http.Header{}}
	b.ReportAllocs()
	for b.Loop() {
		clear(w.h)
		eng.Handler.ServeHTTP(w, req)
	}
}
