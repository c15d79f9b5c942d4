// Package fabric reads the InfiniBand fabric back out of the store: the
// series the ibnet sweep writes (docs/fabric-view.md has the contract)
// become the topology (switches by fat-tree level, the links between them,
// the nodes below each leaf) with each link's live values, and the worst
// links with the running jobs whose nodes sit below them. It serves
// /api/v1/fabric and /api/v1/fabric/top for the dashboard's Fabric view
// and `vigil fabric top`.
package fabric

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/storage"
	"github.com/prometheus/prometheus/tsdb/chunkenc"

	"github.com/vigil-hpc/vigil/internal/jobs"
	"github.com/vigil-hpc/vigil/internal/query"
)

// The contract's series (what the ibnet sweep emits).
const (
	MetricSwitchInfo = "vigil_ib_switch_info"
	MetricPortInfo   = "vigil_ib_port_info"
	MetricPortUp     = "vigil_ib_port_up"
	MetricPortRate   = "vigil_ib_port_rate_bytes_per_second"
	MetricXmitData   = "vigil_ib_port_transmit_data_bytes_total"
	MetricRcvData    = "vigil_ib_port_receive_data_bytes_total"
	MetricXmitWait   = "vigil_ib_port_transmit_wait_total"
	// errorsRegexp selects the counters that make a link's error rate:
	// PortCounters' error counters, the discards and link_downed, by name.
	// Not a pattern such as .+_errors: the optional details
	// (receive_*_errors_total from PortRcvErrorDetails,
	// transmit_discards_*_total from PortXmitDiscardDetails) break
	// receive_errors, receive_switch_relay_errors and transmit_discards
	// down, and would count the same packets twice.
	errorsRegexp = `vigil_ib_port_(symbol_errors|receive_errors|receive_remote_physical_errors|receive_switch_relay_errors|` +
		`transmit_constraint_errors|receive_constraint_errors|local_link_integrity_errors|excessive_buffer_overrun_errors|` +
		`transmit_discards|link_downed)_total`
)

// Levels of a switch in the fat tree.
const (
	LevelLeaf  = "leaf"
	LevelSpine = "spine"
	LevelCore  = "core"
)

// Bounds: a fabric of 256 switches has about 13,000 ports (ibsim's
// limits); these leave room while keeping one answer a few MB.
const (
	MaxPorts        = 65536
	MaxSwitches     = 4096
	DefaultWindow   = time.Minute
	MinWindow       = 2 * time.Second
	MaxWindow       = time.Hour
	DefaultTopLimit = 20
	MaxTopLimit     = 1000
	// MaxJobsPerLink bounds the jobs listed under one link; JobCount
	// still counts them all.
	MaxJobsPerLink = 50
)

// Querier gives the store the fabric is read from and how far back an
// instant value looks (*query.API is one).
type Querier interface {
	Storage() (storage.Queryable, time.Duration)
}

// readTimeout bounds one read of the fabric (about half a second of CPU
// for 13,000 ports).
const readTimeout = 30 * time.Second

// Switch is one switch of the fabric.
type Switch struct {
	GUID  string `json:"guid"`
	Name  string `json:"name"`
	Level string `json:"level"` // leaf, spine or core
	LID   string `json:"lid,omitempty"`
	// Nodes are the hosts below a leaf (its CA ports), sorted; empty for
	// the levels above. NodeCount is the hosts below any switch.
	Nodes     []string `json:"nodes,omitempty"`
	NodeCount int      `json:"node_count"`
	// Swept says whether the store has the switch's own ports; a switch
	// only seen as another's remote end is not swept.
	Swept bool `json:"swept"`
}

