// Package apiclient is the one client of vigil server's HTTP API that the
// command-line tools share (vigil query, export, tree status, logs): base
// URL handling, credentials and TLS from a Prometheus HTTP client
// configuration file, a timeout per request, a bound on the size of an
// answer and one error type for the server's error answers.
package apiclient

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/prometheus/common/config"

	"github.com/vigil-hpc/vigil/internal/buildinfo"
)

// Defaults of Options fields left zero.
const (
	// DefaultTimeout bounds one request, answer included; it matches the
	// server's default query timeout.
	DefaultTimeout = 2 * time.Minute
	// DefaultMaxResponse bounds the bytes read of one answer.
	DefaultMaxResponse = 256 << 20
)

// Options of a Client.
type Options struct {
	// Server is the base URL, e.g. http://localhost:9090 or
	// https://vigil.example.org/prefix; HOST:PORT alone means http.
	Server string
	// HTTP sends the requests (see NewHTTPClient); nil means a plain client.
	HTTP *http.Client
	// Timeout bounds each request, answer included; for a stream it bounds
	// the wait for the answer's header and then each wait for more data.
	Timeout time.Duration
	// MaxResponse bounds the bytes read of one answer (not of a stream).
	MaxResponse int64
}

// Client talks to one server. It is safe for concurrent use.
type Client struct {
	base    *url.URL
	hc      *http.Client
	timeout time.Duration
	max     int64
}

// New checks the base URL and returns a client.
func New(o Options) (*Client, error) {
	s := strings.TrimSpace(o.Server)
	if s != "" && !strings.Contains(s, "://") {
		s = "http://" + s
	}
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.RawQuery != "" || u.Fragment != "" {
		return nil, fmt.Errorf("server URL %q: want http://HOST:PORT or https://HOST:PORT, optionally with a path prefix", o.Server)
	}
	u.Path = strings.TrimRight(u.Path, "/")
	u.RawPath = ""
	c := &Client{base: u, hc: o.HTTP, timeout: o.Timeout, max: o.MaxResponse}
	if c.hc == nil {
		c.hc = &http.Client{}
	}
	if c.timeout <= 0 {
		c.timeout = DefaultTimeout
	}
	if c.max <= 0 {
		c.max = DefaultMaxResponse
	}
	return c, nil
}

// NewHTTPClient returns the HTTP client described by a Prometheus HTTP
// client configuration file (basic_auth, authorization, tls_config, ...;
// the format of promtool's --http.config.file), or, for "", a client
// without credentials that honours the proxy environment variables.
func NewHTTPClient(configFile string) (*http.Client, error) {
	cfg := config.DefaultHTTPClientConfig
	cfg.ProxyFromEnvironment = true
	if configFile != "" {
		c, _, err := config.LoadHTTPConfigFile(configFile)
		if err != nil {
			return nil, fmt.Errorf("HTTP client configuration %s: %w", configFile, err)
		}
		if err := c.Validate(); err != nil {
			return nil, fmt.Errorf("HTTP client configuration %s: %w", configFile, err)
		}
		cfg = *c
	}
	hc, err := config.NewClientFromConfig(cfg, "vigil", config.WithUserAgent("vigil/"+buildinfo.Version))
	if err != nil {
		return nil, fmt.Errorf("HTTP client configuration %s: %w", configFile, err)
	}
	return hc, nil
}

// URL is the address of path (and query q) under the base URL.
func (c *Client) URL(path string, q url.Values) string {
	u := *c.base
	u.Path += path
	if len(q) > 0 {
		u.RawQuery = q.Encode()
	}
	return u.String()
}

// Error is an error answer of the server: its HTTP status and, if the body
// says, the error type and message of the Prometheus API
// ({"status":"error","errorType":...,"error":...}) or the log API
// ({"error":...}), else the start of the body.
type Error struct {
	Status    int
	ErrorType string
	Message   string
}

func (e *Error) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "server answered %d", e.Status)
	if e.ErrorType != "" {
		b.WriteString(" " + e.ErrorType)
	} else if t := http.StatusText(e.Status); t != "" {
		b.WriteString(" " + t)
	}
	if e.Message != "" && !strings.EqualFold(e.Message, http.StatusText(e.Status)) {
		b.WriteString(": " + e.Message)
	}
	return b.String()
}

// errTimeout is the cause of a request's context when its Timeout passed.
var errTimeout = errors.New("timeout")

