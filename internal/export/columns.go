package export

import (
	"sort"
	"strings"
)

// NodeLabel is the label that selects the row; every other label is folded
// into the column name.
const NodeLabel = "node"

// ColumnName is the column of a series: its metric name followed by its
// other labels except node (and the target labels job and instance where
// instance is the node), sorted by name, in the Prometheus exposition
// syntax: `node_cpu_seconds_total{cpu="0",mode="idle"}`. A series without
// other labels is its bare name (`node_load1`). Label values are escaped as
// in the text format (\\, \" and \n), so the name parses back as a selector.
func ColumnName(lbls map[string]string) string {
	names := make([]string, 0, len(lbls))
	// The target labels the server adds (job, and instance = the node)
	// name the row like node does, so they are not part of the column.
	target := lbls["instance"] != "" && lbls["instance"] == lbls[NodeLabel]
	for k := range lbls {
		if k != "__name__" && k != NodeLabel && !(target && (k == "job" || k == "instance")) {
			names = append(names, k)
		}
	}
	sort.Strings(names)
	var b strings.Builder
	b.WriteString(lbls["__name__"])
	if len(names) == 0 {
		return b.String()
	}
	b.WriteByte('{')
	for i, k := range names {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(k)
		b.WriteString(`="`)
		v := lbls[k]
		for j := 0; j < len(v); j++ {
			switch c := v[j]; c {
			case '\\':
				b.WriteString(`\\`)
			case '"':
				b.WriteString(`\"`)
			case '\n':
				b.WriteString(`\n`)
			default:
				b.WriteByte(c)
			}
		}
		b.WriteByte('"')
	}
	b.WriteByte('}')
	return b.String()
}
