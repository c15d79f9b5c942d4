package cli

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"flag"
	"net/http"
	"os"
	"time"

	"github.com/vigil-hpc/vigil/internal/apiclient"
)

// EnvHTTPConfig names the environment variable that is the default of
// --http-config.
const EnvHTTPConfig = "VIGIL_HTTP_CONFIG"

// DefaultServerURL is where client commands find `vigil server` (its
// default --http, reached over loopback).
const DefaultServerURL = "http://127.0.0.1:9090"

// serverFlag registers --server on a client command, with the same default
// and help on every one.
func serverFlag(fs *flag.FlagSet) *string {
	return fs.String("server", DefaultServerURL, "base `URL` of vigil server (http[s]://HOST:PORT[/PATH]; a bare HOST:PORT means http)")
}

// httpConfigFlag registers --http-config on a client command; its default
// is $VIGIL_HTTP_CONFIG, so --http-config= ignores the variable.
func httpConfigFlag(fs *flag.FlagSet) *string {
	return fs.String("http-config", os.Getenv(EnvHTTPConfig),
		"Prometheus HTTP client configuration `FILE` (basic_auth, authorization, tls_config) for the server's API; default $"+EnvHTTPConfig)
}

// apiHTTPClient is the HTTP client configured by --http-config; a bad file
// is a usage error.
func apiHTTPClient(configFile string) (*http.Client, error) {
	hc, err := apiclient.NewHTTPClient(configFile)
	if err != nil {
		return nil, &ExitError{Code: 2, Err: err}
	}
	return hc, nil
}

// newAPIClient returns the client of a command's --server, --http-config
// and --timeout.
func newAPIClient(server, configFile string, timeout time.Duration) (*apiclient.Client, error) {
	hc, err := apiHTTPClient(configFile)
	if err != nil {
		return nil, err
	}
	c, err := apiclient.New(apiclient.Options{Server: server, HTTP: hc, Timeout: timeout})
	if err != nil {
		return nil, &ExitError{Code: 2, Err: err}
	}
	return c, nil
}

// clientHint says what to put in --http-config when the server refused a
// request for the lack of credentials or its certificate was not trusted.
func clientHint(err error) string {
	var ae *apiclient.Error
	if errors.As(err, &ae) && (ae.Status == http.StatusUnauthorized || ae.Status == http.StatusForbidden) {
		return "(give credentials with --http-config FILE or $" + EnvHTTPConfig + ")"
	}
	var ua x509.UnknownAuthorityError
	var cv *tls.CertificateVerificationError
	if errors.As(err, &ua) || errors.As(err, &cv) {
		return "(trust the server's CA with tls_config: ca_file in --http-config FILE or $" + EnvHTTPConfig + ")"
	}
	return ""
}
