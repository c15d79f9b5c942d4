package remotewrite

import (
	"context"
	"math"
	"time"
)

// Thresholds of the shard count's adaptation, in busy shards: the
// average number of senders waiting on a request over an interval.
const (
	// growBusy: the shards spent at least this share of the interval in
	// requests, so sending is the bottleneck rather than the rate in.
	growBusy = 0.8
	// shrinkBusy: after a shrink the shards left would be busy at most
	// this share of the time; it stays below growBusy so that the count
	// does not swing.
	shrinkBusy = 0.6
)

// window is what a queue did over one reshard interval.
type window struct {
	seconds  float64
	in, sent float64 // samples a second enqueued and sent
	busy     float64 // busy shards on average
	failed   bool    // a request failed: the receiver, not the sending, limits
	backlog  int     // samples queued at the end
	age      time.Duration
}

// desiredShards is the shard count for the next interval: grow when the
// oldest queued sample is older than the batch deadline and the shards
// were busy, to as many as send the incoming rate plus the backlog in one
// interval at the measured rate per busy shard; shrink when fewer shards
// would carry the measured work; otherwise keep n.
func desiredShards(w window, n, lo, hi int, deadline time.Duration) int {
	switch {
	case w.seconds <= 0:
		return n
	case w.age > deadline:
		if w.failed || w.busy < growBusy*float64(n) || w.sent <= 0 {
			return n // the receiver fails or is idle: more requests will not help
		}
		perShard := w.sent / w.busy
		need := (w.in + float64(w.backlog)/w.seconds) / perShard
		return max(n, min(hi, max(n+1, int(math.Ceil(need)))))
	default:
		d := max(lo, int(math.Ceil(w.busy/shrinkBusy)))
		if d < n {
			return d
		}
		return n
	}
}

// growCheck is how often a queue checks whether it must grow: a queue
// falling behind fills in seconds (2 M samples at 700 k/s in, one shard's
// 100 k/s out), so waiting a whole reshard interval loses samples.
const growCheck = time.Second

// reshardLoop reconsiders the shard count until ctx ends: growing as soon
// as a window of growCheck shows the queue falling behind, shrinking only
// over a whole q.reshardEvery, so a short lull does not shrink it.
func (q *queue) reshardLoop(ctx context.Context) {
	if q.cfg.MinShards == q.cfg.MaxShards {
		return
	}
	t := time.NewTicker(min(growCheck, q.reshardEvery))
	defer t.Stop()
	type snap struct {
		at             time.Time
		in, sent, fail uint64
		busy           int64
	}
	take := func() snap {
		return snap{time.Now(), q.stats.enqueued.Load(), q.stats.sent.Load(), q.stats.failedRequests.Load(), q.stats.busyNanos.Load()}
	}
	last := take()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		cur := take()
		dt := cur.at.Sub(last.at).Seconds()
		w := window{
			seconds: dt,
			in:      float64(cur.in-last.in) / dt,
			sent:    float64(cur.sent-last.sent) / dt,
			busy:    float64(cur.busy-last.busy) / 1e9 / dt,
			failed:  cur.fail != last.fail,
			backlog: q.len(),
		}
		if ts, ok := q.oldest(); ok {
			w.age = max(0, cur.at.Sub(time.UnixMilli(ts)))
		}
		whole := cur.at.Sub(last.at) >= q.reshardEvery
		n := int(q.shards.Load())
		d := desiredShards(w, n, q.cfg.MinShards, q.cfg.MaxShards, q.cfg.BatchSendDeadline.D())
		if d > n || whole {
			last = cur
		}
		if d == n || (d < n && !whole) {
			continue
		}
		q.setShards(d)
		q.stats.reshards.Add(1)
		q.log.Info("remote write resharded", "from", n, "to", d, "samples_in_per_s", int(w.in),
			"samples_sent_per_s", int(w.sent), "busy_shards", math.Round(w.busy*100)/100, "oldest_queued", w.age.Round(time.Millisecond))
	}
}
