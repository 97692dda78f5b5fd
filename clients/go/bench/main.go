// Command bench (make bench-go) measures the Go client against raw commands on go-redis,
// redsync's Mutex and bsm/redislock, on one server with the module: the server on core 0,
// this process on core 1 (taskset). Every figure is a median of rounds and a ratio to a
// baseline measured in the same run on the same server.
//
//	uncontended: acquire+release pairs per second, one goroutine;
//	contended: 32 goroutines on one lock, each looping acquire/release with hold 0: hand-offs
//	per second (grants to another goroutine than the last holder), acquisitions per second,
//	the hand-off p50 and p99 (a release to the next grant), and the fairness (min/max
//	acquisitions per goroutine).
//
// Usage: go run . [-flavor redis|redis8|valkey] [-rounds N] [-seconds S] [-json FILE]
//
// -json FILE is the results file, in the schema rlock-bench/1 of bench/report/README.md.
package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"math"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/bsm/redislock"
	"github.com/go-redsync/redsync/v4"
	"github.com/go-redsync/redsync/v4/redis/goredis/v9"
	"github.com/redis/go-redis/v9"

	rlock "github.com/rlock-dev/rlock/clients/go/v4"
)

const workers = 32

var (
	flavor  = flag.String("flavor", "redis", "redis, redis8 or valkey")
	rounds  = flag.Int("rounds", 5, "rounds; each figure is the median")
	seconds = flag.Float64("seconds", 1.5, "seconds per scenario and round")
	out     = flag.String("json", filepath.Join(os.TempDir(), "rlock-bench-go.json"), "where to write the results")
)

func main() {
	flag.Parse()
	if os.Getenv("RLOCK_BENCH_PINNED") == "" {
		// Pin this process on core 1; the server goes on core 0.
		cmd := exec.Command("taskset", append([]string{"-c", "1", os.Args[0]}, os.Args[1:]...)...)
		cmd.Stdout, cmd.Stderr, cmd.Env = os.Stdout, os.Stderr, append(os.Environ(), "RLOCK_BENCH_PINNED=1")
		if err := cmd.Run(); err != nil {
			var ee *exec.ExitError
			if errors.As(err, &ee) {
				os.Exit(ee.ExitCode())
			}
			fail(err)
		}
		return
	}
	started := time.Now()
	loadBefore := loadAverage()
	srv := startServer()
	defer srv.stop()
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	go func() { <-sigs; srv.stop(); os.Exit(1) }()
	run(srv.addr, started, loadBefore)
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "bench:", err)
	os.Exit(1)
}

type server struct {
	cmd  *exec.Cmd
	addr string
	dir  string
}

