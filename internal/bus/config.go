// Package bus publishes what the server takes in (metrics ticks, parsed
// logs, events, job changes) to a RabbitMQ topic exchange with publisher
// confirms (docs/bus.md, docs/format/bus.md). Logs, events and jobs wait in
// a bounded on-disk spool until confirmed; metrics in a bounded memory
// buffer. Nothing here blocks the server's intake on the broker.
package bus

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"strings"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/vigil-hpc/vigil/internal/config"
)

// Defaults.
const (
	DefaultExchange      = "vigil"
	DefaultSpoolBytes    = 256 << 20
	DefaultMetricsBuffer = 65536 // messages: over 3 s of 20,000 nodes at 1 Hz
)

// Config is the [amqp] table of vigil.toml (and --amqp URL).
type Config struct {
	// URL is amqp://USER:PASS@HOST:PORT/VHOST or amqps://...; empty: off.
	URL      string `toml:"url"`
	Exchange string `toml:"exchange"`
	// CredentialsFile holds "user:password" on one line; it replaces the
	// URL's user info, so the password need not be on a command line.
	CredentialsFile string `toml:"credentials_file"`
	TLSCA           string `toml:"tls_ca"`
	TLSCert         string `toml:"tls_cert"`
	TLSKey          string `toml:"tls_key"`
	// SpoolBytes bounds the on-disk spool of logs, events and jobs.
	SpoolBytes int64 `toml:"spool_bytes"`
	// MetricsBuffer bounds the metrics messages waiting in memory.
	MetricsBuffer int `toml:"metrics_buffer"`
}

func init() {
	config.RegisterSection("amqp", func() any { return &Config{} })
}

// Enabled says whether a URL is set.
func (c Config) Enabled() bool { return c.URL != "" }

// Validate implements config's section validation.
func (c *Config) Validate() error {
	var errs []error
	if c.URL != "" {
		u, err := url.Parse(c.URL)
		switch {
		case err != nil:
			errs = append(errs, config.Field("url", "%v", redactErr(err)))
		case u.Scheme != "amqp" && u.Scheme != "amqps":
			errs = append(errs, config.Field("url", "scheme %q: want amqp:// or amqps://", u.Scheme))
		}
	}
	if c.SpoolBytes < 0 || c.SpoolBytes > 0 && c.SpoolBytes < 1<<16 {
		errs = append(errs, config.Field("spool_bytes", "want at least 65536 (0: %d)", DefaultSpoolBytes))
	}
	if c.MetricsBuffer < 0 || c.MetricsBuffer > 1<<24 {
		errs = append(errs, config.Field("metrics_buffer", "want 0 to %d messages", 1<<24))
	}
	if (c.TLSCert == "") != (c.TLSKey == "") {
		errs = append(errs, config.Field("tls_cert", "tls_cert and tls_key go together"))
	}
	if len(c.Exchange) > 255 {
		errs = append(errs, config.Field("exchange", "longer than 255 bytes"))
	}
	return errors.Join(errs...)
}

// redactErr hides a password url.Parse may quote.
func redactErr(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}

func (c Config) exchange() string {
	if c.Exchange == "" {
		return DefaultExchange
	}
	return c.Exchange
}

func (c Config) spoolBytes() int64 {
	if c.SpoolBytes == 0 {
		return DefaultSpoolBytes
	}
	return c.SpoolBytes
}

func (c Config) metricsBuffer() int {
	if c.MetricsBuffer == 0 {
		return DefaultMetricsBuffer
	}
	return c.MetricsBuffer
}

// Redacted is the URL without its password, for messages.
func Redacted(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "(unparsable URL)"
	}
	return u.Redacted()
}

