package testenv

import (
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Proxy is a TCP proxy in front of a server, for fault drills: Cut closes
// every connection and refuses new ones, Blackhole keeps connections open
// but forwards nothing (a partition), SetLatency delays what it forwards,
// Restore lets traffic through again. Safe for concurrent use.
type Proxy struct {
	ln     net.Listener
	target string

	// up and down are the latencies, in nanoseconds, added to what the
	// client sends and to what the server answers.
	up, down atomic.Int64

	mu    sync.Mutex
	mode  int // 0 pass, 1 cut, 2 blackhole
	conns map[net.Conn]struct{}
}

const (
	proxyPass = iota
	proxyCut
	proxyBlackhole
)

// NewProxy listens on a loopback port and forwards to target until t ends.
func NewProxy(t testing.TB, target string) *Proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("proxy listen: %v", err)
	}
	p := &Proxy{ln: ln, target: target, conns: map[net.Conn]struct{}{}}
	go p.accept()
	t.Cleanup(func() {
		ln.Close()
		p.closeAll()
	})
	return p
}

// Addr is the proxy's address.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Cut closes every connection and refuses new ones until Restore.
func (p *Proxy) Cut() {
	p.mu.Lock()
	p.mode = proxyCut
	p.mu.Unlock()
	p.closeAll()
}

// Blackhole stops forwarding without closing anything, until Restore.
func (p *Proxy) Blackhole() {
	p.mu.Lock()
	p.mode = proxyBlackhole
	p.mu.Unlock()
}

// Restore lets traffic through again (connections cut stay cut; clients
// reconnect). It leaves the latency as it is.
func (p *Proxy) Restore() {
	p.mu.Lock()
	p.mode = proxyPass
	p.mu.Unlock()
}

// SetLatency delays every byte the client sends by up and every byte the
// server answers by down, from now on, keeping each stream in order: a
// slow network rather than a lossy one. Zero removes the delay.
func (p *Proxy) SetLatency(up, down time.Duration) {
	p.up.Store(int64(up))
	p.down.Store(int64(down))
}

func (p *Proxy) closeAll() {
	p.mu.Lock()
	for c := range p.conns {
		c.Close()
	}
	p.conns = map[net.Conn]struct{}{}
	p.mu.Unlock()
}

func (p *Proxy) track(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.mode == proxyCut {
		return false
	}
	p.conns[c] = struct{}{}
	return true
}

func (p *Proxy) passing() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.mode == proxyPass
}

func (p *Proxy) accept() {
	for {
		client, err := p.ln.Accept()
		if err != nil {
			return
		}
		if !p.track(client) {
			client.Close()
			continue
		}
		server, err := net.Dial("tcp", p.target)
		if err != nil || !p.track(server) {
			client.Close()
			if server != nil {
				server.Close()
			}
			continue
		}
		go p.pipe(client, server, &p.down)
		go p.pipe(server, client, &p.up)
	}
}

// chunk is bytes read from one side, to be written to the other once due.
type chunk struct {
	due  time.Time
	data []byte
}

// pipe copies src to dst while the proxy passes traffic, each read held
// back by the latency in effect when it was read; in a blackhole it reads
// and drops. The reader and the writer are separate goroutines joined by a
// queue, so a delay never slows the reading and the stream stays in order.
func (p *Proxy) pipe(dst, src net.Conn, latency *atomic.Int64) {
	queue := make(chan chunk, 1024)
	go func() {
		defer dst.Close()
		for c := range queue {
			if d := time.Until(c.due); d > 0 {
				time.Sleep(d)
			}
			if _, err := dst.Write(c.data); err != nil {
				src.Close()
				for range queue { // drain, so the reader never blocks
				}
				return
			}
		}
	}()
	defer src.Close()
	defer close(queue)
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 && p.passing() {
			data := make([]byte, n)
			copy(data, buf[:n])
			queue <- chunk{due: time.Now().Add(time.Duration(latency.Load())), data: data}
		}
		if err != nil {
			return
		}
	}
}