// do sends one request and returns the answer's status and body, read
// whole up to the size bound, within the timeout.
func (c *Client) do(ctx context.Context, method, path string, q, form url.Values) (int, []byte, error) {
	u := c.URL(path, q)
	ctx, cancel := context.WithTimeoutCause(ctx, c.timeout, errTimeout)
	defer cancel()
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req, err := http.NewRequestWithContext(ctx, method, u, body)
	if err != nil {
		return 0, nil, fmt.Errorf("%s %s: %w", method, u, err)
	}
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	req.Header.Set("Accept", "application/json")
	resp, err := c.hc.Do(req)
	if err != nil {
		return 0, nil, c.transportError(ctx, method, u, err)
	}
	defer resp.Body.Close()
	tooLarge := fmt.Errorf("answer of %s is larger than the limit of %s; ask for less (a narrower selector or time range)", u, sizeString(c.max))
	if resp.ContentLength > c.max {
		return resp.StatusCode, nil, tooLarge
	}
	b, err := readAtMost(resp.Body, c.max)
	if errors.Is(err, errTooLarge) {
		return resp.StatusCode, nil, tooLarge
	}
	if err != nil {
		return resp.StatusCode, nil, c.transportError(ctx, method, u, fmt.Errorf("read answer: %w", err))
	}
	return resp.StatusCode, b, nil
}

var errTooLarge = errors.New("too large")

// readAtMost reads r to its end, or fails with errTooLarge after max
// bytes. It reads into chunks joined at the end, so a server sending
// without end costs max bytes, not the 2-3 × max of a growing slice.
func readAtMost(r io.Reader, max int64) ([]byte, error) {
	var chunks [][]byte
	var total int64
	buf := make([]byte, 0, 16<<10)
	for {
		if len(buf) == cap(buf) {
			chunks = append(chunks, buf)
			buf = make([]byte, 0, min(2*cap(buf), 4<<20))
		}
		n, err := r.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if total += int64(n); total > max {
			return nil, errTooLarge
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, err
		}
	}
	if len(chunks) == 0 {
		return buf, nil
	}
	out := make([]byte, 0, total)
	for _, c := range chunks {
		out = append(out, c...)
	}
	return append(out, buf...), nil
}

// transportError names what went wrong: the timeout, the caller's
// cancellation or the connection.
func (c *Client) transportError(ctx context.Context, method, u string, err error) error {
	switch cause := context.Cause(ctx); {
	case errors.Is(cause, errTimeout):
		return fmt.Errorf("%s %s: no complete answer within %s: %w", method, u, c.timeout, context.DeadlineExceeded)
	case errors.Is(cause, context.DeadlineExceeded):
		return fmt.Errorf("%s %s: no complete answer before the deadline: %w", method, u, cause)
	case cause != nil:
		return fmt.Errorf("%s %s: %w", method, u, cause)
	}
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue // says method, URL and the error already
	}
	return fmt.Errorf("%s %s: %w", method, u, err)
}

// Response is the envelope of a Prometheus API answer.
type Response struct {
	Status    string          `json:"status"`
	Data      json.RawMessage `json:"data"`
	ErrorType string          `json:"errorType"`
	Error     string          `json:"error"`
	Warnings  []string        `json:"warnings"`
	Infos     []string        `json:"infos"`
	// Raw is the body as received.
	Raw []byte `json:"-"`
}

// Post sends form to path of the Prometheus API (e.g. /api/v1/query). An
// error answer returns its envelope, if it had one, and an *Error.
func (c *Client) Post(ctx context.Context, path string, form url.Values) (*Response, error) {
	if form == nil {
		form = url.Values{}
	}
	status, body, err := c.do(ctx, http.MethodPost, path, nil, form)
	if err != nil {
		return nil, err
	}
	var r Response
	if err := json.Unmarshal(body, &r); err != nil || r.Status == "" {
		if !ok(status) {
			return nil, apiError(status, body)
		}
		if err == nil {
			err = errors.New(`no "status"`)
		}
		return nil, fmt.Errorf("answer of %s (HTTP %d) is not API JSON: %w", c.URL(path, nil), status, err)
	}
	r.Raw = body
	if r.Status != "success" || !ok(status) {
		return &r, apiError(status, body)
	}
	return &r, nil
}

// Query is Post decoding the answer's data into dst.
func (c *Client) Query(ctx context.Context, path string, form url.Values, dst any) error {
	r, err := c.Post(ctx, path, form)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(r.Data, dst); err != nil {
		return fmt.Errorf("decode answer of %s: %w", c.URL(path, nil), err)
	}
	return nil
}

// GetJSON gets path with query q and decodes the answer into v; an answer
// other than 2xx is an *Error.
func (c *Client) GetJSON(ctx context.Context, path string, q url.Values, v any) error {
	status, body, err := c.do(ctx, http.MethodGet, path, q, nil)
	if err != nil {
		return err
	}
	if !ok(status) {
		return apiError(status, body)
	}
	if err := json.Unmarshal(body, v); err != nil {
		return fmt.Errorf("answer of %s (HTTP %d) is not the expected JSON: %w", c.URL(path, q), status, err)
	}
	return nil
}

