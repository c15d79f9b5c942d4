package simulate

import (
	"sync/atomic"
	"time"
)

// lagHist counts latencies in 1 ms steps up to 10 s (the last step holds
// everything beyond), for the percentiles in the totals log line, which
// cover the ticks since the previous line (take resets it).
type lagHist struct{ n [10001]atomic.Uint64 }

func (h *lagHist) observe(d time.Duration) { h.observeN(d, 1) }

// observeN counts n latencies of d.
func (h *lagHist) observeN(d time.Duration, n uint64) {
	if n == 0 {
		return
	}
	i := min(max(d.Milliseconds(), 0), int64(len(h.n)-1))
	h.n[i].Add(n)
}

// take returns the p50 and p99 and starts over.
func (h *lagHist) take() (p50, p99 time.Duration) {
	p50, p99 = h.quantile(0.5), h.quantile(0.99)
	for i := range h.n {
		h.n[i].Store(0)
	}
	return p50, p99
}

// quantile returns the upper bound of the q-quantile's step (0 if empty).
func (h *lagHist) quantile(q float64) time.Duration {
	var total uint64
	for i := range h.n {
		total += h.n[i].Load()
	}
	if total == 0 {
		return 0
	}
	rank := uint64(q * float64(total))
	var sum uint64
	for i := range h.n {
		if sum += h.n[i].Load(); sum > rank {
			return time.Duration(i+1) * time.Millisecond
		}
	}
	return time.Duration(len(h.n)) * time.Millisecond
}
