package main

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"os/exec"
	"runtime"
	"runtime/debug"
	"strings"
	"time"

	rlock "github.com/rlock-dev/rlock/clients/go/v4"
)

// The results file in the schema rlock-bench/1 (bench/report/README.md): report is pure, a
// function of the rounds measured and what the server said; header reads the machine and the
// build before the server starts.

// The paths' names in tables.
const (
	pathRlock     = "rlock"
	pathRaw       = "raw RLOCK.* on go-redis"
	pathRedsync   = "redsync Mutex"
	pathRedislock = "bsm/redislock"
)

// measured is every round of a run, by path.
type measured struct {
	uncontended map[string][]float64
	contended   map[string][]contendedResult
}

type runHeader struct {
	date, command, cpu, loadBefore, commit, client, goVersion string
	nproc                                                     int
	dirty                                                     bool
}

type document struct {
	Schema      string        `json:"schema"`
	Suite       string        `json:"suite"`
	Language    string        `json:"language"`
	Title       string        `json:"title"`
	Command     string        `json:"command"`
	Date        string        `json:"date"`
	Machine     machine       `json:"machine"`
	Build       build         `json:"build"`
	Plan        plan          `json:"plan"`
	Servers     []serverRun   `json:"servers"`
	Scenarios   []scenario    `json:"scenarios"`
	Paths       []pathEntry   `json:"paths"`
	Results     []result      `json:"results"`
	Ratios      []ratio       `json:"ratios"`
	NotMeasured []notMeasured `json:"not_measured"`
}

type machine struct {
	CPU        string `json:"cpu"`
	Nproc      int    `json:"nproc"`
	LoadBefore string `json:"load_before"`
	Pinning    string `json:"pinning"`
}

type build struct {
	Commit        string `json:"commit"`
	Dirty         bool   `json:"dirty"`
	ModuleVersion string `json:"module_version"`
	Client        string `json:"client"`
	Runtime       string `json:"runtime"`
}

type plan struct {
	Rounds  int     `json:"rounds"`
	Seconds float64 `json:"seconds"`
	Workers int     `json:"workers"`
	HoldMs  int     `json:"hold_ms"`
}

type serverRun struct {
	ID      string `json:"id"`
	Version string `json:"version"`
}

type scenario struct {
	ID            string `json:"id"`
	Title         string `json:"title"`
	PrimaryMetric string `json:"primary_metric"`
}

type pathEntry struct {
	Scenario string `json:"scenario"`
	Path     string `json:"path"`
	Label    string `json:"label"`
	Role     string `json:"role"`
}

type result struct {
	Scenario string          `json:"scenario"`
	Server   string          `json:"server"`
	Setting  json.RawMessage `json:"setting"`
	Path     string          `json:"path"`
	Metric   string          `json:"metric"`
	Unit     string          `json:"unit"`
	Better   string          `json:"better"`
	Rounds   []*float64      `json:"rounds"`
	Median   *float64        `json:"median"`
}

type ratio struct {
	Scenario string          `json:"scenario"`
	Server   string          `json:"server"`
	Setting  json.RawMessage `json:"setting"`
	Metric   string          `json:"metric"`
	Path     string          `json:"path"`
	Baseline string          `json:"baseline"`
	Value    *float64        `json:"value"`
}

type notMeasured struct {
	Reason string `json:"reason"`
}

// number is x, or nil (JSON null) when x is not finite: no samples, a division by zero.
func number(x float64) *float64 {
	if math.IsNaN(x) || math.IsInf(x, 0) {
		return nil
	}
	return &x
}

// finiteMedian is the median of the finite values, NaN when there are none.
func finiteMedian(xs []float64) float64 {
	var finite []float64
	for _, x := range xs {
		if !math.IsNaN(x) && !math.IsInf(x, 0) {
			finite = append(finite, x)
		}
	}
	return median(finite)
}