// Link is one switch port with a link, as its switch sees it: a physical
// link between two switches shows once from each end.
type Link struct {
	Name       string `json:"name"` // "leaf07 p12 → spine02 p3"
	SwitchGUID string `json:"switch_guid"`
	Switch     string `json:"switch"`
	Port       string `json:"port"`
	RemoteGUID string `json:"remote_guid"`
	Remote     string `json:"remote"`
	RemotePort string `json:"remote_port"`
	RemoteType string `json:"remote_type"` // switch or ca
	// Host is the node behind a CA port (first word of its description).
	Host  string `json:"host,omitempty"`
	Rate  string `json:"rate,omitempty"`
	Width string `json:"width,omitempty"`
	Speed string `json:"speed,omitempty"`
	Up    bool   `json:"up"`
	// Values over the request's window; zero where the store has no rate
	// yet (a new series, a link down).
	Capacity    float64 `json:"capacity_bytes_per_second"`
	TxBytes     float64 `json:"tx_bytes_per_second"`
	RxBytes     float64 `json:"rx_bytes_per_second"`
	Utilization float64 `json:"utilization"` // busier direction / capacity, 0..1
	XmitWait    float64 `json:"xmit_wait_per_second"`
	Errors      float64 `json:"errors_per_second"`
}

// Fabric is the topology with the links' live values.
type Fabric struct {
	Time     time.Time `json:"time"`
	Window   string    `json:"window"`
	Switches []Switch  `json:"switches"`
	Links    []Link    `json:"links"`
	// Truncated says ports or switches beyond the bounds were left out.
	Truncated bool `json:"truncated,omitempty"`
}

// JobRef is a running job under a link.
type JobRef struct {
	ID    string `json:"id"`
	User  string `json:"user,omitempty"`
	Name  string `json:"name,omitempty"`
	Nodes int    `json:"nodes"` // the job's nodes below the link
}

// TopLink is one link of a top list: the link, the value it was ranked
// by, and the running jobs whose nodes sit below it.
type TopLink struct {
	Link
	Value      float64  `json:"value"`
	NodesBelow int      `json:"nodes_below"`
	JobCount   int      `json:"job_count"`
	Jobs       []JobRef `json:"jobs"`
}

// Top is an answer of /api/v1/fabric/top.
type Top struct {
	Time   time.Time `json:"time"`
	Window string    `json:"window"`
	By     string    `json:"by"`
	Job    string    `json:"job,omitempty"`
	Links  []TopLink `json:"links"`
	// Total is the links that qualified before the limit.
	Total int `json:"total"`
}

// Rankings of Top.
const (
	ByXmitWait = "xmit_wait"
	ByErrors   = "errors"
	ByBytes    = "bytes"
)

// Value is what a link is ranked by.
func (l *Link) Value(by string) float64 {
	switch by {
	case ByXmitWait:
		return l.XmitWait
	case ByErrors:
		return l.Errors
	}
	return l.TxBytes + l.RxBytes
}

// LinkName names a link as the contract says: "leaf07 p12 → spine02 p3".
func LinkName(sw, port, remote, remotePort string) string {
	return sw + " p" + port + " → " + remote + " p" + remotePort
}

// HostOf is the Vigil node of an HCA's node description: its first word
// ("cn001 HCA-1" → cn001).
func HostOf(desc string) string {
	desc = strings.TrimSpace(desc)
	if i := strings.IndexAny(desc, " \t"); i >= 0 {
		desc = desc[:i]
	}
	return desc
}

type portKey struct{ guid, port string }

