package lean

import (
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"sync"

	"go.yaml.in/yaml/v2"
	"golang.org/x/crypto/bcrypt"
)

// webConfigFile is the part of Prometheus' web configuration format this
// package implements. Other keys (cipher_suites, http_server_config,
// rate_limit, …) are errors, not silently ignored.
type webConfigFile struct {
	TLS *struct {
		CertFile   string `yaml:"cert_file"`
		KeyFile    string `yaml:"key_file"`
		ClientAuth string `yaml:"client_auth_type"`
		ClientCAs  string `yaml:"client_ca_file"`
		MinVersion string `yaml:"min_version"`
		MaxVersion string `yaml:"max_version"`
	} `yaml:"tls_server_config"`
	Users map[string]string `yaml:"basic_auth_users"`
}

// WebConfig is a loaded web configuration.
type WebConfig struct {
	// TLS is nil when the file configures no certificate (plain HTTP).
	TLS   *tls.Config
	users map[string][]byte

	mu    sync.Mutex
	cache map[[32]byte]bool // bcrypt is slow on purpose; scrapes repeat
	// bcryptMu runs one bcrypt at a time, so a flood of bad passwords
	// costs the node at most one core, as in exporter-toolkit.
	bcryptMu sync.Mutex
}

var tlsVersions = map[string]uint16{"TLS10": tls.VersionTLS10, "TLS11": tls.VersionTLS11, "TLS12": tls.VersionTLS12, "TLS13": tls.VersionTLS13}

var clientAuthTypes = map[string]tls.ClientAuthType{
	"": tls.NoClientCert, "NoClientCert": tls.NoClientCert, "RequestClientCert": tls.RequestClientCert,
	"RequireAnyClientCert": tls.RequireAnyClientCert, "VerifyClientCertIfGiven": tls.VerifyClientCertIfGiven,
	"RequireAndVerifyClientCert": tls.RequireAndVerifyClientCert,
}

// LoadWebConfig reads and checks a web configuration file: its keys, the
// certificate and key, the client CA file and every bcrypt hash. Relative
// paths are relative to the file's directory, as in Prometheus.
func LoadWebConfig(file string) (*WebConfig, error) {
	wrap := func(err error) error { return fmt.Errorf("web config %s: %w", file, err) }
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, wrap(err)
	}
	var f webConfigFile
	if err := yaml.UnmarshalStrict(data, &f); err != nil {
		return nil, wrap(fmt.Errorf("%w (the sampler supports tls_server_config cert_file, key_file, client_auth_type, client_ca_file, min_version, max_version and basic_auth_users)", err))
	}
	wc := &WebConfig{users: map[string][]byte{}, cache: map[[32]byte]bool{}}
	for u, h := range f.Users {
		if _, err := bcrypt.Cost([]byte(h)); err != nil {
			return nil, wrap(fmt.Errorf("basic_auth_users %q: not a bcrypt hash: %w", u, err))
		}
		wc.users[u] = []byte(h)
	}
	if t := f.TLS; t != nil && (t.CertFile != "" || t.KeyFile != "") {
		path := func(p string) string {
			if p != "" && !filepath.IsAbs(p) {
				return filepath.Join(filepath.Dir(file), p)
			}
			return p
		}
		if t.CertFile == "" || t.KeyFile == "" {
			return nil, wrap(errors.New("tls_server_config needs both cert_file and key_file"))
		}
		certFile, keyFile := path(t.CertFile), path(t.KeyFile)
		if _, err := tls.LoadX509KeyPair(certFile, keyFile); err != nil {
			return nil, wrap(err)
		}
		cfg := &tls.Config{
			MinVersion: tls.VersionTLS12,
			// Re-read on each handshake so renewed certificates need no restart.
			GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) {
				c, err := tls.LoadX509KeyPair(certFile, keyFile)
				return &c, err
			},
		}
		var ok bool
		if cfg.ClientAuth, ok = clientAuthTypes[t.ClientAuth]; !ok {
			return nil, wrap(fmt.Errorf("client_auth_type %q: want NoClientCert, RequestClientCert, RequireAnyClientCert, VerifyClientCertIfGiven or RequireAndVerifyClientCert", t.ClientAuth))
		}
		if t.ClientCAs != "" {
			pem, err := os.ReadFile(path(t.ClientCAs))
			if err != nil {
				return nil, wrap(err)
			}
			cfg.ClientCAs = x509.NewCertPool()
			if !cfg.ClientCAs.AppendCertsFromPEM(pem) {
				return nil, wrap(fmt.Errorf("client_ca_file %s: no PEM certificate", t.ClientCAs))
			}
		} else if cfg.ClientAuth == tls.VerifyClientCertIfGiven || cfg.ClientAuth == tls.RequireAndVerifyClientCert {
			return nil, wrap(fmt.Errorf("client_auth_type %s needs client_ca_file", t.ClientAuth))
		}
		for _, v := range []struct {
			s   string
			dst *uint16
		}{{t.MinVersion, &cfg.MinVersion}, {t.MaxVersion, &cfg.MaxVersion}} {
			if v.s == "" {
				continue
			}
			if *v.dst, ok = tlsVersions[v.s]; !ok {
				return nil, wrap(fmt.Errorf("TLS version %q: want TLS10, TLS11, TLS12 or TLS13", v.s))
			}
		}
		wc.TLS = cfg
	} else if t != nil && (t.ClientCAs != "" || t.ClientAuth != "") {
		return nil, wrap(errors.New("tls_server_config: client certificates need cert_file and key_file"))
	}
	return wc, nil
}

// dummyHash is compared against for unknown users, so a wrong user name
// takes as long as a wrong password.
var dummyHash = []byte("$2y$10$QOauhQNbBCuQDKes6eFzPeMqBSjb7Mr5DUmpZ/VcEd00UAV/LDeSi")

// maxCache bounds remembered credential checks; the cache is emptied
// when full.
const maxCache = 64

// Authenticate asks for basic auth when the file lists users.
func (wc *WebConfig) Authenticate(h http.Handler) http.Handler {
	if len(wc.users) == 0 {
		return h
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		user, pass, ok := r.BasicAuth()
		if ok && wc.check(user, pass) {
			h.ServeHTTP(w, r)
			return
		}
		w.Header().Set("WWW-Authenticate", "Basic")
		http.Error(w, http.StatusText(http.StatusUnauthorized), http.StatusUnauthorized)
	})
}

func (wc *WebConfig) check(user, pass string) bool {
	hash, known := wc.users[user]
	if !known {
		hash = dummyHash
	}
	key := sha256.Sum256([]byte(user + "\x00" + pass))
	wc.mu.Lock()
	good, hit := wc.cache[key]
	wc.mu.Unlock()
	if !hit {
		wc.bcryptMu.Lock()
		good = bcrypt.CompareHashAndPassword(hash, []byte(pass)) == nil
		wc.bcryptMu.Unlock()
		wc.mu.Lock()
		if len(wc.cache) >= maxCache {
			clear(wc.cache)
		}
		wc.cache[key] = good
		wc.mu.Unlock()
	}
	return good && known
}