func report(h runHeader, serverInfo, modulesInfo string, m measured) document {
	// Raw JSON rather than a map, which encoding/json would write in key order.
	uncontendedSetting := json.RawMessage(`{}`)
	contendedSetting := json.RawMessage(fmt.Sprintf(`{"workers": %d, "hold_ms": 0}`, workers))
	doc := document{
		Schema: "rlock-bench/1", Suite: "go", Language: "Go",
		Title:   "The Go client against redsync and bsm/redislock",
		Command: h.command, Date: h.date,
		Machine: machine{CPU: h.cpu, Nproc: h.nproc, LoadBefore: h.loadBefore, Pinning: "server on CPU 0, the bench on CPU 1 (taskset)"},
		Build:   build{Commit: h.commit, Dirty: h.dirty, ModuleVersion: moduleVersion(modulesInfo), Client: h.client, Runtime: h.goVersion},
		Plan:    plan{Rounds: *rounds, Seconds: *seconds, Workers: workers, HoldMs: 0},
		Servers: []serverRun{{ID: *flavor, Version: serverVersion(serverInfo)}},
		Scenarios: []scenario{
			{ID: "uncontended", Title: "Uncontended acquire+release pairs (one goroutine, one key)", PrimaryMetric: "pairs_per_sec"},
			{ID: "contended", Title: fmt.Sprintf("Contended: %d goroutines on one lock, hold 0", workers), PrimaryMetric: "handoffs_per_sec"},
		},
		Paths: []pathEntry{
			{"uncontended", pathRlock, "Lock.Acquire + Hold.Release of the Go client on go-redis", "rlock"},
			{"uncontended", pathRaw, "RLOCK.ACQUIRE and RLOCK.RELEASE with REQ, sent with go-redis Do", "rlock"},
			{"contended", pathRlock, "Lock.Acquire (WaitForever: BLOCK in the server) + Hold.Release", "rlock"},
			{"contended", pathRedsync, "redsync Mutex.LockContext/UnlockContext (expiry 8 s, retry delay 1 ms, unlimited tries)", "baseline"},
			{"contended", pathRedislock, "bsm/redislock Obtain/Release (LinearBackoff 1 ms)", "baseline"},
		},
		Results:     []result{},
		Ratios:      []ratio{},
		NotMeasured: []notMeasured{},
	}
	add := func(scen string, setting json.RawMessage, path, metric, unit, better string, rounds []float64) float64 {
		r := result{Scenario: scen, Server: *flavor, Setting: setting, Path: path, Metric: metric, Unit: unit, Better: better,
			Rounds: []*float64{}}
		for _, x := range rounds {
			r.Rounds = append(r.Rounds, number(x))
		}
		med := finiteMedian(rounds)
		r.Median = number(med)
		doc.Results = append(doc.Results, r)
		return med
	}
	ratioOf := func(scen string, setting json.RawMessage, metric, path, baseline string, a, b float64) {
		value := math.NaN()
		if !math.IsNaN(a) && !math.IsNaN(b) && b > 0 {
			value = a / b
		}
		doc.Ratios = append(doc.Ratios, ratio{Scenario: scen, Server: *flavor, Setting: setting, Metric: metric, Path: path, Baseline: baseline, Value: number(value)})
	}
	pairs := map[string]float64{}
	for _, p := range []string{pathRlock, pathRaw} {
		pairs[p] = add("uncontended", uncontendedSetting, p, "pairs_per_sec", "pairs/s", "higher", m.uncontended[p])
	}
	ratioOf("uncontended", uncontendedSetting, "pairs_per_sec", pathRlock, pathRaw, pairs[pathRlock], pairs[pathRaw])
	metrics := []struct {
		name, unit, better string
		of                 func(contendedResult) float64
	}{
		{"handoffs_per_sec", "hand-offs/s", "higher", func(c contendedResult) float64 { return c.Handoffs }},
		{"acquisitions_per_sec", "acquisitions/s", "higher", func(c contendedResult) float64 { return c.Acquisitions }},
		{"fairness", "min/max per worker", "higher", func(c contendedResult) float64 { return c.Fairness }},
		{"latency_p50_ms", "ms", "lower", func(c contendedResult) float64 { return c.P50ms }},
		{"latency_p99_ms", "ms", "lower", func(c contendedResult) float64 { return c.P99ms }},
	}
	handoffs := map[string]float64{}
	for _, p := range []string{pathRlock, pathRedsync, pathRedislock} {
		for i, metric := range metrics {
			var rounds []float64
			for _, c := range m.contended[p] {
				rounds = append(rounds, metric.of(c))
			}
			med := add("contended", contendedSetting, p, metric.name, metric.unit, metric.better, rounds)
			if i == 0 {
				handoffs[p] = med
			}
		}
	}
	for _, b := range []string{pathRedsync, pathRedislock} {
		ratioOf("contended", contendedSetting, "handoffs_per_sec", pathRlock, b, handoffs[pathRlock], handoffs[b])
	}
	return doc
}

