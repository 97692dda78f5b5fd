package rlock_test

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	rlock "github.com/rlock-dev/rlock/clients/go/v4"
)

func makeCerts(t *testing.T) *tlsFiles {
	dir := t.TempDir()
	run := func(args ...string) {
		cmd := exec.Command("openssl", args...)
		cmd.Dir = dir
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("openssl %v: %v\n%s", args, err, out)
		}
	}
	for _, ca := range []string{"ca", "other-ca"} {
		run("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", ca+".key", "-out", ca+".crt", "-days", "2", "-subj", "/CN=rlock "+ca)
	}
	run("req", "-newkey", "rsa:2048", "-nodes", "-keyout", "server.key", "-out", "server.csr", "-subj", "/CN=localhost")
	if err := os.WriteFile(filepath.Join(dir, "ext"), []byte("subjectAltName=DNS:localhost,IP:127.0.0.1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	run("x509", "-req", "-in", "server.csr", "-CA", "ca.crt", "-CAkey", "ca.key", "-CAcreateserial", "-out", "server.crt", "-days", "2", "-extfile", "ext")
	p := func(n string) string { return filepath.Join(dir, n) }
	return &tlsFiles{ca: p("ca.crt"), cert: p("server.crt"), key: p("server.key"), other: p("other-ca.crt")}
}

func tlsClient(t *testing.T, port int, caFile string) *redis.Client {
	opt, err := redis.ParseURL(fmt.Sprintf("rediss://localhost:%d", port))
	if err != nil {
		t.Fatal(err)
	}
	pem, err := os.ReadFile(caFile)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(pem)
	opt.TLSConfig = &tls.Config{RootCAs: pool, ServerName: "localhost", MinVersion: tls.VersionTLS12}
	opt.DialTimeout = time.Second
	opt.MaxRetries = -1
	c := redis.NewClient(opt)
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func TestC19_TLS(t *testing.T) {
	certs := makeCerts(t)
	for _, flavor := range flavors(t) {
		t.Run(flavor, func(t *testing.T) {
			if !hasTLS(t, flavor) {
				t.Skipf("the %s server binary here is built without TLS", flavor)
			}
			s := startServer(t, flavor, serverOpts{tls: certs})
			locks := newLocks(t, tlsClient(t, s.port, certs.ca))
			h, err := locks.Lock("tls:k", rlock.Fenced(), rlock.Wait(time.Second)).Acquire(bg())
			if err != nil || h.Token() < 1 {
				t.Fatal(err)
			}
			if free, err := h.Release(bg()); err != nil || !free {
				t.Fatal(free, err)
			}
			wrong := newLocks(t, tlsClient(t, s.port, certs.other), rlock.WithResponseTimeout(time.Second))
			_, err = wrong.Lock("tls:k").Acquire(bg())
			if err == nil || !strings.Contains(err.Error(), "certificate") {
				t.Fatalf("a wrong CA: %v", err)
			}
		})
	}
}

// hasTLS: whether the server binary links TLS in (Debian's Redis 7.0 does).
func hasTLS(t *testing.T, flavor string) bool {
	out, _ := exec.Command("ldd", binary(t, flavor)).Output()
	if strings.Contains(string(out), "libssl") {
		return true
	}
	b, _ := os.ReadFile(binary(t, flavor))
	return strings.Contains(string(b), "SSL_CTX_new")
}

// cluster is a 3-primary cluster, as module-tests/src/cluster.rs starts one.
func startCluster(t *testing.T, flavor string) []*server {
	var nodes []*server
	for i := 0; i < 3; i++ {
		nodes = append(nodes, startServer(t, flavor, serverOpts{config: []string{"cluster-enabled", "yes", "cluster-node-timeout", "3000",
			"cluster-require-full-coverage", "no", "cluster-config-file", fmt.Sprintf("nodes-%d.conf", i)}}))
	}
	per := 16384 / 3
	for i, n := range nodes {
		c := n.client(t)
		from, to := i*per, (i+1)*per-1
		if i == 2 {
			to = 16383
		}
		if err := c.Do(bg(), "CLUSTER", "ADDSLOTSRANGE", from, to).Err(); err != nil {
			t.Fatal(err)
		}
	}
	first := nodes[0].client(t)
	for _, n := range nodes[1:] {
		if err := first.ClusterMeet(bg(), "127.0.0.1", fmt.Sprint(n.port)).Err(); err != nil {
			t.Fatal(err)
		}
	}
	if !eventually(30*time.Second, func() bool {
		for _, n := range nodes {
			info, _ := n.client(t).ClusterInfo(bg()).Result()
			if !strings.Contains(info, "cluster_state:ok") || !strings.Contains(info, "cluster_known_nodes:3") {
				return false
			}
		}
		return true
	}) {
		t.Fatal("the cluster did not settle")
	}
	return nodes
}

// clusterClient is the application's go-redis client of the cluster, closed when t ends.
func clusterClient(t *testing.T, nodes []*server) *redis.ClusterClient {
	var addrs []string
	for _, n := range nodes {
		addrs = append(addrs, n.addr())
	}
	cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs})
	t.Cleanup(func() { _ = cc.Close() })
	return cc
}