func startServer() *server {
	bin := map[string]string{"redis": os.Getenv("REDIS_SERVER"), "redis8": os.Getenv("REDIS8_SERVER"), "valkey": os.Getenv("VALKEY_SERVER")}[*flavor]
	if bin == "" {
		if p, err := exec.LookPath(map[string]string{"redis": "redis-server", "valkey": "valkey-server"}[*flavor]); err == nil {
			bin = p
		}
	}
	module := os.Getenv("RLOCK_MODULE")
	if module == "" {
		module = os.Getenv("RLOCK_MODULE_PREBUILT")
	}
	if bin == "" || module == "" {
		fail(fmt.Errorf("set REDIS_SERVER / REDIS8_SERVER / VALKEY_SERVER and RLOCK_MODULE"))
	}
	module, _ = filepath.Abs(module)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fail(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	dir, _ := os.MkdirTemp("", "rlock-go-bench-")
	cmd := exec.Command("taskset", "-c", "0", bin, "--port", fmt.Sprint(port), "--bind", "127.0.0.1", "--save", "",
		"--appendonly", "no", "--dir", dir, "--logfile", filepath.Join(dir, "server.log"), "--loadmodule", module)
	if err := cmd.Start(); err != nil {
		fail(err)
	}
	s := &server{cmd: cmd, addr: fmt.Sprintf("127.0.0.1:%d", port), dir: dir}
	c := redis.NewClient(&redis.Options{Addr: s.addr})
	defer c.Close()
	for i := 0; i < 200 && c.Ping(context.Background()).Err() != nil; i++ {
		time.Sleep(25 * time.Millisecond)
	}
	return s
}

func (s *server) stop() {
	_ = s.cmd.Process.Kill()
	_, _ = s.cmd.Process.Wait()
	_ = os.RemoveAll(s.dir)
}

func median(xs []float64) float64 {
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	if len(s) == 0 {
		return math.NaN()
	}
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// percentile is the q-th of xs (nearest rank), NaN when there are none.
func percentile(xs []float64, q float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	return s[min(len(s)-1, int(float64(len(s))*q))]
}

func duration() time.Duration { return time.Duration(*seconds * float64(time.Second)) }

// uncontended runs pair in one loop: pairs per second.
func uncontended(pair func(ctx context.Context) error) float64 {
	ctx := context.Background()
	end := time.Now().Add(duration())
	n := 0
	start := time.Now()
	for time.Now().Before(end) {
		if err := pair(ctx); err != nil {
			fail(err)
		}
		n++
	}
	return float64(n) / time.Since(start).Seconds()
}

// contender is one goroutine's acquire and release; acquire reports false when it did not
// get the lock this time (a baseline's retry ran out), and is called again.
type contender struct {
	acquire func(ctx context.Context) (bool, error)
	release func(ctx context.Context) error
}

// contendedResult is one round of the contended scenario.
type contendedResult struct {
	Handoffs     float64 // per second
	Acquisitions float64 // per second
	Fairness     float64 // min/max acquisitions per goroutine
	P50ms, P99ms float64 // a release to the next grant to another goroutine
}

func contended(newContender func(i int) contender) contendedResult {
	ctx, cancel := context.WithTimeout(context.Background(), duration())
	defer cancel()
	var mu sync.Mutex
	counts := make([]int, workers)
	var gapsMs []float64
	lastHolder, handoffs := -1, 0
	var lastRelease time.Time
	var wg sync.WaitGroup
	start := time.Now()
	for i := 0; i < workers; i++ {
		c := newContender(i)
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			for ctx.Err() == nil {
				ok, err := c.acquire(ctx)
				if err != nil || !ok {
					if ctx.Err() != nil {
						return
					}
					if err != nil {
						fail(err)
					}
					continue
				}
				now := time.Now()
				mu.Lock()
				counts[i]++
				if lastHolder != i && lastHolder >= 0 {
					handoffs++
					gapsMs = append(gapsMs, float64(now.Sub(lastRelease).Nanoseconds())/1e6)
				}
				lastHolder = i
				lastRelease = time.Now()
				mu.Unlock()
				if err := c.release(context.Background()); err != nil {
					fail(err)
				}
			}
		}(i)
	}
	wg.Wait()
	secs := time.Since(start).Seconds()
	lo, hi, total := math.MaxInt, 0, 0
	for _, n := range counts {
		lo, hi, total = min(lo, n), max(hi, n), total+n
	}
	fair := 0.0
	if hi > 0 {
		fair = float64(lo) / float64(hi)
	}
	return contendedResult{
		Handoffs: float64(handoffs) / secs, Acquisitions: float64(total) / secs, Fairness: fair,
		P50ms: percentile(gapsMs, 0.50), P99ms: percentile(gapsMs, 0.99),
	}
}

func run(addr string, started time.Time, loadBefore string) {
	newClient := func() *redis.Client {
		return redis.NewClient(&redis.Options{Addr: addr, PoolSize: 64, MaxRetries: -1})
	}
	rdb := newClient()
	defer rdb.Close()
	locks := rlock.New(rdb)
	defer locks.Close()
	ctx := context.Background()

	rlockPair := func() func(context.Context) error {
		lock := locks.Lock("bench:u:rlock")
		return func(ctx context.Context) error {
			h, err := lock.Acquire(ctx)
			if err != nil {
				return err
			}
			_, err = h.Release(ctx)
			return err
		}
	}()
	rawPair := func(ctx context.Context) error {
		owner := "raw-owner"
		if err := rdb.Do(ctx, "RLOCK.ACQUIRE", "bench:u:raw", owner, "LEASE", 30000, "REQ", reqID()).Err(); err != nil {
			return err
		}
		return rdb.Do(ctx, "RLOCK.RELEASE", "bench:u:raw", owner, "REQ", reqID()).Err()
	}
	rsPool := goredis.NewPool(rdb)
	rs := redsync.New(rsPool)
	rl := redislock.New(rdb)

	rlockWorker := func(i int) contender {
		lock := locks.Lock("bench:c:rlock", rlock.WaitForever())
		var h *rlock.Hold
		return contender{
			acquire: func(ctx context.Context) (bool, error) {
				var err error
				h, err = lock.Acquire(ctx)
				if err != nil && ctx.Err() != nil {
					return false, nil
				}
				return err == nil, err
			},
			release: func(ctx context.Context) error { _, err := h.Release(ctx); return err },
		}
	}
	redsyncWorker := func(i int) contender {
		m := rs.NewMutex("bench:c:redsync", redsync.WithExpiry(8*time.Second), redsync.WithTries(math.MaxInt32),
			redsync.WithRetryDelay(time.Millisecond))
		return contender{
			acquire: func(ctx context.Context) (bool, error) {
				err := m.LockContext(ctx)
				if err != nil && ctx.Err() != nil {
					return false, nil
				}
				return err == nil, err
			},
			release: func(ctx context.Context) error { _, err := m.UnlockContext(ctx); return err },
		}
	}
	redislockWorker := func(i int) contender {
		var l *redislock.Lock
		return contender{
			acquire: func(ctx context.Context) (bool, error) {
				var err error
				l, err = rl.Obtain(ctx, "bench:c:redislock", 8*time.Second, &redislock.Options{RetryStrategy: redislock.LinearBackoff(time.Millisecond)})
				if err != nil && (ctx.Err() != nil || errors.Is(err, redislock.ErrNotObtained)) {
					return false, nil
				}
				return err == nil, err
			},
			release: func(ctx context.Context) error { return l.Release(ctx) },
		}
	}

	// Warm up connections and the replica count.
	_ = rlockPair(ctx)
	_ = rawPair(ctx)

	var uRlock, uRaw []float64
	var cRlock, cRedsync, cRedislock []contendedResult
	for r := 0; r < *rounds; r++ {
		// Alternate who goes first, so that a drift of the machine's load favours nobody.
		if r%2 == 0 {
			uRaw = append(uRaw, uncontended(rawPair))
			uRlock = append(uRlock, uncontended(rlockPair))
			cRlock = append(cRlock, contended(rlockWorker))
			cRedsync = append(cRedsync, contended(redsyncWorker))
			cRedislock = append(cRedislock, contended(redislockWorker))
		} else {
			uRlock = append(uRlock, uncontended(rlockPair))
			uRaw = append(uRaw, uncontended(rawPair))
			cRedislock = append(cRedislock, contended(redislockWorker))
			cRedsync = append(cRedsync, contended(redsyncWorker))
			cRlock = append(cRlock, contended(rlockWorker))
		}
		fmt.Fprintf(os.Stderr, "round %d/%d done\n", r+1, *rounds)
	}
	serverInfo, err := rdb.Info(ctx, "server").Result()
	if err != nil {
		fail(err)
	}
	modulesInfo, err := rdb.Info(ctx, "modules").Result()
	if err != nil {
		fail(err)
	}
	doc := report(header(started, loadBefore), serverInfo, modulesInfo, measured{
		uncontended: map[string][]float64{pathRlock: uRlock, pathRaw: uRaw},
		contended:   map[string][]contendedResult{pathRlock: cRlock, pathRedsync: cRedsync, pathRedislock: cRedislock},
	})
	med := func(rs []contendedResult) contendedResult {
		pick := func(f func(contendedResult) float64) float64 {
			var xs []float64
			for _, x := range rs {
				xs = append(xs, f(x))
			}
			return median(xs)
		}
		return contendedResult{
			Handoffs: pick(func(c contendedResult) float64 { return c.Handoffs }),
			P50ms:    pick(func(c contendedResult) float64 { return c.P50ms }),
			P99ms:    pick(func(c contendedResult) float64 { return c.P99ms }),
			Fairness: pick(func(c contendedResult) float64 { return c.Fairness }),
		}
	}
	mr, ms, ml := med(cRlock), med(cRedsync), med(cRedislock)
	var b strings.Builder
	fmt.Fprintf(&b, "Go client on %s, medians of %d rounds of %.1f s (server on core 0, load on core 1)\n\n", *flavor, *rounds, *seconds)
	fmt.Fprintf(&b, "%-44s %14s %10s\n", "uncontended acquire+release", "pairs/s", "ratio")
	fmt.Fprintf(&b, "%-44s %14.0f %10s\n", "raw commands on go-redis (baseline)", median(uRaw), "1.00")
	fmt.Fprintf(&b, "%-44s %14.0f %10.2f\n\n", "rlock (Lock.Acquire + Hold.Release)", median(uRlock), median(uRlock)/median(uRaw))
	fmt.Fprintf(&b, "%-28s %12s %10s %12s %12s %10s\n", "32 goroutines, hold 0", "hand-offs/s", "rlock ÷", "p50 µs", "p99 µs", "fairness")
	row := func(name string, c contendedResult, ratio string) {
		fmt.Fprintf(&b, "%-28s %12.0f %10s %12.0f %12.0f %10.2f\n", name, c.Handoffs, ratio, c.P50ms*1000, c.P99ms*1000, c.Fairness)
	}
	row("rlock (BLOCK in the server)", mr, "")
	row("redsync Mutex", ms, fmt.Sprintf("%.2fx", mr.Handoffs/ms.Handoffs))
	row("bsm/redislock", ml, fmt.Sprintf("%.2fx", mr.Handoffs/ml.Handoffs))
	fmt.Print(b.String())
	data, err := json.MarshalIndent(doc, "", "  ")
	if err != nil {
		fail(err)
	}
	if err := os.WriteFile(*out, append(data, '\n'), 0o644); err != nil {
		fail(err)
	}
	fmt.Printf("\nresults written to %s\n", *out)
}

// reqID is a REQ id made as the client makes its own: 16 random bytes in hex.
func reqID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