// dialURL is the URL with the credentials file's user info, and the TLS
// settings.
func (c Config) dialURL() (string, *tls.Config, error) {
	u, err := url.Parse(c.URL)
	if err != nil {
		return "", nil, fmt.Errorf("amqp url: %w", redactErr(err))
	}
	if c.CredentialsFile != "" {
		b, err := os.ReadFile(c.CredentialsFile)
		if err != nil {
			return "", nil, fmt.Errorf("amqp credentials: %w", err)
		}
		user, pass, ok := strings.Cut(strings.TrimSpace(string(b)), ":")
		if !ok || user == "" {
			return "", nil, fmt.Errorf("amqp credentials file %s: want one line user:password", c.CredentialsFile)
		}
		u.User = url.UserPassword(user, pass)
	}
	if c.TLSCA == "" && c.TLSCert == "" {
		return u.String(), nil, nil
	}
	tc := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: u.Hostname()}
	if c.TLSCA != "" {
		pem, err := os.ReadFile(c.TLSCA)
		if err != nil {
			return "", nil, fmt.Errorf("amqp tls_ca: %w", err)
		}
		tc.RootCAs = x509.NewCertPool()
		if !tc.RootCAs.AppendCertsFromPEM(pem) {
			return "", nil, fmt.Errorf("amqp tls_ca %s: no PEM certificate", c.TLSCA)
		}
	}
	if c.TLSCert != "" {
		cert, err := tls.LoadX509KeyPair(c.TLSCert, c.TLSKey)
		if err != nil {
			return "", nil, fmt.Errorf("amqp tls_cert/tls_key: %w", err)
		}
		tc.Certificates = []tls.Certificate{cert}
	}
	return u.String(), tc, nil
}

// Dial connects as c says, naming the broker (without password) in errors.
func (c Config) Dial(name string) (*amqp.Connection, error) {
	return c.dial(name, nil)
}

// dial is Dial with the TCP connection handed to wrap (under TLS, if any).
func (c Config) dial(name string, wrap func(net.Conn) net.Conn) (*amqp.Connection, error) {
	u, tc, err := c.dialURL()
	if err != nil {
		return nil, err
	}
	props := amqp.NewConnectionProperties()
	props.SetClientConnectionName(name)
	dial := amqp.DefaultDial(10 * time.Second)
	if wrap != nil {
		tcp := dial
		dial = func(network, addr string) (net.Conn, error) {
			conn, err := tcp(network, addr)
			if err != nil {
				return nil, err
			}
			return wrap(conn), nil
		}
	}
	conn, err := amqp.DialConfig(u, amqp.Config{TLSClientConfig: tc, Heartbeat: 10 * time.Second, Properties: props, Dial: dial})
	if err != nil {
		return nil, fmt.Errorf("amqp: connect to %s: %w", Redacted(c.URL), explain(err))
	}
	return conn, nil
}

// explain adds what an admin would do to the broker's terse errors.
func explain(err error) error {
	var ae *amqp.Error
	if !errors.As(err, &ae) {
		return err
	}
	switch {
	case strings.Contains(ae.Reason, "username or password"):
		return fmt.Errorf("%w (bad credentials)", err)
	case strings.Contains(ae.Reason, "vhost"):
		return fmt.Errorf("%w (the user may not use this virtual host, or it does not exist)", err)
	case ae.Code == amqp.AccessRefused:
		return fmt.Errorf("%w (check the user's permissions: rabbitmqctl list_permissions)", err)
	}
	return err
}

// DeclareExchange makes sure the durable topic exchange exists: it
// declares it, and where the user may not (no configure permission), it
// checks passively that an administrator did. It may close ch; the
// channel it returns is usable.
func DeclareExchange(conn *amqp.Connection, ch *amqp.Channel, name string) (*amqp.Channel, error) {
	err := ch.ExchangeDeclare(name, amqp.ExchangeTopic, true, false, false, false, nil)
	if err == nil {
		return ch, nil
	}
	var ae *amqp.Error
	if !errors.As(err, &ae) || ae.Code != amqp.AccessRefused {
		return nil, fmt.Errorf("amqp: declare exchange %q: %w", name, explain(err))
	}
	// The failed declare closed the channel.
	if ch, err = conn.Channel(); err != nil {
		return nil, fmt.Errorf("amqp: open channel: %w", err)
	}
	if err := ch.ExchangeDeclarePassive(name, amqp.ExchangeTopic, true, false, false, false, nil); err != nil {
		return nil, fmt.Errorf("amqp: exchange %q: may not declare it (no configure permission) and it does not exist as a durable topic exchange: %w", name, explain(err))
	}
	return ch, nil
}
