package testenv

import (
	"io"
	"net"
	"sync"
	"testing"
)

// Proxy is a TCP proxy in front of a server, for cutting the connection to
// it in a fault drill: Cut closes every connection and refuses new ones,
// Blackhole keeps connections open but forwards nothing (a partition),
// Restore lets traffic through again.
type Proxy struct {
	ln     net.Listener
	target string

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
// reconnect).
func (p *Proxy) Restore() {
	p.mu.Lock()
	p.mode = proxyPass
	p.mu.Unlock()
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
		go p.pipe(client, server)
		go p.pipe(server, client)
	}
}

// pipe copies src to dst while the proxy passes traffic; in a blackhole it
// reads and drops.
func (p *Proxy) pipe(dst, src net.Conn) {
	defer dst.Close()
	defer src.Close()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 && p.passing() {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			if err != io.EOF {
				return
			}
			return
		}
	}
}
