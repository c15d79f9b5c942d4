package simulate

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/textparse"

	"github.com/vigil-hpc/vigil/internal/metric"
)

// A Recording is real node data (`vigil record`): ticks of samples, each
// with its timestamp, replayed by ReplayNodes so that simulated clusters
// carry a real machine's noise rather than a model's.
type Recording struct {
	descs []*metric.Desc
	unit  []unit    // per desc: how counters are continued past the end
	span  []float64 // per counter desc: its increase over the recording, in unit
	ticks []recTick
}

type recTick struct {
	t    int64 // milliseconds
	idx  []int32
	vals []float64
}

// unit is the integer domain a counter's values come from (kernel ticks,
// milliseconds, plain integers), found by exact round trips; continuing a
// counter there keeps the replayed values what a sampler would produce.
type unit uint8

const (
	unitFloat   unit = iota // not a counter, or no exact integer domain
	unitInt                 // v
	unitHundred             // v = j / 100 (USER_HZ ticks, as the cpu plugin)
	unitMilli               // v = j * (1/1000) (milliseconds, as diskstats)
	unitMicro               // v = j / 1e6 (microseconds, as the self plugin)
)

func (u unit) toInt(v float64) float64 {
	switch u {
	case unitHundred:
		return math.Round(v * 100)
	case unitMilli:
		return math.Round(v * 1000)
	case unitMicro:
		return math.Round(v * 1e6)
	}
	return v
}

func (u unit) fromInt(j float64) float64 {
	switch u {
	case unitHundred:
		return j / 100
	case unitMilli:
		return j * (1.0 / 1000)
	case unitMicro:
		return j / 1e6
	}
	return j
}

// exact tells whether every value of a series survives the round trip.
func (u unit) exact(v float64) bool {
	j := u.toInt(v)
	return j == math.Trunc(j) && math.Abs(j) < 1<<53 && u.fromInt(j) == v
}

// maxRecordingLine bounds one line of a recording (label values included).
const maxRecordingLine = 1 << 20

// LoadRecording reads a recording written by `vigil record` (Prometheus
// text exposition with a timestamp on every sample; gzip if the name ends
// in .gz). Errors name the file and line.
func LoadRecording(path string) (*Recording, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var r io.Reader = f
	if strings.HasSuffix(path, ".gz") {
		gz, err := gzip.NewReader(f)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		defer gz.Close()
		r = gz
	}
	rec, err := ReadRecording(r)
	if err != nil {
		return nil, fmt.Errorf("%s:%w", path, err)
	}
	return rec, nil
}

// ReadRecording parses a recording from r; errors start with the line
// number ("12: ...").
func ReadRecording(r io.Reader) (*Recording, error) {
	rec := &Recording{}
	fams := map[string]*family{}
	index := map[string]int32{} // series (name{labels}) -> desc index
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), maxRecordingLine)
	st := labels.NewSymbolTable()
	var lset labels.Labels
	var buf []byte
	line := 0
	for sc.Scan() {
		line++
		text := bytes.TrimSpace(sc.Bytes())
		if len(text) == 0 {
			continue
		}
		// One line at a time, so errors know their line; the copy keeps
		// the newline from overwriting the scanner's buffer.
		buf = append(append(buf[:0], text...), '\n')
		p := textparse.NewPromParser(buf, st, false)
		entry, err := p.Next()
		if err != nil {
			return nil, fmt.Errorf("%d: %w", line, err)
		}
		switch entry {
		case textparse.EntryHelp:
			name, help := p.Help()
			fam := fams[string(name)]
			if fam == nil {
				fam = &family{typ: metric.Untyped}
				fams[string(name)] = fam
			}
			fam.help = string(help)
		case textparse.EntryType:
			name, typ := p.Type()
			fam := fams[string(name)]
			if fam == nil {
				fam = &family{}
				fams[string(name)] = fam
			}
			switch typ {
			case model.MetricTypeCounter:
				fam.typ = metric.Counter
			case model.MetricTypeGauge:
				fam.typ = metric.Gauge
			default:
				fam.typ = metric.Untyped
			}
		case textparse.EntrySeries:
			series, ts, v := p.Series()
			if ts == nil {
				return nil, fmt.Errorf("%d: sample without a timestamp (recordings come from `vigil record`)", line)
			}
			id, ok := index[string(series)]
			if !ok {
				p.Labels(&lset)
				d, err := descOf(lset, fams)
				if err != nil {
					return nil, fmt.Errorf("%d: %w", line, err)
				}
				if len(rec.descs) >= math.MaxInt32 {
					return nil, fmt.Errorf("%d: too many series", line)
				}
				id = int32(len(rec.descs))
				index[string(series)] = id
				rec.descs = append(rec.descs, d)
			}
			n := len(rec.ticks)
			switch {
			case n == 0 || *ts > rec.ticks[n-1].t:
				rec.ticks = append(rec.ticks, recTick{t: *ts})
			case *ts < rec.ticks[n-1].t:
				return nil, fmt.Errorf("%d: timestamp %d goes back (previous %d)", line, *ts, rec.ticks[n-1].t)
			}
			tk := &rec.ticks[len(rec.ticks)-1]
			tk.idx = append(tk.idx, id)
			tk.vals = append(tk.vals, v)
		case textparse.EntryComment, textparse.EntryUnit:
		default:
			return nil, fmt.Errorf("%d: unsupported entry (histograms are not recorded)", line)
		}
	}
	if err := sc.Err(); err != nil {
		if errors.Is(err, bufio.ErrTooLong) {
			return nil, fmt.Errorf("%d: line longer than %d bytes", line+1, maxRecordingLine)
		}
		return nil, fmt.Errorf("%d: %w", line+1, err)
	}
	if len(rec.ticks) < 2 {
		return nil, fmt.Errorf("%d: a recording needs at least two ticks, found %d", line, len(rec.ticks))
	}
	rec.units()
	return rec, nil
}

