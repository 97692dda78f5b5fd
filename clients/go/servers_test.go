package rlock_test

// Servers for the tests: Redis 7.0, Redis 8.2 and Valkey 9 (REDIS_SERVER, REDIS8_SERVER,
// VALKEY_SERVER), started with the module (RLOCK_MODULE) on free ports in temporary
// directories, and always killed. RLOCK_FLAVORS (redis, redis8, valkey, all) narrows them.

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

func flavors(t testing.TB) []string {
	s := strings.TrimSpace(os.Getenv("RLOCK_FLAVORS"))
	if s == "" || s == "all" {
		return []string{"redis", "redis8", "valkey"}
	}
	var out []string
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		switch f {
		case "all":
			return []string{"redis", "redis8", "valkey"}
		case "redis", "redis8", "valkey":
			out = append(out, f)
		case "":
		default:
			t.Fatalf("RLOCK_FLAVORS: unknown flavor %q (redis, redis8, valkey, all)", f)
		}
	}
	return out
}

func isFile(p string) bool {
	st, err := os.Stat(p)
	return p != "" && err == nil && st.Mode().IsRegular()
}

func binary(t testing.TB, flavor string) string {
	var p string
	switch flavor {
	case "redis":
		p = os.Getenv("REDIS_SERVER")
		if p == "" {
			p, _ = exec.LookPath("redis-server")
		}
	case "redis8":
		p = os.Getenv("REDIS8_SERVER")
	case "valkey":
		p = os.Getenv("VALKEY_SERVER")
		if p == "" {
			p, _ = exec.LookPath("valkey-server")
		}
	}
	if !isFile(p) {
		t.Fatalf("%s server not found: set REDIS_SERVER / REDIS8_SERVER / VALKEY_SERVER", flavor)
	}
	return p
}

func modulePath(t testing.TB) string {
	for _, p := range []string{os.Getenv("RLOCK_MODULE"), "../../target/debug/librlock.so", os.Getenv("RLOCK_MODULE_PREBUILT")} {
		if isFile(p) {
			abs, _ := filepath.Abs(p)
			return abs
		}
	}
	t.Fatal("rlock module not found: cargo build -p rlock, or set RLOCK_MODULE")
	return ""
}

func freePort(t testing.TB) int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

type server struct {
	flavor string
	port   int
	dir    string
	cmd    *exec.Cmd
	exited chan struct{}
	args   []string
}

type serverOpts struct {
	replicaOf int
	aof       bool
	tls       *tlsFiles
	config    []string // name, value pairs
}

type tlsFiles struct{ ca, cert, key, other string }

var (
	runningMu sync.Mutex
	running   = map[*server]bool{}
)

func startServer(t testing.TB, flavor string, o serverOpts) *server {
	t.Helper()
	dir, err := os.MkdirTemp("", "rlock-go-"+flavor+"-")
	if err != nil {
		t.Fatal(err)
	}
	s := &server{flavor: flavor, dir: dir}
	for attempt := 0; attempt < 8; attempt++ {
		s.port = freePort(t)
		s.args = []string{"--port", fmt.Sprint(s.port), "--bind", "127.0.0.1", "--daemonize", "no", "--save", "",
			"--appendonly", map[bool]string{true: "yes", false: "no"}[o.aof], "--repl-diskless-sync-delay", "0",
			"--dir", dir, "--logfile", filepath.Join(dir, "server.log"), "--enable-debug-command", "yes"}
		if o.replicaOf != 0 {
			s.args = append(s.args, "--replicaof", "127.0.0.1", fmt.Sprint(o.replicaOf))
		}
		if o.tls != nil {
			s.args = append(s.args, "--port", "0", "--tls-port", fmt.Sprint(s.port), "--tls-cert-file", o.tls.cert,
				"--tls-key-file", o.tls.key, "--tls-ca-cert-file", o.tls.ca, "--tls-auth-clients", "no")
		}
		for i := 0; i+1 < len(o.config); i += 2 {
			s.args = append(s.args, "--"+o.config[i], o.config[i+1])
		}
		s.args = append(s.args, "--loadmodule", modulePath(t))
		if s.spawn(t, o.tls != nil) {
			return s
		}
	}
	t.Fatalf("%s did not start:\n%s", flavor, s.log())
	return nil
}

