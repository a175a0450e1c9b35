package metrics

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

func TestSnapshotCountsReadsPerTier(t *testing.T) {
	m := New()
	m.ObserveRead(TierCache, 1<<20, 100*time.Microsecond, nil)
	m.ObserveRead(TierNetwork, 4096, 20*time.Millisecond, nil)
	m.ObserveRead(TierNetwork, 0, time.Second, errors.New("EIO"))
	var gets float64 = 7
	m.CounterFunc("shardfs_store_gets_total", "gets", func() float64 { return gets })

	raw, err := m.JSON()
	if err != nil {
		t.Fatal(err)
	}
	var samples []Sample
	if err := json.Unmarshal(raw, &samples); err != nil {
		t.Fatal(err)
	}
	find := func(name, tier string) Sample {
		for _, s := range samples {
			if s.Name == name && s.Labels["tier"] == tier {
				return s
			}
		}
		t.Fatalf("no sample %s{tier=%q} in %s", name, tier, raw)
		return Sample{}
	}
	if v := find("shardfs_read_bytes_total", TierCache).Value; v != 1<<20 {
		t.Errorf("cache bytes = %v", v)
	}
	if v := find("shardfs_read_bytes_total", TierNetwork).Value; v != 4096 {
		t.Errorf("network bytes = %v", v)
	}
	if v := find("shardfs_read_network_wait_seconds_total", "").Value; v < 1.02 || v > 1.021 {
		t.Errorf("network wait = %v, want 1.02s", v)
	}
	if v := find("shardfs_read_errors_total", "").Value; v != 1 {
		t.Errorf("errors = %v", v)
	}
	if s := find("shardfs_read_seconds", TierNetwork); s.Count != 2 || s.P99 < 1 {
		t.Errorf("network latency histogram = %+v", s)
	}
	if v := find("shardfs_store_gets_total", "").Value; v != 7 {
		t.Errorf("gets = %v", v)
	}
}

func TestServeExposesPrometheusText(t *testing.T) {
	m := New()
	m.ObserveRead(TierCache, 10, time.Millisecond, nil)
	srv, err := m.Serve("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	resp, err := http.Get("http://" + srv.Addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(body), `shardfs_read_bytes_total{tier="cache"} 10`) {
		t.Fatalf("metrics page lacks the cache bytes:\n%s", body)
	}
}