// read queries the store at now over window and builds the fabric.
func read(ctx context.Context, q Querier, now time.Time, window time.Duration) (*Fabric, error) {
	ctx, cancel := context.WithTimeout(ctx, readTimeout)
	defer cancel()
	db, lookback := q.Storage()
	sc := &scanner{ctx: ctx, db: db, now: now.UnixMilli(), lookback: lookback.Milliseconds()}
	f := &Fabric{Time: now.UTC(), Window: promDuration(window)}
	t, lb, w := sc.now, sc.lookback, window.Milliseconds()
	named := func(name string) *labels.Matcher {
		return labels.MustNewMatcher(labels.MatchEqual, labels.MetricName, name)
	}
	// instant reads each series' newest value at t, as PromQL's instant
	// selector would.
	instant := func(name string, fn func(l labels.Labels, v float64)) error {
		return sc.each(t-lb, t, func(l labels.Labels, it chunkenc.Iterator) error {
			if v, ok := newest(it, t, lb); ok {
				fn(l, v)
			}
			return nil
		}, named(name))
	}
	var ports []query.Sample
	if err := instant(MetricPortInfo, func(l labels.Labels, v float64) {
		ports = append(ports, query.Sample{Labels: l.Map(), Value: v})
	}); err != nil {
		return nil, fmt.Errorf("read %s: %w", MetricPortInfo, err)
	}
	idx := links(f, ports)
	// Per port, the largest of its series' values (max by (switch_guid,
	// port)): two sweepers during a handover write the same port.
	set := func(m portMax, fn func(l *Link, v float64)) {
		for k, v := range m {
			if i, ok := idx[k]; ok && !math.IsInf(v, 0) && v >= 0 {
				fn(&f.Links[i], v)
			}
		}
	}
	for _, v := range []struct {
		name string
		set  func(l *Link, v float64)
	}{
		{MetricPortUp, func(l *Link, v float64) { l.Up = v > 0 }},
		{MetricPortRate, func(l *Link, v float64) { l.Capacity = v }},
	} {
		m := portMax{}
		if err := instant(v.name, m.add); err != nil {
			return nil, fmt.Errorf("read %s: %w", v.name, err)
		}
		set(m, v.set)
	}
	for _, v := range []struct {
		name string
		set  func(l *Link, v float64)
	}{
		{MetricXmitData, func(l *Link, v float64) { l.TxBytes = v }},
		{MetricRcvData, func(l *Link, v float64) { l.RxBytes = v }},
		{MetricXmitWait, func(l *Link, v float64) { l.XmitWait = v }},
	} {
		m := portMax{}
		err := sc.each(t-w, t, func(l labels.Labels, it chunkenc.Iterator) error {
			if r, ok := counterRate(it); ok {
				m.add(l, r)
			}
			return nil
		}, named(v.name))
		if err != nil {
			return nil, fmt.Errorf("read %s: %w", v.name, err)
		}
		set(m, v.set)
	}
	// Errors: the sum of a port's error counters now, less the sum a
	// window ago, per sweeping node, over the window. The counters never
	// go back (the sweeper carries resets), so this is their summed rate
	// and reads two values a series.
	type sums struct {
		now, then       float64
		hasNow, hasThen bool
	}
	errs := map[[3]string]*sums{}
	err := sc.each(t-w-lb, t, func(l labels.Labels, it chunkenc.Iterator) error {
		var v [2]float64
		var ok [2]bool
		newestAt(it, []int64{t - w, t}, lb, v[:], ok[:])
		vThen, okThen, vNow, okNow := v[0], ok[0], v[1], ok[1]
		if !okThen && !okNow {
			return nil
		}
		k := [3]string{l.Get("switch_guid"), l.Get("port"), l.Get("node")}
		e := errs[k]
		if e == nil {
			e = &sums{}
			errs[k] = e
		}
		if okNow {
			e.now += vNow
			e.hasNow = true
		}
		if okThen {
			e.then += vThen
			e.hasThen = true
		}
		return nil
	}, labels.MustNewMatcher(labels.MatchRegexp, labels.MetricName, errorsRegexp))
	if err != nil {
		return nil, fmt.Errorf("read the error counters: %w", err)
	}
	em := portMax{}
	for k, e := range errs {
		if e.hasNow && e.hasThen {
			em.addKey(portKey{k[0], k[1]}, (e.now-e.then)/window.Seconds())
		}
	}
	set(em, func(l *Link, v float64) { l.Errors = v })
	for i := range f.Links {
		l := &f.Links[i]
		if l.Capacity > 0 {
			// A hostile capacity (1e-300) must not make an infinity,
			// which JSON cannot carry.
			if u := max(l.TxBytes, l.RxBytes) / l.Capacity; !math.IsInf(u, 0) {
				l.Utilization = u
			}
		}
	}
	var infos []query.Sample
	if err := instant(MetricSwitchInfo, func(l labels.Labels, v float64) {
		infos = append(infos, query.Sample{Labels: l.Map(), Value: v})
	}); err != nil {
		return nil, fmt.Errorf("read %s: %w", MetricSwitchInfo, err)
	}
	f.Switches, f.Truncated = switches(infos, f.Links, f.Truncated)
	return f, nil
}