// serverVersion is "Redis 7.0.15" or "Valkey 9.1.2 (redis_version 7.2.4)", from INFO server.
func serverVersion(info string) string {
	redisVersion, valkeyVersion := infoField(info, "redis_version"), infoField(info, "valkey_version")
	if valkeyVersion != "" {
		return fmt.Sprintf("Valkey %s (redis_version %s)", valkeyVersion, redisVersion)
	}
	if redisVersion == "" {
		return "?"
	}
	return "Redis " + redisVersion
}

// moduleVersion is the rlock module's ver, from INFO modules (module:name=rlock,ver=40100,...).
func moduleVersion(info string) string {
	for _, line := range strings.Split(info, "\n") {
		line = strings.TrimSpace(line)
		if !strings.HasPrefix(line, "module:name=rlock,") {
			continue
		}
		for _, kv := range strings.Split(strings.TrimPrefix(line, "module:"), ",") {
			if v, ok := strings.CutPrefix(kv, "ver="); ok {
				return v
			}
		}
	}
	return "?"
}

func infoField(info, name string) string {
	for _, line := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), name+":"); ok {
			return v
		}
	}
	return ""
}

// header reads what the run is made of: the machine, the commit, the versions built in.
func header(started time.Time, loadBefore string) runHeader {
	h := runHeader{
		date:       started.UTC().Format("2006-01-02 15:04 UTC"),
		command:    strings.Join(os.Args, " "),
		cpu:        "?",
		loadBefore: loadBefore,
		goVersion:  "Go " + strings.TrimPrefix(runtime.Version(), "go"),
	}
	if cpuinfo, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, line := range strings.Split(string(cpuinfo), "\n") {
			k, v, _ := strings.Cut(line, ":")
			switch strings.TrimSpace(k) {
			case "model name":
				if h.cpu == "?" {
					h.cpu = strings.TrimSpace(v)
				}
			case "processor":
				// Not runtime.NumCPU(): taskset leaves this process one CPU.
				h.nproc++
			}
		}
	}
	git := func(args ...string) (string, bool) {
		out, err := exec.Command("git", args...).Output()
		return strings.TrimSpace(string(out)), err == nil
	}
	if commit, ok := git("rev-parse", "--short", "HEAD"); ok {
		h.commit = commit
	} else {
		h.commit = "?"
	}
	// The sources that matter: the module's and the Go client's, from the repository root.
	status, ok := git("status", "--porcelain", "--", ":/src", ":/clients/go")
	h.dirty = !ok || status != ""
	versions := map[string]string{}
	if info, ok := debug.ReadBuildInfo(); ok {
		for _, d := range info.Deps {
			versions[d.Path] = d.Version
			if d.Replace != nil && d.Replace.Version != "" {
				versions[d.Path] = d.Replace.Version
			}
		}
	}
	or := func(v string) string {
		if v == "" {
			return "?"
		}
		return v
	}
	h.client = fmt.Sprintf("rlock %s, go-redis %s, redsync %s, bsm/redislock %s", rlock.Version,
		or(versions["github.com/redis/go-redis/v9"]), or(versions["github.com/go-redsync/redsync/v4"]),
		or(versions["github.com/bsm/redislock"]))
	return h
}

// loadAverage is /proc/loadavg's three load averages.
func loadAverage() string {
	data, err := os.ReadFile("/proc/loadavg")
	fields := strings.Fields(string(data))
	if err != nil || len(fields) < 3 {
		return "?"
	}
	return strings.Join(fields[:3], " ")
}
