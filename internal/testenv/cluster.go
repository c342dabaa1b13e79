package testenv

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/rueidis"
)

// DefaultRedisClusterURL is the Redis Cluster that .ci/run starts (three
// masters with a replica each, on loopback ports 7101 to 7106, apart from
// the shared single Redis on 6379); TEST_REDIS_CLUSTER_URL overrides it.
// The form is the one --redis-url takes for a cluster: one seed in the
// host, the others as addr parameters.
const DefaultRedisClusterURL = "redis://127.0.0.1:7101?addr=127.0.0.1:7102&addr=127.0.0.1:7103"

// RedisClusterURL returns the URL of the test Redis Cluster.
func RedisClusterURL() string {
	if u := os.Getenv("TEST_REDIS_CLUSTER_URL"); u != "" {
		return u
	}
	return DefaultRedisClusterURL
}

// RedisCluster returns a cluster-aware client of the test Redis Cluster
// and a key prefix of t's own; every key under the prefix, on every
// master, is deleted when t ends. Where the cluster does not answer, or
// the URL names a Redis that is not a cluster, t is skipped (failed under
// CI).
func RedisCluster(t testing.TB) (rueidis.Client, string) {
	t.Helper()
	raw := RedisClusterURL()
	opt, err := rueidis.ParseURL(raw)
	if err != nil {
		t.Fatalf("parse TEST_REDIS_CLUSTER_URL: %v", err)
	}
	opt.DisableCache = true
	opt.Dialer.Timeout = time.Second
	client, err := rueidis.NewClient(opt)
	if err != nil {
		Unavailable(t, "the Redis Cluster at "+redact(raw)+" (TEST_REDIS_CLUSTER_URL)", err)
	}
	if err := clusterOK(client); err != nil {
		client.Close()
		Unavailable(t, "the Redis Cluster at "+redact(raw)+" (TEST_REDIS_CLUSTER_URL)", err)
	}
	prefix := "fstest:" + Suffix() + ":"
	t.Cleanup(func() {
		DeleteKeys(client, prefix)
		client.Close()
	})
	return client, prefix
}

// clusterOK reports why client is not connected to a healthy cluster, or
// nil.
func clusterOK(client rueidis.Client) error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	info, err := client.Do(ctx, client.B().ClusterInfo().Build()).ToString()
	if err != nil {
		return err
	}
	if !strings.Contains(info, "cluster_state:ok") {
		return errors.New("cluster_state is not ok")
	}
	return nil
}

// ClusterServers is a Redis Cluster of the test's own: redis-server
// processes on free loopback ports, keeping nothing on disk but their
// cluster configuration, that the test may kill to force a failover. It
// never touches the shared single Redis or the CI cluster. Safe for
// concurrent use.
type ClusterServers struct {
	t       testing.TB
	dir     string
	masters int

	mu    sync.Mutex
	nodes []*clusterNode
}

type clusterNode struct {
	port, bus int
	cmd       *exec.Cmd
}

func (n *clusterNode) addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(n.port)) }

// ClusterNodeTimeout is the cluster-node-timeout of StartRedisCluster's
// nodes: a master that does not answer for this long is failed over to
// its replica.
const ClusterNodeTimeout = time.Second

// StartRedisCluster starts masters redis-server processes with replicas
// replicas each, joins them into a cluster (redis-cli --cluster create)
// and waits until every slot is served; they are killed when t ends.
// Where redis-server or redis-cli is missing, t is skipped (failed under
// CI).
func StartRedisCluster(t testing.TB, masters, replicas int) *ClusterServers {
	t.Helper()
	for _, prog := range []string{"redis-server", "redis-cli"} {
		if _, err := exec.LookPath(prog); err != nil {
			Unavailable(t, prog, err)
		}
	}
	dir, err := os.MkdirTemp("", "flashsale-cluster-")
	if err != nil {
		t.Fatal(err)
	}
	c := &ClusterServers{t: t, dir: dir, masters: masters}
	t.Cleanup(func() {
		c.mu.Lock()
		for _, n := range c.nodes {
			if n.cmd != nil {
				_ = n.cmd.Process.Kill()
				_ = n.cmd.Wait()
			}
		}
		c.mu.Unlock()
		os.RemoveAll(dir)
	})
	var addrs []string
	// Every node's port and cluster bus port are taken at once, so that no
	// two are the same (a port freed and asked for again may come back);
	// the bus port is set apart, since port+10000 (the default) may be
	// past 65535 or taken.
	ports := freePorts(t, 2*masters*(1+replicas))
	for i := range masters * (1 + replicas) {
		n := &clusterNode{port: ports[2*i], bus: ports[2*i+1]}
		c.nodes = append(c.nodes, n)
		c.start(n)
		addrs = append(addrs, n.addr())
	}
	for _, n := range c.nodes {
		waitFor(t, "redis-server on "+n.addr(), func(ctx context.Context) error { return nodeDo(ctx, n.addr(), "PING") })
	}
	args := append([]string{"--cluster", "create"}, addrs...)
	args = append(args, "--cluster-replicas", strconv.Itoa(replicas), "--cluster-yes")
	if out, err := exec.Command("redis-cli", args...).CombinedOutput(); err != nil {
		t.Fatalf("redis-cli --cluster create: %v\n%s", err, out)
	}
	c.WaitHealthy()
	return c
}