func (s *server) spawn(t testing.TB, tls bool) bool {
	s.cmd = exec.Command(binary(t, s.flavor), s.args...)
	if err := s.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	s.exited = make(chan struct{})
	go func(c *exec.Cmd, ch chan struct{}) { _ = c.Wait(); close(ch) }(s.cmd, s.exited)
	runningMu.Lock()
	running[s] = true
	runningMu.Unlock()
	if t, ok := t.(*testing.T); ok {
		t.Cleanup(s.stop)
	}
	for i := 0; i < 400; i++ {
		select {
		case <-s.exited:
			return false
		case <-time.After(10 * time.Millisecond):
		}
		c, err := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", s.port), 200*time.Millisecond)
		if err == nil {
			if tls {
				c.Close()
				time.Sleep(100 * time.Millisecond)
				return true
			}
			c.SetDeadline(time.Now().Add(500 * time.Millisecond))
			_, _ = c.Write([]byte("PING\r\n"))
			buf := make([]byte, 16)
			n, _ := c.Read(buf)
			c.Close()
			if strings.HasPrefix(string(buf[:n]), "+PONG") {
				return true
			}
		}
	}
	s.stop()
	return false
}

// restart stops the server and starts it again with the same arguments (the same port).
func (s *server) restart(t testing.TB) {
	s.kill()
	if !s.spawn(t, false) {
		t.Fatalf("%s did not restart:\n%s", s.flavor, s.log())
	}
}

func (s *server) kill() {
	if s.cmd != nil && s.cmd.Process != nil {
		_ = s.cmd.Process.Kill()
		<-s.exited
	}
	runningMu.Lock()
	delete(running, s)
	runningMu.Unlock()
}

func (s *server) stop() {
	s.kill()
	_ = os.RemoveAll(s.dir)
}

func (s *server) log() string {
	b, _ := os.ReadFile(filepath.Join(s.dir, "server.log"))
	return string(b)
}

func (s *server) addr() string { return fmt.Sprintf("127.0.0.1:%d", s.port) }

// client is a go-redis client on the server, closed at the test's end. Its retries are off,
// as on rlock's own connections: the tests kill clients, and a silent resend would hide it.
func (s *server) client(t testing.TB, o ...func(*redis.Options)) *redis.Client {
	opt := &redis.Options{Addr: s.addr(), MaxRetries: -1}
	for _, f := range o {
		f(opt)
	}
	c := redis.NewClient(opt)
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// shared servers, one per flavor, for the tests that need nothing special; killed by TestMain.
var (
	sharedMu sync.Mutex
	shared   = map[string]*server{}
)

type mainT struct{ testing.TB }

func sharedServer(t *testing.T, flavor string) *server {
	sharedMu.Lock()
	defer sharedMu.Unlock()
	if s, ok := shared[flavor]; ok {
		return s
	}
	s := startServer(mainT{t}, flavor, serverOpts{})
	shared[flavor] = s
	return s
}

func TestMain(m *testing.M) {
	code := m.Run()
	runningMu.Lock()
	all := make([]*server, 0, len(running))
	for s := range running {
		all = append(all, s)
	}
	runningMu.Unlock()
	for _, s := range all {
		s.stop()
	}
	os.Exit(code)
}

// onEachServer runs f as one subtest per flavor, on the shared server.
func onEachServer(t *testing.T, f func(t *testing.T, s *server)) {
	for _, flavor := range flavors(t) {
		t.Run(flavor, func(t *testing.T) { f(t, sharedServer(t, flavor)) })
	}
}

// key is a name unique to the test.
func key(t *testing.T, suffix string) string {
	return strings.ReplaceAll(t.Name(), "/", ":") + ":" + suffix
}

func bg() context.Context { return context.Background() }

// eventually polls cond until it holds or d passes.
func eventually(d time.Duration, cond func() bool) bool {
	until := time.Now().Add(d)
	for time.Now().Before(until) {
		if cond() {
			return true
		}
		time.Sleep(5 * time.Millisecond)
	}
	return cond()
}