// Stream gets path with query q and returns the body of a 2xx answer for
// reading as it arrives: there is no overall timeout, but the header must
// come within Timeout and then some data every Timeout, else reading fails
// (the server's keepalives count as data). Close the body when done.
func (c *Client) Stream(ctx context.Context, path string, q url.Values) (io.ReadCloser, error) {
	u := c.URL(path, q)
	ctx, cancel := context.WithCancelCause(ctx)
	idle := time.AfterFunc(c.timeout, func() { cancel(errTimeout) })
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		idle.Stop()
		cancel(nil)
		return nil, fmt.Errorf("GET %s: %w", u, err)
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		err = c.streamError(ctx, u, err)
		idle.Stop()
		cancel(nil)
		return nil, err
	}
	if !ok(resp.StatusCode) {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
		resp.Body.Close()
		idle.Stop()
		cancel(nil)
		return nil, apiError(resp.StatusCode, b)
	}
	idle.Reset(c.timeout)
	return &streamBody{c: c, u: u, ctx: ctx, cancel: cancel, idle: idle, body: resp.Body}, nil
}

func (c *Client) streamError(ctx context.Context, u string, err error) error {
	if errors.Is(context.Cause(ctx), errTimeout) {
		return fmt.Errorf("GET %s: nothing received for %s: %w", u, c.timeout, context.DeadlineExceeded)
	}
	return c.transportError(ctx, http.MethodGet, u, err)
}

// streamBody extends the idle deadline on every read that brings data.
type streamBody struct {
	c      *Client
	u      string
	ctx    context.Context
	cancel context.CancelCauseFunc
	idle   *time.Timer
	body   io.ReadCloser
}

func (s *streamBody) Read(p []byte) (int, error) {
	n, err := s.body.Read(p)
	if n > 0 {
		s.idle.Reset(s.c.timeout)
	}
	if err != nil && err != io.EOF {
		err = s.c.streamError(s.ctx, s.u, err)
	}
	return n, err
}

func (s *streamBody) Close() error {
	s.idle.Stop()
	err := s.body.Close()
	s.cancel(nil)
	return err
}

func ok(status int) bool { return status >= 200 && status < 300 }

// apiError decodes an error answer.
func apiError(status int, body []byte) *Error {
	e := &Error{Status: status}
	var v struct {
		ErrorType string `json:"errorType"`
		Error     string `json:"error"`
	}
	if json.Unmarshal(body, &v) == nil && (v.Error != "" || v.ErrorType != "") {
		e.ErrorType, e.Message = v.ErrorType, v.Error
	} else {
		e.Message = snippet(body)
	}
	return e
}

// snippet is the start of a body that is not JSON, as one line of text.
func snippet(b []byte) string {
	const max = 200
	b = bytes.TrimSpace(b)
	if !utf8.Valid(b) {
		return fmt.Sprintf("(%d bytes of binary data)", len(b))
	}
	s := strings.Join(strings.Fields(string(b)), " ")
	if len(s) > max {
		i := max
		for i > 0 && !utf8.RuneStart(s[i]) {
			i--
		}
		s = s[:i] + "…"
	}
	return s
}

func sizeString(n int64) string {
	if n >= 1<<20 && n%(1<<20) == 0 {
		return fmt.Sprintf("%d MiB", n>>20)
	}
	return fmt.Sprintf("%d bytes", n)
}

// MaxEventBytes bounds one server-sent event's data line.
const MaxEventBytes = 1 << 20

// ErrStreamEnded is what ReadEvents returns when the server ends a stream.
var ErrStreamEnded = errors.New("stream ended")

// ReadEvents reads server-sent events from a Stream's body and calls fn
// with each event's data (the text after "data: "), until fn fails, the
// stream breaks, or the server ends it (ErrStreamEnded).
func ReadEvents(body io.Reader, fn func(data []byte) error) error {
	sc := bufio.NewScanner(body)
	sc.Buffer(make([]byte, 0, 64<<10), MaxEventBytes)
	for sc.Scan() {
		data, ok := bytes.CutPrefix(sc.Bytes(), []byte("data: "))
		if !ok {
			continue
		}
		if err := fn(data); err != nil {
			return err
		}
	}
	if err := sc.Err(); err != nil {
		return err
	}
	return ErrStreamEnded
}

// Follow runs once (one read of a live stream) again and again until ctx
// ends, telling stderr each time the stream breaks and waiting a second
// before reconnecting. A refused request (4xx other than 408 and 429:
// a bad query, no credentials) would fail again: Follow returns it.
func Follow(ctx context.Context, name string, stderr io.Writer, once func() error) error {
	for {
		err := once()
		if ctx.Err() != nil {
			return nil
		}
		var ae *Error
		if errors.As(err, &ae) && ae.Status >= 400 && ae.Status < 500 && ae.Status != http.StatusRequestTimeout && ae.Status != http.StatusTooManyRequests {
			return err
		}
		fmt.Fprintf(stderr, "%s: %v; reconnecting\n", name, err)
		select {
		case <-time.After(time.Second):
		case <-ctx.Done():
			return nil
		}
	}
}