// links fills f.Links from the port-info samples, in switch and port
// order, one link a port, and returns each port's index in f.Links.
func links(f *Fabric, ports []query.Sample) map[portKey]int {
	idx := map[portKey]int{}
	slices.SortFunc(ports, func(a, b query.Sample) int {
		return cmp.Or(cmp.Compare(a.Labels["switch_guid"], b.Labels["switch_guid"]), cmpPort(a.Labels["port"], b.Labels["port"]))
	})
	for _, s := range ports {
		l := s.Labels
		k := portKey{l["switch_guid"], l["port"]}
		if k.guid == "" || k.port == "" {
			continue
		}
		if _, dup := idx[k]; dup { // two sweepers during a handover
			continue
		}
		if len(f.Links) >= MaxPorts {
			f.Truncated = true
			break
		}
		link := Link{SwitchGUID: k.guid, Switch: l["switch"], Port: k.port, RemoteGUID: l["remote_guid"], Remote: l["remote"],
			RemotePort: l["remote_port"], RemoteType: l["remote_type"], Rate: l["rate"], Width: l["width"], Speed: l["speed"]}
		if link.Switch == "" {
			link.Switch = k.guid
		}
		if link.RemoteType == "ca" {
			link.Host = HostOf(link.Remote)
		}
		link.Name = LinkName(link.Switch, link.Port, link.Remote, link.RemotePort)
		idx[k] = len(f.Links)
		f.Links = append(f.Links, link)
	}
	return idx
}

// switches builds the switch list from the switch-info series and the
// links: levels as the sweeper computed them, or inferred (a switch with
// CA neighbours is a leaf, one linked to a leaf a spine, the rest core).
func switches(infos []query.Sample, links []Link, truncated bool) ([]Switch, bool) {
	byGUID := map[string]*Switch{}
	var order []string
	add := func(guid, name string) *Switch {
		if s := byGUID[guid]; s != nil {
			return s
		}
		if len(order) >= MaxSwitches {
			truncated = true
			return nil
		}
		s := &Switch{GUID: guid, Name: name}
		if s.Name == "" {
			s.Name = guid
		}
		byGUID[guid] = s
		order = append(order, guid)
		return s
	}
	for _, in := range infos {
		g := in.Labels["switch_guid"]
		if g == "" {
			continue
		}
		if s := add(g, in.Labels["switch"]); s != nil {
			s.LID = in.Labels["lid"]
			switch lv := in.Labels["level"]; lv {
			case LevelLeaf, LevelSpine, LevelCore:
				s.Level = lv
			}
		}
	}
	hosts := map[string]map[string]bool{}
	for i := range links {
		l := &links[i]
		s := add(l.SwitchGUID, l.Switch)
		if s == nil {
			continue
		}
		s.Swept = true
		if l.RemoteType == "ca" && l.Host != "" {
			if hosts[s.GUID] == nil {
				hosts[s.GUID] = map[string]bool{}
			}
			hosts[s.GUID][l.Host] = true
		} else if l.RemoteType == "switch" && l.RemoteGUID != "" {
			add(l.RemoteGUID, l.Remote)
		}
	}
	for g, s := range byGUID {
		if s.Level == "" && len(hosts[g]) > 0 {
			s.Level = LevelLeaf
		}
	}
	// Unknown levels, from the lowest known neighbour: above a leaf a
	// spine, above a spine a core; below a core a spine (a fat tree has
	// at most three levels). Two rounds reach a switch two links away.
	for range 2 {
		lowest := map[string]int{}
		for i := range links {
			l := &links[i]
			a, b := byGUID[l.SwitchGUID], byGUID[l.RemoteGUID]
			if a == nil || b == nil || l.RemoteType != "switch" {
				continue
			}
			for _, p := range [][2]*Switch{{a, b}, {b, a}} {
				if p[0].Level != "" || p[1].Level == "" {
					continue
				}
				if r, ok := lowest[p[0].GUID]; !ok || rank(p[1].Level) < r {
					lowest[p[0].GUID] = rank(p[1].Level)
				}
			}
		}
		for g, r := range lowest {
			byGUID[g].Level = [...]string{LevelSpine, LevelCore, LevelSpine}[r]
		}
	}
	out := make([]Switch, 0, len(order))
	for _, g := range order {
		s := byGUID[g]
		if s.Level == "" {
			s.Level = LevelSpine
		}
		for h := range hosts[g] {
			s.Nodes = append(s.Nodes, h)
		}
		slices.Sort(s.Nodes)
		out = append(out, *s)
	}
	t := newTree(out, links)
	for i := range out {
		out[i].NodeCount = len(t.hostsBelow(out[i].GUID))
	}
	slices.SortFunc(out, func(a, b Switch) int {
		return cmp.Or(cmp.Compare(rank(b.Level), rank(a.Level)), natural(a.Name, b.Name), cmp.Compare(a.GUID, b.GUID))
	})
	return out, truncated
}