func (c *ClusterServers) start(n *clusterNode) {
	c.t.Helper()
	cmd := exec.Command("redis-server", "--port", strconv.Itoa(n.port), "--bind", "127.0.0.1",
		"--cluster-enabled", "yes", "--cluster-port", strconv.Itoa(n.bus),
		"--cluster-config-file", filepath.Join(c.dir, fmt.Sprintf("nodes-%d.conf", n.port)),
		"--cluster-node-timeout", strconv.Itoa(int(ClusterNodeTimeout/time.Millisecond)),
		// A replica cut off from its master for a while may still take
		// over: the drill is about what the gate does after a failover,
		// not about whether Redis allows one.
		"--cluster-replica-validity-factor", "0",
		// The other masters keep serving their slots while one is down
		// (by default the whole cluster refuses every command until the
		// failover completes), so a sale's shards elsewhere keep selling.
		"--cluster-require-full-coverage", "no",
		"--save", "", "--appendonly", "no", "--dir", c.dir, "--daemonize", "no", "--loglevel", "warning")
	if err := cmd.Start(); err != nil {
		c.t.Fatalf("start redis-server: %v", err)
	}
	n.cmd = cmd
}

// URL is the cluster's URL in --redis-url's cluster form, naming every
// node as a seed.
func (c *ClusterServers) URL() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	u := "redis://" + c.nodes[0].addr()
	for i, n := range c.nodes[1:] {
		sep := "&"
		if i == 0 {
			sep = "?"
		}
		u += sep + "addr=" + n.addr()
	}
	return u
}

// Client returns a cluster-aware client of the cluster, closed when the
// test ends.
func (c *ClusterServers) Client() rueidis.Client {
	c.t.Helper()
	opt, err := rueidis.ParseURL(c.URL())
	if err != nil {
		c.t.Fatal(err)
	}
	opt.DisableCache = true
	opt.Dialer.Timeout = 500 * time.Millisecond
	opt.ConnWriteTimeout = 500 * time.Millisecond
	client, err := rueidis.NewClient(opt)
	if err != nil {
		c.t.Fatalf("connect to the test cluster: %v", err)
	}
	c.t.Cleanup(client.Close)
	return client
}

// MasterOf returns the address of the master that serves key's slot now.
func (c *ClusterServers) MasterOf(key string) string {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for _, addr := range c.liveAddrs() {
		slot, err := nodeInt(ctx, addr, "CLUSTER", "KEYSLOT", key)
		if err != nil {
			continue
		}
		nodes, err := nodeString(ctx, addr, "CLUSTER", "NODES")
		if err != nil {
			continue
		}
		if m := masterOfSlot(nodes, slot); m != "" {
			return m
		}
	}
	c.t.Fatalf("no node of the test cluster says who serves %q", key)
	return ""
}

// Kill kills the node at addr at once (SIGKILL), as a crash would; its
// replica takes over once the others see it gone (ClusterNodeTimeout).
func (c *ClusterServers) Kill(addr string) {
	c.t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, n := range c.nodes {
		if n.addr() == addr && n.cmd != nil {
			_ = n.cmd.Process.Kill()
			_ = n.cmd.Wait()
			n.cmd = nil
			return
		}
	}
	c.t.Fatalf("no running node at %s", addr)
}

