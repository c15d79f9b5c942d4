package metric

// Target labels: what Prometheus attaches to every series of a scraped
// target, and Vigil to every series of a node, so dashboards and alert
// rules written for node_exporter (`{job="node", instance="$node"}`) select
// hosts as they always have. NodeLabel is Vigil's own name of the host.
const (
	JobLabel      = "job"
	InstanceLabel = "instance"
	NodeLabel     = "node"
	nameLabel     = "__name__"
)

// SeriesLabels appends the labels of node's series d to dst, unsorted:
// __name__, the target labels job=job and instance=node (none if job is
// empty, as stores of older Vigils have), node=node, then d's own labels.
//
// A label of d named like a target label keeps node_exporter's meaning
// where it has one and the host stays identifiable by another label:
//   - node (node_exporter's NUMA node, node_memory_numa_*{node="0"}) is
//     kept as it is, and the host's node label is left out of that series:
//     instance names the host there. Without target labels (job empty)
//     the host label wins and d's is stored as exported_node.
//   - job and instance become exported_job and exported_instance, as
//     Prometheus does with a scraped label that collides with its target's
//     (honor_labels: false).
//
// A label of d named __name__ or with an empty name is left out; ok is
// false then, so the caller can refuse the descriptor.
func SeriesLabels(dst []Label, job, node string, d *Desc) (_ []Label, ok bool) {
	ok = true
	ownNode := d.hasLabel(NodeLabel)
	dst = append(dst, Label{nameLabel, d.Name})
	if job != "" {
		dst = append(dst, Label{JobLabel, job}, Label{InstanceLabel, node})
	}
	if !ownNode || job == "" {
		dst = append(dst, Label{NodeLabel, node})
	}
	for _, l := range d.Labels {
		switch {
		case l.Name == "" || l.Name == nameLabel:
			ok = false
			continue
		case l.Name == JobLabel || l.Name == InstanceLabel || (l.Name == NodeLabel && job == ""):
			l.Name = "exported_" + l.Name
		}
		dst = append(dst, l)
	}
	return dst, ok
}

func (d *Desc) hasLabel(name string) bool {
	for _, l := range d.Labels {
		if l.Name == name {
			return true
		}
	}
	return false
}
