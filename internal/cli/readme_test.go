package cli

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/vigil-hpc/vigil/internal/metric"
	"github.com/vigil-hpc/vigil/internal/query"
	"github.com/vigil-hpc/vigil/internal/store"
)

// TestReadmeCPUQuery runs the README's CPU example against counters of a
// 4-core node whose cores are 30 % busy (20 % user, 10 % system) and 70 %
// idle: the example must print 0.3. The old example averaged over cores and
// the 7 non-idle modes alike and printed a number with no meaning.
func TestReadmeCPUQuery(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`vigil query '([^']*node_cpu_seconds_total[^']*)'`).FindSubmatch(readme)
	if m == nil {
		t.Fatal("README has no `vigil query '...node_cpu_seconds_total...'` example")
	}
	expr := string(m[1])

	st, err := store.Open(store.Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	share := map[string]float64{"idle": 0.7, "user": 0.2, "system": 0.1, "iowait": 0, "irq": 0, "softirq": 0, "steal": 0, "nice": 0}
	var descs []*metric.Desc
	var rates []float64
	for cpu := range 4 {
		for mode, r := range share {
			descs = append(descs, metric.NewDesc("node_cpu_seconds_total", "", metric.Counter, "cpu", strconv.Itoa(cpu), "mode", mode))
			rates = append(rates, r)
		}
	}
	t0 := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
	vals := make([]float64, len(rates))
	for i := range 121 {
		for j, r := range rates {
			vals[j] = 1000 + r*float64(i)
		}
		if err := st.AppendTick("cn01", t0.Add(time.Duration(i)*time.Second), descs, vals, false); err != nil {
			t.Fatal(err)
		}
	}
	mux := http.NewServeMux()
	query.New(st, query.Options{}).Register(mux)
	hs := httptest.NewServer(mux)
	t.Cleanup(hs.Close)

	var out, errb bytes.Buffer
	at := strconv.FormatInt(t0.Unix()+120, 10)
	if code := Main(context.Background(), []string{"query", expr, "--server", hs.URL, "--time", at}, &out, &errb); code != 0 {
		t.Fatalf("%s: exit %d, %s", expr, code, errb.String())
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 2 {
		t.Fatalf("%s: want one series, got\n%s", expr, out.String())
	}
	f := strings.Fields(lines[1])
	v, err := strconv.ParseFloat(f[len(f)-1], 64)
	if err != nil || v < 0.299 || v > 0.301 {
		t.Errorf("%s = %s, want 0.3 (the busy fraction)", expr, lines[1])
	}
}