// rank orders the levels bottom up.
func rank(level string) int {
	switch level {
	case LevelLeaf:
		return 0
	case LevelSpine:
		return 1
	case LevelCore:
		return 2
	}
	return 1
}

// tree answers which hosts sit below a switch or a link.
type tree struct {
	level map[string]int
	hosts map[string][]string // leaf GUID → its hosts
	down  map[string][]string // switch GUID → neighbour switches one level lower
	memo  map[string]map[string]bool
}

func newTree(sws []Switch, links []Link) *tree {
	t := &tree{level: map[string]int{}, hosts: map[string][]string{}, down: map[string][]string{}, memo: map[string]map[string]bool{}}
	for _, s := range sws {
		t.level[s.GUID] = rank(s.Level)
		t.hosts[s.GUID] = s.Nodes
	}
	seen := map[[2]string]bool{}
	for i := range links {
		l := &links[i]
		if l.RemoteType != "switch" {
			continue
		}
		a, b := l.SwitchGUID, l.RemoteGUID
		la, oka := t.level[a]
		lb, okb := t.level[b]
		if !oka || !okb || la == lb {
			continue
		}
		if la < lb {
			a, b = b, a
		}
		if !seen[[2]string{a, b}] {
			seen[[2]string{a, b}] = true
			t.down[a] = append(t.down[a], b)
		}
	}
	return t
}

// hostsBelow is the set of hosts in the subtree of switch g.
func (t *tree) hostsBelow(g string) map[string]bool {
	if m, ok := t.memo[g]; ok {
		return m
	}
	m := map[string]bool{}
	t.memo[g] = m // a cycle (same-level links are skipped) ends here
	for _, h := range t.hosts[g] {
		m[h] = true
	}
	for _, d := range t.down[g] {
		for h := range t.hostsBelow(d) {
			m[h] = true
		}
	}
	return m
}

// linkHosts is the set of hosts whose traffic may cross link l: the host
// of a CA port; below the switch for an up-link; below the remote
// switch for a down-link.
func (t *tree) linkHosts(l *Link) map[string]bool {
	if l.RemoteType == "ca" {
		if l.Host == "" {
			return nil
		}
		return map[string]bool{l.Host: true}
	}
	la, lb := t.level[l.SwitchGUID], t.level[l.RemoteGUID]
	if la < lb {
		return t.hostsBelow(l.SwitchGUID)
	}
	return t.hostsBelow(l.RemoteGUID)
}

