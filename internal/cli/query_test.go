package cli

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/vigil-hpc/vigil/internal/metric"
	"github.com/vigil-hpc/vigil/internal/query"
	"github.com/vigil-hpc/vigil/internal/store"
)

func queryServer(t *testing.T) (string, time.Time) {
	t.Helper()
	st, err := store.Open(store.Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	t0 := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
	load := metric.NewDesc("node_load1", "", metric.Gauge)
	for i := range 3 {
		if err := st.AppendTick("cn01", t0.Add(time.Duration(i)*time.Second), []*metric.Desc{load}, []float64{float64(i)}, false); err != nil {
			t.Fatal(err)
		}
	}
	mux := http.NewServeMux()
	query.New(st, query.Options{}).Register(mux)
	hs := httptest.NewServer(mux)
	t.Cleanup(hs.Close)
	return hs.URL, t0
}

func TestQueryCommand(t *testing.T) {
	srv, t0 := queryServer(t)
	end := strconv.FormatInt(t0.Unix()+2, 10)
	for _, tc := range []struct {
		name string
		args []string
		code int
		want string
	}{
		{"instant, flags after expr", []string{"node_load1", "--server", srv, "--time", end}, 0,
			"SERIES                   VALUE\nnode_load1{node=\"cn01\"}  2\n"},
		{"range", []string{"--server", srv, "--time", end, "--range", "2s", "--step", "1s", "node_load1"}, 0,
			"SERIES                   12:00:00  12:00:01  12:00:02\nnode_load1{node=\"cn01\"}  0         1         2\n"},
		{"json", []string{"--json", "--server", srv, "--time", end, "scalar(node_load1)"}, 0,
			`{"status":"success","data":{"resultType":"scalar","result":[` + end + `,"2"]}}` + "\n"},
		{"bad query", []string{"--server", srv, "sum("}, 1, ""},
		{"no expression", []string{"--server", srv}, 2, ""},
		{"two expressions", []string{"up", "down"}, 2, ""},
		{"bad time", []string{"--time", "noon", "up"}, 2, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out, errb bytes.Buffer
			code := Main(context.Background(), append([]string{"query"}, tc.args...), &out, &errb)
			if code != tc.code || out.String() != tc.want {
				t.Errorf("exit %d, stdout:\n%s\nstderr: %s\nwant exit %d, stdout:\n%s", code, out.String(), errb.String(), tc.code, tc.want)
			}
			if tc.code != 0 && !strings.Contains(errb.String(), "vigil query") {
				t.Errorf("stderr %q does not name the command", errb.String())
			}
		})
	}
}
