package bus

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"math"
	"strings"
	"time"

	"github.com/vigil-hpc/vigil/internal/metric"
)

// Streams. Each has its own sequence number (header vigil-seq).
const (
	StreamMetrics = "metrics"
	StreamLogs    = "logs"
	StreamEvents  = "events"
	StreamJobs    = "jobs"
)

// Headers every message carries (docs/format/bus.md).
const (
	HeaderStream = "vigil-stream"
	HeaderSeq    = "vigil-seq"
	// HeaderStart is the publishing server's start (Unix ms) on metrics:
	// their sequence numbers start again at 1 when the server restarts.
	HeaderStart = "vigil-start"
)

// Content types of the message bodies.
const (
	ContentMetrics = "application/vnd.vigil.metrics.v1"
	ContentJSON    = "application/json"
)

// A metrics message (docs/format/bus.md), little-endian:
//
//	magic "VGM1" | flags u8 | time int64 (Unix ms) | schema id u64 | n u32 | n × float64
//	[flags&1: n × (type u8 | len u16 | series text)]
//
// The schema (series in Prometheus text form, name{labels}) rides along on
// a node's first tick, after a change and every schemaEvery; in between,
// consumers look it up by id.
const (
	metricsMagic  = "VGM1"
	metricsHeader = 4 + 1 + 8 + 8 + 4
	flagSchema    = 1
	// maxSeries bounds one message's values (a tick has hundreds).
	maxSeries = 1 << 16
)

// schemaID identifies a node's series list: FNV-1a of the series texts.
func schemaID(series []string) uint64 {
	h := fnv.New64a()
	for _, s := range series {
		h.Write([]byte(s))
		h.Write([]byte{'\n'})
	}
	return h.Sum64()
}

// seriesText is d as Prometheus text: name{a="b",...}.
func seriesText(d *metric.Desc) string {
	return string(metric.AppendSeries(nil, d, nil))
}

// appendMetrics encodes one tick after dst; types and series are the
// schema, sent when withSchema.
func appendMetrics(dst []byte, t time.Time, id uint64, values []float64, types []metric.Type, series []string, withSchema bool) []byte {
	dst = append(dst, metricsMagic...)
	var flags byte
	if withSchema {
		flags |= flagSchema
	}
	dst = append(dst, flags)
	dst = binary.LittleEndian.AppendUint64(dst, uint64(t.UnixMilli()))
	dst = binary.LittleEndian.AppendUint64(dst, id)
	dst = binary.LittleEndian.AppendUint32(dst, uint32(len(values)))
	for _, v := range values {
		dst = binary.LittleEndian.AppendUint64(dst, math.Float64bits(v))
	}
	if withSchema {
		for i, s := range series {
			if len(s) > math.MaxUint16 {
				s = s[:math.MaxUint16]
			}
			dst = append(dst, byte(types[i]))
			dst = binary.LittleEndian.AppendUint16(dst, uint16(len(s)))
			dst = append(dst, s...)
		}
	}
	return dst
}

// Metrics is one decoded metrics message.
type Metrics struct {
	Time     time.Time
	SchemaID uint64
	Values   []float64
	// Series and Types are set when the message carried its schema.
	Series []string
	Types  []metric.Type
}

var errMetrics = errors.New("bus: bad metrics message")

// DecodeMetrics parses a metrics message body. It never panics and
// allocates at most in proportion to len(b).
func DecodeMetrics(b []byte) (*Metrics, error) {
	if len(b) < metricsHeader || string(b[:4]) != metricsMagic {
		return nil, fmt.Errorf("%w: short or no magic", errMetrics)
	}
	flags := b[4]
	m := &Metrics{
		Time:     time.UnixMilli(int64(binary.LittleEndian.Uint64(b[5:]))),
		SchemaID: binary.LittleEndian.Uint64(b[13:]),
	}
	n := int(binary.LittleEndian.Uint32(b[21:]))
	b = b[metricsHeader:]
	if n > maxSeries || n*8 > len(b) {
		return nil, fmt.Errorf("%w: %d values in %d bytes", errMetrics, n, len(b))
	}
	m.Values = make([]float64, n)
	for i := range m.Values {
		m.Values[i] = math.Float64frombits(binary.LittleEndian.Uint64(b[8*i:]))
	}
	b = b[8*n:]
	if flags&flagSchema == 0 {
		if len(b) != 0 {
			return nil, fmt.Errorf("%w: %d trailing bytes", errMetrics, len(b))
		}
		return m, nil
	}
	m.Series, m.Types = make([]string, 0, n), make([]metric.Type, 0, n)
	for range n {
		if len(b) < 3 {
			return nil, fmt.Errorf("%w: schema cut short", errMetrics)
		}
		typ, l := metric.Type(b[0]), int(binary.LittleEndian.Uint16(b[1:]))
		if typ > metric.Untyped || len(b) < 3+l {
			return nil, fmt.Errorf("%w: bad schema entry", errMetrics)
		}
		m.Types = append(m.Types, typ)
		m.Series = append(m.Series, string(b[3:3+l]))
		b = b[3+l:]
	}
	if len(b) != 0 {
		return nil, fmt.Errorf("%w: %d trailing bytes", errMetrics, len(b))
	}
	return m, nil
}

// Log is one log message on the bus (logs.<severity>.<app> batches).
type Log struct {
	Seq      uint64    `json:"seq"` // the log store's sequence number
	Time     time.Time `json:"time"`
	Received time.Time `json:"received"`
	Host     string    `json:"host"`
	App      string    `json:"app,omitempty"`
	ProcID   string    `json:"procid,omitempty"`
	MsgID    string    `json:"msgid,omitempty"`
	Severity string    `json:"severity"`
	Facility uint8     `json:"facility"`
	Pattern  uint64    `json:"pattern"`
	Text     string    `json:"text"`
	SD       string    `json:"sd,omitempty"`
}

// LogBatch is the body of a logs message.
type LogBatch struct {
	Messages []Log `json:"messages"`
}

// keyWord makes s one word of a topic routing key: dots (the separator)
// and the wildcards become '_', empty is "-", at most 64 bytes.
func keyWord(s string) string {
	if s == "" {
		return "-"
	}
	if len(s) > 64 {
		s = s[:64]
	}
	return strings.Map(func(r rune) rune {
		switch r {
		case '.', '*', '#', ' ', '\t', '\n', '\r':
			return '_'
		}
		return r
	}, s)
}