func TestC14_Cluster(t *testing.T) {
	for _, flavor := range flavors(t) {
		t.Run(flavor, func(t *testing.T) {
			nodes := startCluster(t, flavor)
			cc := clusterClient(t, nodes)
			var uc redis.UniversalClient = cc
			locks := newLocks(t, uc)
			// C01 on keys of every primary.
			for i := 0; i < 6; i++ {
				k := fmt.Sprintf("orders:%d", i)
				lock := locks.Lock(k)
				a, err := lock.Acquire(bg())
				if err != nil {
					t.Fatal(err)
				}
				b, err := lock.Acquire(bg())
				if err != nil || b.Count() != 2 {
					t.Fatal(err)
				}
				if _, err := locks.Lock(k).Acquire(bg()); !errors.Is(err, rlock.ErrNotAcquired) {
					t.Fatalf("second owner: %v", err)
				}
				_, _ = b.Release(bg())
				if free, err := a.Release(bg()); err != nil || !free {
					t.Fatal(free, err)
				}
			}
			// C02: a waiter blocked in the server is served at the release.
			holder, err := locks.Lock("queue").Acquire(bg())
			if err != nil {
				t.Fatal(err)
			}
			got := make(chan time.Time, 1)
			go func() {
				h, err := locks.Lock("queue", rlock.Wait(5*time.Second)).Acquire(bg())
				if err != nil {
					t.Error(err)
					got <- time.Time{}
					return
				}
				got <- time.Now()
				_, _ = h.Release(bg())
			}()
			eventually(2*time.Second, func() bool { w, _ := locks.Waiters(bg(), "queue"); return len(w) == 1 })
			released := time.Now()
			_, _ = holder.Release(bg())
			if d := (<-got).Sub(released); d < 0 || d > 50*time.Millisecond {
				t.Fatalf("granted %v after the release", d)
			}
			// C12 under one hash tag per run.
			otherSynchronizers(t, locks, "{c12}")
			// Multi-key names in different slots are refused before anything is sent.
			if _, err := locks.MultiLock([]string{"a", "b"}).Acquire(bg()); !errors.Is(err, rlock.ErrInvalidArgument) {
				t.Fatalf("cross-slot names: %v", err)
			}
			stats, err := locks.Stats(bg())
			if err != nil || len(stats) != 3 {
				t.Fatalf("stats of %d primaries: %v", len(stats), err)
			}
		})
	}
}

// While a slot moves (MIGRATING on its primary, IMPORTING on another node), a key of it that
// its primary no longer has is answered with ASK: the client sends ASKING and the command to
// the node the ASK names, for a try, a wait in the server, a renewal and a release.
func TestClusterAskRedirection(t *testing.T) {
	for _, flavor := range flavors(t) {
		t.Run(flavor, func(t *testing.T) {
			nodes := startCluster(t, flavor)
			k := "moving"
			slot, err := nodes[0].client(t).ClusterKeySlot(bg(), k).Result()
			if err != nil {
				t.Fatal(err)
			}
			source, target := nodes[int(slot)/(16384/3)], nodes[(int(slot)/(16384/3)+1)%3]
			id := func(s *server) string {
				v, err := s.client(t).Do(bg(), "CLUSTER", "MYID").Text()
				if err != nil {
					t.Fatal(err)
				}
				return v
			}
			if err := target.client(t).Do(bg(), "CLUSTER", "SETSLOT", slot, "IMPORTING", id(source)).Err(); err != nil {
				t.Fatal(err)
			}
			if err := source.client(t).Do(bg(), "CLUSTER", "SETSLOT", slot, "MIGRATING", id(target)).Err(); err != nil {
				t.Fatal(err)
			}
			// The key as the node the ASK names has it (a plain read there would be MOVED).
			onTarget := func() int64 {
				var n *redis.IntCmd
				_, err := target.client(t).Pipelined(bg(), func(p redis.Pipeliner) error {
					p.Do(bg(), "ASKING")
					n = p.Exists(bg(), k)
					return nil
				})
				if err != nil {
					t.Fatal(err)
				}
				return n.Val()
			}
			locks := newLocks(t, clusterClient(t, nodes), rlock.WithWatchdogLease(900*time.Millisecond))
			held, err := locks.Lock(k).Acquire(bg())
			if err != nil {
				t.Fatalf("a try on a moving slot: %v", err)
			}
			if onTarget() != 1 {
				t.Fatal("the lock is not on the node the ASK named")
			}
			waited := make(chan error, 1)
			go func() {
				h, err := locks.Lock(k, rlock.Wait(5*time.Second)).Acquire(bg())
				if err != nil {
					waited <- fmt.Errorf("acquire: %w", err)
					return
				}
				if _, err := h.Release(bg()); err != nil {
					waited <- fmt.Errorf("release: %w", err)
					return
				}
				waited <- nil
			}()
			time.Sleep(1500 * time.Millisecond) // renewals at 300 ms and 600 ms of each 900 ms lease
			if err := held.Err(); err != nil {
				t.Fatalf("renewals on a moving slot: %v", err)
			}
			if free, err := held.Release(bg()); err != nil || !free {
				t.Fatalf("release on a moving slot: %v %v", free, err)
			}
			if err := <-waited; err != nil {
				t.Fatalf("a wait on a moving slot: %v", err)
			}
			if onTarget() != 0 {
				t.Fatal("still held")
			}
		})
	}
}
