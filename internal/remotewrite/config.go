package remotewrite

import (
	"errors"
	"fmt"
	"net/url"
	"time"

	"github.com/vigil-hpc/vigil/internal/duration"
)

// Defaults of Config fields left zero.
const (
	DefaultTimeout           = 30 * time.Second
	DefaultQueueCapacity     = 100_000
	DefaultMaxSamplesPerSend = 2000
	DefaultBatchSendDeadline = time.Second
	DefaultMinBackoff        = 30 * time.Millisecond
	DefaultMaxBackoff        = 5 * time.Second
	DefaultMinShards         = 1
	DefaultMaxShards         = 8
	// MaxShardsLimit bounds max_shards: each shard is a goroutine, a
	// connection and a request in flight at the receiver.
	MaxShardsLimit = 64
	// DefaultFlushTimeout bounds the last send at shutdown.
	DefaultFlushTimeout = 5 * time.Second
)

// Config is one destination: an element of `remote_write = [...]` in the
// [server] table.
type Config struct {
	URL string `toml:"url"`
	// Name labels the destination in logs and the status endpoint
	// (default: the URL's host).
	Name string `toml:"name"`
	// Timeout bounds one HTTP request.
	Timeout Duration `toml:"timeout"`
	// QueueCapacity bounds the samples waiting for this destination;
	// when it is full the oldest are dropped and counted.
	QueueCapacity     int      `toml:"queue_capacity"`
	MaxSamplesPerSend int      `toml:"max_samples_per_send"`
	BatchSendDeadline Duration `toml:"batch_send_deadline"`
	MinBackoff        Duration `toml:"min_backoff"`
	MaxBackoff        Duration `toml:"max_backoff"`
	// MinShards and MaxShards bound the concurrent senders (shards), each
	// with one request in flight; the count adapts between them to the
	// measured send rate against the rate in. Equal values fix it.
	MinShards int `toml:"min_shards"`
	MaxShards int `toml:"max_shards"`
	// Headers are added to every request (e.g. Authorization).
	Headers map[string]string `toml:"headers"`
	// Backfill (default true) keeps what does not fit the queue in the
	// store instead of dropping it: the series falls behind and is read
	// back from the store, in order, once the queue has room (backfill.go).
	// False drops the oldest queued samples, counted, as before.
	Backfill *bool `toml:"backfill"`
}

// backfill reports whether the destination catches up from the store.
func (c *Config) backfill() bool { return c.Backfill == nil || *c.Backfill }

// Validate checks one destination; the server's config validation calls it.
func (c *Config) Validate() error {
	u, err := url.Parse(c.URL)
	switch {
	case c.URL == "":
		return errors.New("url: empty")
	case err != nil:
		return fmt.Errorf("url %q: %w", c.URL, err)
	case u.Scheme != "http" && u.Scheme != "https":
		return fmt.Errorf("url %q: scheme must be http or https", c.URL)
	case u.Host == "":
		return fmt.Errorf("url %q: no host", c.URL)
	}
	if c.Timeout < 0 || c.QueueCapacity < 0 || c.MaxSamplesPerSend < 0 || c.BatchSendDeadline < 0 || c.MinBackoff < 0 || c.MaxBackoff < 0 {
		return fmt.Errorf("url %q: timeout, queue_capacity, max_samples_per_send, batch_send_deadline and backoffs must not be negative", c.URL)
	}
	if c.MinShards < 0 || c.MaxShards < 0 || c.MinShards > MaxShardsLimit || c.MaxShards > MaxShardsLimit {
		return fmt.Errorf("url %q: min_shards and max_shards must be 0..%d", c.URL, MaxShardsLimit)
	}
	if c.MaxShards > 0 && c.MinShards > c.MaxShards {
		return fmt.Errorf("url %q: min_shards %d exceeds max_shards %d", c.URL, c.MinShards, c.MaxShards)
	}
	if c.MaxBackoff > 0 && c.MinBackoff > c.MaxBackoff {
		return fmt.Errorf("url %q: min_backoff %s exceeds max_backoff %s", c.URL, c.MinBackoff.D(), c.MaxBackoff.D())
	}
	return nil
}

// withDefaults fills zero fields.
func (c Config) withDefaults() Config {
	if c.Name == "" {
		if u, err := url.Parse(c.URL); err == nil {
			c.Name = u.Host
		}
	}
	def := func(d *Duration, v time.Duration) {
		if *d == 0 {
			*d = Duration(v)
		}
	}
	def(&c.Timeout, DefaultTimeout)
	def(&c.BatchSendDeadline, DefaultBatchSendDeadline)
	def(&c.MinBackoff, DefaultMinBackoff)
	def(&c.MaxBackoff, DefaultMaxBackoff)
	if c.QueueCapacity == 0 {
		c.QueueCapacity = DefaultQueueCapacity
	}
	if c.MaxSamplesPerSend == 0 {
		c.MaxSamplesPerSend = DefaultMaxSamplesPerSend
	}
	c.MaxSamplesPerSend = min(c.MaxSamplesPerSend, c.QueueCapacity)
	if c.MinShards == 0 {
		c.MinShards = DefaultMinShards
	}
	if c.MaxShards == 0 {
		c.MaxShards = max(DefaultMaxShards, c.MinShards)
	}
	// Every shard's partition holds at least one sample.
	c.MaxShards = min(c.MaxShards, c.QueueCapacity, MaxShardsLimit)
	c.MinShards = min(c.MinShards, c.MaxShards)
	c.MinBackoff = min(c.MinBackoff, c.MaxBackoff)
	return c
}

// Duration is the one duration type of vigil.toml (Go or Prometheus
// syntax: "1.5s", "5m").
type Duration = duration.Duration