// family is what HELP and TYPE lines said of a metric name.
type family struct {
	help string
	typ  metric.Type
}

// descOf builds the descriptor of one recorded series.
func descOf(lset labels.Labels, fams map[string]*family) (*metric.Desc, error) {
	name := lset.Get(labels.MetricName)
	if name == "" {
		return nil, errors.New("series without a metric name")
	}
	var pairs []string
	var err error
	lset.Range(func(l labels.Label) {
		switch l.Name {
		case labels.MetricName:
		case "node":
			err = errors.New(`recorded series carry no "node" label: replay names the nodes`)
		default:
			pairs = append(pairs, l.Name, l.Value)
		}
	})
	if err != nil {
		return nil, err
	}
	help, typ := "", metric.Untyped
	if f := fams[name]; f != nil {
		help, typ = f.help, f.typ
	}
	return metric.NewDesc(name, help, typ, pairs...), nil
}

// units finds each counter's integer domain and its increase over the
// recording, for continuing it on later passes.
func (rec *Recording) units() {
	n := len(rec.descs)
	rec.unit = make([]unit, n)
	rec.span = make([]float64, n)
	first := make([]float64, n)
	last := make([]float64, n)
	seen := make([]bool, n)
	ok := make([][5]bool, n) // per desc: which units stayed exact
	for i := range ok {
		ok[i] = [5]bool{false, true, true, true, true}
	}
	for _, tk := range rec.ticks {
		for k, id := range tk.idx {
			v := tk.vals[k]
			if !seen[id] {
				seen[id], first[id] = true, v
			}
			last[id] = v
			for u := unitInt; u <= unitMicro; u++ {
				if ok[id][u] && !u.exact(v) {
					ok[id][u] = false
				}
			}
		}
	}
	for id, d := range rec.descs {
		if d.Type != metric.Counter {
			continue
		}
		for u := unitInt; u <= unitMicro; u++ {
			if ok[id][u] {
				rec.unit[id] = u
				break
			}
		}
		u := rec.unit[id]
		rec.span[id] = max(u.toInt(last[id])-u.toInt(first[id]), 0)
	}
}

// Ticks is the number of recorded ticks; Series the number of series.
func (rec *Recording) Ticks() int  { return len(rec.ticks) }
func (rec *Recording) Series() int { return len(rec.descs) }

// Interval is the recording's median tick spacing.
func (rec *Recording) Interval() time.Duration {
	d := make([]int64, 0, len(rec.ticks)-1)
	for i := 1; i < len(rec.ticks); i++ {
		d = append(d, rec.ticks[i].t-rec.ticks[i-1].t)
	}
	return time.Duration(median(d)) * time.Millisecond
}

func median(xs []int64) int64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[len(s)/2]
}

// ReplayNode replays a recording as one node, starting offset ticks in and
// wrapping around; counters carry on from where the previous pass ended.
type ReplayNode struct {
	Name string
	rec  *Recording
	pos  int
}

// NewReplayNode returns a node replaying rec from tick offset.
func NewReplayNode(name string, rec *Recording, offset int) *ReplayNode {
	return &ReplayNode{Name: name, rec: rec, pos: offset % len(rec.ticks)}
}

// Sample appends the node's next recorded tick to b (one recorded tick
// per call, whatever dt).
func (n *ReplayNode) Sample(t time.Time, dt time.Duration, b *metric.Batch) {
	rec := n.rec
	tk := &rec.ticks[n.pos%len(rec.ticks)]
	pass := float64(n.pos / len(rec.ticks))
	n.pos++
	for k, id := range tk.idx {
		v := tk.vals[k]
		if pass > 0 && rec.span[id] > 0 {
			u := rec.unit[id]
			v = u.fromInt(u.toInt(v) + pass*rec.span[id])
		}
		b.Add(rec.descs[id], v)
	}
}