// WaitFailover waits, for at most a minute, until the node killed at addr
// has been replaced: a live node serves its slots and the cluster is ok
// again.
func (c *ClusterServers) WaitFailover(killed string) {
	c.t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		err := c.failedOver(killed)
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("no failover of %s within a minute: %v", killed, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func (c *ClusterServers) failedOver(killed string) error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	live := c.liveAddrs()
	for _, addr := range live {
		info, err := nodeString(ctx, addr, "CLUSTER", "INFO")
		if err != nil {
			return err
		}
		if !strings.Contains(info, "cluster_state:ok") {
			return fmt.Errorf("%s: cluster_state not ok", addr)
		}
		nodes, err := nodeString(ctx, addr, "CLUSTER", "NODES")
		if err != nil {
			return err
		}
		masters := 0
		for _, line := range strings.Split(nodes, "\n") {
			f := strings.Fields(line)
			if len(f) < 8 {
				continue
			}
			addr, _, _ := strings.Cut(f[1], "@")
			serving := len(f) >= 9
			if killed != "" && addr == killed && serving {
				return fmt.Errorf("%s still sees %s serving slots", addr, killed)
			}
			if serving && strings.Contains(f[2], "master") && !strings.Contains(f[2], "fail") {
				masters++
			}
		}
		if masters < c.masters {
			return fmt.Errorf("%s sees %d masters serving slots, want %d", addr, masters, c.masters)
		}
	}
	return nil
}

// WaitHealthy waits, for at most a minute, until every live node says the
// cluster is ok and knows masters masters serving slots, and every replica
// is in sync with its master (so that what a test writes next reaches it).
func (c *ClusterServers) WaitHealthy() {
	c.t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		err := c.failedOver("")
		if err == nil {
			err = c.replicasInSync()
		}
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("the test cluster is not healthy within a minute: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func (c *ClusterServers) replicasInSync() error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	for _, addr := range c.liveAddrs() {
		info, err := nodeString(ctx, addr, "INFO", "replication")
		if err != nil {
			return err
		}
		if strings.Contains(info, "role:slave") && !strings.Contains(info, "master_link_status:up") {
			return fmt.Errorf("replica %s is not in sync with its master", addr)
		}
	}
	return nil
}

func (c *ClusterServers) liveAddrs() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []string
	for _, n := range c.nodes {
		if n.cmd != nil {
			out = append(out, n.addr())
		}
	}
	return out
}

// masterOfSlot reads CLUSTER NODES and returns the address of the live
// master whose ranges include slot, or "".
func masterOfSlot(nodes string, slot int64) string {
	for _, line := range strings.Split(nodes, "\n") {
		f := strings.Fields(line)
		if len(f) < 9 || !strings.Contains(f[2], "master") || strings.Contains(f[2], "fail") {
			continue
		}
		for _, r := range f[8:] {
			lo, hi, ok := strings.Cut(r, "-")
			if !ok {
				hi = lo
			}
			a, err1 := strconv.ParseInt(lo, 10, 64)
			b, err2 := strconv.ParseInt(hi, 10, 64)
			if err1 == nil && err2 == nil && a <= slot && slot <= b {
				addr, _, _ := strings.Cut(f[1], "@")
				return addr
			}
		}
	}
	return ""
}

// node opens a plain client of one node, for commands about that node.
func node(addr string) (rueidis.Client, error) {
	return rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{addr}, DisableCache: true,
		ForceSingleClient: true, DisableRetry: true, Dialer: net.Dialer{Timeout: 500 * time.Millisecond}})
}

func nodeDo(ctx context.Context, addr string, cmd ...string) error {
	c, err := node(addr)
	if err != nil {
		return err
	}
	defer c.Close()
	return c.Do(ctx, c.B().Arbitrary(cmd...).Build()).Error()
}

func nodeString(ctx context.Context, addr string, cmd ...string) (string, error) {
	c, err := node(addr)
	if err != nil {
		return "", err
	}
	defer c.Close()
	return c.Do(ctx, c.B().Arbitrary(cmd...).Build()).ToString()
}

func nodeInt(ctx context.Context, addr string, cmd ...string) (int64, error) {
	c, err := node(addr)
	if err != nil {
		return 0, err
	}
	defer c.Close()
	return c.Do(ctx, c.B().Arbitrary(cmd...).Build()).AsInt64()
}
