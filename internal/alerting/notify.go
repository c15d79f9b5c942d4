package alerting

import (
	"fmt"
	"net/url"
	"time"

	promcfg "github.com/prometheus/common/config"
	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/config"
	"github.com/prometheus/prometheus/discovery"
	"github.com/prometheus/prometheus/discovery/targetgroup"
	"github.com/prometheus/prometheus/notifier"
)

// sendTimeout bounds one POST to an Alertmanager (Prometheus' default).
const sendTimeout = 10 * time.Second

// newNotifier builds Prometheus' notifier for the Alertmanager URLs: a
// bounded queue (the oldest alerts dropped and counted when full),
// batches, every batch to every Alertmanager over API v2. Alerts sent
// while an Alertmanager is away are lost to it, as in Prometheus; the
// rules send every active alert again each ResendDelay (and resolved
// ones for 15 minutes), so it catches up when it returns.
func (m *Manager) newNotifier() error {
	cfg := &config.Config{}
	m.tgs = map[string][]*targetgroup.Group{}
	for i, s := range m.opts.Alertmanagers {
		u, err := parseURL(s)
		if err != nil {
			return err
		}
		amc := &config.AlertmanagerConfig{
			Scheme:           u.Scheme,
			PathPrefix:       u.Path,
			APIVersion:       config.AlertmanagerAPIVersionV2,
			Timeout:          model.Duration(sendTimeout),
			HTTPClientConfig: promcfg.DefaultHTTPClientConfig,
			ServiceDiscoveryConfigs: discovery.Configs{discovery.StaticConfig{
				{Targets: []model.LabelSet{{model.AddressLabel: model.LabelValue(u.Host)}}},
			}},
		}
		if u.User != nil {
			p, _ := u.User.Password()
			amc.HTTPClientConfig.BasicAuth = &promcfg.BasicAuth{Username: u.User.Username(), Password: promcfg.Secret(p)}
		}
		cfg.AlertingConfig.AlertmanagerConfigs = append(cfg.AlertingConfig.AlertmanagerConfigs, amc)
		// The notifier names its sets "config-N" (AlertmanagerConfigs.ToMap).
		m.tgs[fmt.Sprintf("config-%d", i)] = []*targetgroup.Group{{
			Targets: []model.LabelSet{{model.AddressLabel: model.LabelValue(u.Host)}}, Source: s,
		}}
	}
	m.notif = notifier.NewManager(&notifier.Options{QueueCapacity: m.opts.QueueCapacity, Registerer: m.opts.Registerer},
		model.UTF8Validation, m.log.With("part", "notifier"))
	if err := m.notif.ApplyConfig(cfg); err != nil {
		return fmt.Errorf("alertmanager: %w", err)
	}
	return nil
}

// CheckURL checks an Alertmanager URL (--alertmanager).
func CheckURL(s string) error {
	_, err := parseURL(s)
	return err
}

func parseURL(s string) (*url.URL, error) {
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.RawQuery != "" || u.Fragment != "" {
		return nil, fmt.Errorf("alertmanager %q: want a URL like http://host:9093", s)
	}
	return u, nil
}
