package main

import (
	"math"
	"testing"
)

const infoServer = "# Server\r\nredis_version:7.2.4\r\nvalkey_version:9.1.2\r\n"
const infoModules = "# Modules\r\nmodule:name=rlock,ver=40100,api=1,filters=0,usedby=[],using=[],options=[]\r\n"

func TestReportMediansRatiosAndNulls(t *testing.T) {
	nan := math.NaN()
	doc := report(runHeader{}, infoServer, infoModules, measured{
		uncontended: map[string][]float64{pathRlock: {900, 1100, 1000}, pathRaw: {1000, 1000, 1000}},
		contended: map[string][]contendedResult{
			pathRlock:     {{Handoffs: 3000, P50ms: 0.1, P99ms: nan}, {Handoffs: 5000, P50ms: nan, P99ms: nan}},
			pathRedsync:   {{Handoffs: 1000}, {Handoffs: 1000}},
			pathRedislock: {{Handoffs: 0}, {Handoffs: 0}},
		},
	})
	if doc.Servers[0].Version != "Valkey 9.1.2 (redis_version 7.2.4)" || doc.Build.ModuleVersion != "40100" {
		t.Fatalf("server %q, module %q", doc.Servers[0].Version, doc.Build.ModuleVersion)
	}
	find := func(path, metric string) result {
		for _, r := range doc.Results {
			if r.Path == path && r.Metric == metric && (r.Scenario == "contended") == (metric != "pairs_per_sec") {
				return r
			}
		}
		t.Fatalf("no result %s %s", path, metric)
		return result{}
	}
	if r := find(pathRlock, "pairs_per_sec"); *r.Median != 1000 || len(r.Rounds) != 3 {
		t.Errorf("uncontended median %v of %d rounds", *r.Median, len(r.Rounds))
	}
	// A round without samples is null and left out of the median; none at all is a null median.
	if r := find(pathRlock, "latency_p50_ms"); r.Rounds[1] != nil || *r.Median != 0.1 {
		t.Errorf("p50 rounds %v median %v", r.Rounds, r.Median)
	}
	if r := find(pathRlock, "latency_p99_ms"); r.Median != nil {
		t.Errorf("p99 median %v, want null", *r.Median)
	}
	want := map[string]*float64{pathRaw: number(1), pathRedsync: number(4), pathRedislock: nil}
	for _, q := range doc.Ratios {
		w := want[q.Baseline]
		if (w == nil) != (q.Value == nil) || (w != nil && *w != *q.Value) {
			t.Errorf("ratio to %s: %v, want %v", q.Baseline, q.Value, w)
		}
	}
}