// TopOf ranks f's links by `by`, keeping those that carry a node of
// jobFilter's (all links if nil) and, if link is set, the one port it
// names (SWITCH_GUID/PORT), the first limit of them, each with the running
// jobs whose nodes sit below it.
func TopOf(f *Fabric, running []*jobs.Job, by string, limit int, jobFilter *jobs.Job, link string) *Top {
	t := newTree(f.Switches, f.Links)
	top := &Top{Time: f.Time, Window: f.Window, By: by, Links: []TopLink{}}
	if jobFilter != nil {
		top.Job = jobFilter.ID
	}
	var cand []int
	for i := range f.Links {
		l := &f.Links[i]
		if (link != "" && l.SwitchGUID+"/"+l.Port != link) || (jobFilter != nil && !anyIn(jobFilter.Nodes, t.linkHosts(l))) {
			continue
		}
		cand = append(cand, i)
	}
	top.Total = len(cand)
	slices.SortStableFunc(cand, func(a, b int) int {
		la, lb := &f.Links[a], &f.Links[b]
		return cmp.Or(cmp.Compare(lb.Value(by), la.Value(by)), natural(la.Name, lb.Name))
	})
	if len(cand) > limit {
		cand = cand[:limit]
	}
	for _, i := range cand {
		l := f.Links[i]
		hosts := t.linkHosts(&l)
		tl := TopLink{Link: l, Value: l.Value(by), NodesBelow: len(hosts), Jobs: []JobRef{}}
		for _, j := range running {
			n := 0
			for _, node := range j.Nodes {
				if hosts[node] {
					n++
				}
			}
			if n == 0 {
				continue
			}
			tl.JobCount++
			if len(tl.Jobs) < MaxJobsPerLink {
				tl.Jobs = append(tl.Jobs, JobRef{ID: j.ID, User: j.User, Name: j.Name, Nodes: n})
			}
		}
		slices.SortStableFunc(tl.Jobs, func(a, b JobRef) int { return cmp.Compare(b.Nodes, a.Nodes) })
		top.Links = append(top.Links, tl)
	}
	return top
}

func anyIn(nodes []string, set map[string]bool) bool {
	for _, n := range nodes {
		if set[n] {
			return true
		}
	}
	return false
}

// ErrBadParam marks a request's bad parameter.
var ErrBadParam = errors.New("bad parameter")

// ParseBy checks a ranking name ("" is xmit_wait).
func ParseBy(s string) (string, error) {
	switch s {
	case "":
		return ByXmitWait, nil
	case ByXmitWait, ByErrors, ByBytes:
		return s, nil
	}
	return "", fmt.Errorf("%w: by %.40q: want xmit_wait, errors or bytes", ErrBadParam, s)
}

// promDuration writes d in PromQL's units (whole seconds at least).
func promDuration(d time.Duration) string {
	s := int64(d / time.Second)
	if s%60 == 0 {
		return fmt.Sprintf("%dm", s/60)
	}
	return fmt.Sprintf("%ds", s)
}

// cmpPort orders port numbers numerically.
func cmpPort(a, b string) int { return natural(a, b) }

// natural compares strings with runs of digits as numbers, so leaf2
// comes before leaf10.
func natural(a, b string) int {
	for a != "" && b != "" {
		da, db := digits(a), digits(b)
		if da > 0 && db > 0 {
			na, nb := strings.TrimLeft(a[:da], "0"), strings.TrimLeft(b[:db], "0")
			if c := cmp.Or(cmp.Compare(len(na), len(nb)), cmp.Compare(na, nb)); c != 0 {
				return c
			}
			a, b = a[da:], b[db:]
			continue
		}
		if a[0] != b[0] {
			return cmp.Compare(a[0], b[0])
		}
		a, b = a[1:], b[1:]
	}
	return cmp.Compare(len(a), len(b))
}

func digits(s string) int {
	i := 0
	for i < len(s) && s[i] >= '0' && s[i] <= '9' {
		i++
	}
	return i
}
