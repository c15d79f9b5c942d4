package query

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

func TestClientTables(t *testing.T) {
	_, _, mux := fixture(t, Options{})
	hs := httptest.NewServer(mux)
	defer hs.Close()
	c := &Client{Server: hs.URL + "/"}
	ctx := context.Background()

	resp, err := c.Instant(ctx, "node_load1 * 2", base.Add(4*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	if err := WriteTable(&b, resp); err != nil {
		t.Fatal(err)
	}
	want := "SERIES         VALUE\n" +
		"{node=\"cn01\"}  8\n" +
		"{node=\"cn02\"}  208\n"
	if b.String() != want {
		t.Errorf("instant table:\n%s\nwant\n%s", b.String(), want)
	}

	resp, err = c.Range(ctx, `up{node="cn02"} or node_load1{node="cn01"} > 6`, base.Add(6*time.Second), base.Add(8*time.Second), time.Second)
	if err != nil {
		t.Fatal(err)
	}
	b.Reset()
	if err := WriteTable(&b, resp); err != nil {
		t.Fatal(err)
	}
	want = "SERIES                   12:00:06  12:00:07  12:00:08\n" +
		"node_load1{node=\"cn01\"}  -         7         8\n" +
		"up{node=\"cn02\"}          1         1         1\n"
	if b.String() != want {
		t.Errorf("range table:\n%s\nwant\n%s", b.String(), want)
	}

	resp, err = c.Instant(ctx, "scalar(sum(up))", base)
	if err != nil {
		t.Fatal(err)
	}
	b.Reset()
	if err := WriteTable(&b, resp); err != nil || b.String() != "2\n" {
		t.Errorf("scalar table %q, %v", b.String(), err)
	}

	resp, err = c.Instant(ctx, "nope", base)
	if err != nil {
		t.Fatal(err)
	}
	b.Reset()
	if err := WriteTable(&b, resp); err != nil || !strings.Contains(b.String(), "(no data)") {
		t.Errorf("empty table %q, %v", b.String(), err)
	}

	_, err = c.Instant(ctx, "rate(", base)
	var ae *APIError
	if !errors.As(err, &ae) || ae.Status != 400 || ae.ErrorType != "bad_data" {
		t.Errorf("bad query: err = %v, want a 400 bad_data APIError", err)
	}
}

func TestClientNotAnAPI(t *testing.T) {
	hs := httptest.NewServer(nilHandler{})
	defer hs.Close()
	_, err := (&Client{Server: hs.URL}).Instant(context.Background(), "up", base)
	if err == nil || !strings.Contains(err.Error(), "not API JSON") {
		t.Errorf("err = %v, want a clear non-API error", err)
	}
}

func TestClientMaxResponse(t *testing.T) {
	_, _, mux := fixture(t, Options{})
	hs := httptest.NewServer(mux)
	defer hs.Close()
	c := &Client{Server: hs.URL, MaxResponse: 64}
	_, err := c.Range(context.Background(), "node_load1", base, base.Add(8*time.Second), time.Second)
	if err == nil || !strings.Contains(err.Error(), "larger than the limit of 64 bytes") {
		t.Errorf("err = %v, want the size limit named", err)
	}
}

type nilHandler struct{}

func (nilHandler) ServeHTTP(w http.ResponseWriter, _ *http.Request) {
	io.WriteString(w, "<html>hi</html>")
}

func FuzzWriteTable(f *testing.F) {
	f.Add([]byte(`{"resultType":"vector","result":[{"metric":{"a":"b"},"value":[1,"2"]}]}`))
	f.Add([]byte(`{"resultType":"matrix","result":[{"metric":{},"values":[[1,"2"],[1.5,"3"]]}]}`))
	f.Add([]byte(`{"resultType":"scalar","result":[1,"2"]}`))
	f.Add([]byte(`{"resultType":"matrix","result":[{"values":[[1]]}]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		if !json.Valid(data) {
			return
		}
		_ = WriteTable(io.Discard, &Response{Status: "success", Data: data})
	})
}

// TestClientRedactsPassword: credentials in the server URL (a server with
// --web-config) never appear in errors.
func TestClientRedactsPassword(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "Unauthorized", http.StatusUnauthorized)
	}))
	defer srv.Close()
	c := &Client{Server: strings.Replace(srv.URL, "http://", "http://ops:s3cret@", 1)}
	_, err := c.Instant(context.Background(), "up", time.Now())
	if err == nil || strings.Contains(err.Error(), "s3cret") {
		t.Fatalf("error %v, want one without the password", err)
	}
}
