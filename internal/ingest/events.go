package ingest

import (
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/vigil-hpc/vigil/internal/events"
	"github.com/vigil-hpc/vigil/internal/metric"
)

// maxDownRemembered bounds the nodes remembered as down for their
// node_up event, so nodes that come and go under new names cannot grow it.
const maxDownRemembered = 100000

// nodeEvents turns the liveness transitions and gaps into events: a node
// going down (silent, or reported by an aggregator) is node_down, one of
// those coming back node_up; a node's first tick is no event (every node
// would "come up" at each server start).
type nodeEvents struct {
	sink   events.Sink
	downMu sync.Mutex
	down   map[string]bool // nodes whose node_down was emitted
	// aggs are the streams that are aggregators' own health (their schema
	// has vigil_aggregator_* series): one going down means its children
	// fail over to their next upstream.
	aggs map[string]bool
}

// maxAggregators bounds the aggregator streams remembered.
const maxAggregators = 10000

// schema notes whether node's stream is an aggregator's.
func (ne *nodeEvents) schema(node string, descs []*metric.Desc) {
	agg := false
	for _, d := range descs {
		if strings.HasPrefix(d.Name, "vigil_aggregator_") {
			agg = true
			break
		}
	}
	ne.downMu.Lock()
	defer ne.downMu.Unlock()
	switch {
	case agg && len(ne.aggs) < maxAggregators:
		ne.aggs[node] = true
	case !agg:
		delete(ne.aggs, node)
	}
}

func (ne *nodeEvents) init(s events.Sink) {
	if s == nil {
		s = events.Discard
	}
	ne.sink, ne.down, ne.aggs = s, map[string]bool{}, map[string]bool{}
}

func nodeLink(node string) string { return "#/node/" + node }

func (ne *nodeEvents) nodeDown(node string, t time.Time, why string) {
	ne.downMu.Lock()
	if ne.down[node] {
		ne.downMu.Unlock()
		return // told already
	}
	if len(ne.down) < maxDownRemembered {
		ne.down[node] = true
	}
	agg := ne.aggs[node]
	ne.downMu.Unlock()
	ne.sink.Emit(events.Event{Time: t, Kind: events.KindNodeDown, Node: node, Severity: events.SeverityCritical,
		Summary: fmt.Sprintf("node %s down: %s", node, why), Link: nodeLink(node)})
	if agg {
		ne.sink.Emit(events.Event{Time: t, Kind: events.KindFailover, Node: node, Severity: events.SeverityWarning,
			Summary: fmt.Sprintf("aggregator %s down (%s): its nodes fail over to their next upstream", node, why),
			Link:    "#/tree"})
	}
}

// nodeUp is called when node joined or came back (Liveness.Seen).
func (ne *nodeEvents) nodeUp(node string, t time.Time) {
	ne.downMu.Lock()
	was := ne.down[node]
	delete(ne.down, node)
	ne.downMu.Unlock()
	if was {
		ne.sink.Emit(events.Event{Time: t, Kind: events.KindNodeUp, Node: node, Severity: events.SeverityInfo,
			Summary: fmt.Sprintf("node %s up again", node), Link: nodeLink(node)})
	}
}

func (ne *nodeEvents) gap(node string, from, to time.Time) {
	ne.sink.Emit(events.Event{Time: from, Kind: events.KindGap, Node: node, Severity: events.SeverityInfo,
		Summary: fmt.Sprintf("gap of %s in node %s's data (ticks lost in the tree)", to.Sub(from).Round(time.Millisecond), node),
		Labels:  map[string]string{"from": from.UTC().Format(time.RFC3339Nano), "to": to.UTC().Format(time.RFC3339Nano)},
		Link:    nodeLink(node)})
}
