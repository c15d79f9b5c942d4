package cli

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/vigil-hpc/vigil/internal/ibnet"
	"github.com/vigil-hpc/vigil/internal/logging"
)

func init() {
	fabricCommands["sweep"] = Command{Name: "sweep", Summary: "discover the fabric reachable from this host and sweep its switch ports once", Run: runFabricSweep}
}

// sweepRecord is one link in --json output.
type sweepRecord struct {
	SwitchGUID string            `json:"switch_guid"`
	Switch     string            `json:"switch"`
	Level      string            `json:"level"`
	LID        int               `json:"lid"`
	Port       int               `json:"port"`
	RemoteGUID string            `json:"remote_guid"`
	Remote     string            `json:"remote"`
	RemotePort int               `json:"remote_port"`
	RemoteType string            `json:"remote_type"`
	RemoteLID  int               `json:"remote_lid"`
	State      string            `json:"state"`
	Rate       string            `json:"rate"`
	Counters   map[string]uint64 `json:"counters"`
}

// counterNames are the --json counter keys, by ibnet counter index.
var counterNames = [ibnet.NCounters]string{
	"xmit_data", "rcv_data", "xmit_pkts", "rcv_pkts", "unicast_xmit_pkts", "unicast_rcv_pkts",
	"multicast_xmit_pkts", "multicast_rcv_pkts", "symbol_errors", "link_error_recovery", "link_downed",
	"rcv_errors", "rcv_remote_physical_errors", "rcv_switch_relay_errors", "xmit_discards",
	"xmit_constraint_errors", "rcv_constraint_errors", "local_link_integrity_errors",
	"excessive_buffer_overrun_errors", "vl15_dropped", "xmit_wait",
	"xmit_discards_inactive", "xmit_discards_neighbor_mtu", "xmit_discards_sw_lifetime_limit",
	"xmit_discards_sw_hoq_lifetime_limit", "rcv_local_phy_errors", "rcv_malformed_packet_errors",
	"rcv_buffer_overrun_errors", "rcv_dlid_mapping_errors", "rcv_vl_mapping_errors", "rcv_looping_errors",
	"vl_xmit_wait_0", "vl_xmit_wait_1", "vl_xmit_wait_2", "vl_xmit_wait_3", "vl_xmit_wait_4", "vl_xmit_wait_5",
	"vl_xmit_wait_6", "vl_xmit_wait_7", "vl_xmit_wait_8", "vl_xmit_wait_9", "vl_xmit_wait_10", "vl_xmit_wait_11",
	"vl_xmit_wait_12", "vl_xmit_wait_13", "vl_xmit_wait_14", "vl_xmit_wait_15",
}

func runFabricSweep(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("vigil fabric sweep", flag.ContinueOnError)
	fs.SetOutput(stderr)
	once := fs.Bool("once", false, "sweep once and print (the only mode)")
	asJSON := fs.Bool("json", false, "print JSON: {sweep_seconds, links: [...]}")
	helper := fs.String("helper", "", "the vigil-ibmad helper (default: next to vigil, else on PATH)")
	samplers := fs.String("samplers", "", "comma-separated sampler hosts: sweep only --host's share")
	host := fs.String("host", "", "this host's name among --samplers")
	madTimeout := fs.Duration("mad-timeout", ibnet.DefaultMADTimeout, "per-MAD timeout")
	window := fs.Int("window", ibnet.DefaultWindow, "counter MADs in flight at once (1 = one at a time)")
	var logOpts logging.Options
	logOpts.RegisterFlags(fs)
	if err := fs.Parse(args); err != nil {
		return &ExitError{Code: 2, Err: err}
	}
	if !*once || fs.NArg() > 0 {
		return &ExitError{Code: 2, Err: errors.New("usage: vigil fabric sweep --once [--json] [--samplers a,b --host a] [--helper PATH] [--mad-timeout D] [--window N]")}
	}
	log, err := logging.New(stderr, logOpts)
	if err != nil {
		return err
	}
	path, err := ibnet.FindHelper(*helper)
	if err != nil {
		return err
	}
	cfg := ibnet.Config{Helper: path, MADTimeout: *madTimeout, Retries: ibnet.DefaultRetries, Window: *window, Logger: log}
	if *samplers != "" {
		cfg.Hosts = strings.Split(*samplers, ",")
		cfg.Host = *host
		if cfg.Host == "" {
			return &ExitError{Code: 2, Err: errors.New("--samplers needs --host")}
		}
	}
	s := ibnet.New(cfg)
	defer s.Close()
	start := time.Now()
	sweepErr := s.Sweep(ctx)
	if errors.Is(sweepErr, ibnet.ErrHelper) {
		return fmt.Errorf("fabric sweep: %w", sweepErr)
	}
	total := time.Since(start)
	var recs []sweepRecord
	var sweepTime time.Duration
	var madTime time.Duration
	s.Read(func(snap *ibnet.Snapshot) {
		sweepTime, madTime = snap.Duration, snap.MADTime
		level := map[uint64]string{}
		for _, sw := range snap.Switches {
			level[sw.GUID] = sw.Level
		}
		for i := range snap.Links {
			l := &snap.Links[i]
			rate, _, _, _ := l.Rate()
			state := "down"
			if snap.Up[i] {
				state = "active"
			}
			r := sweepRecord{SwitchGUID: ibnet.GUID(l.SwitchGUID), Switch: l.Switch, Level: level[l.SwitchGUID], LID: int(l.LID),
				Port: l.Port, RemoteGUID: ibnet.GUID(l.RemoteGUID), Remote: l.Remote, RemotePort: l.RemotePort,
				RemoteType: ibnet.RemoteTypeName(l.RemoteType), RemoteLID: int(l.RemoteLID), State: state, Rate: rate,
				Counters: make(map[string]uint64, ibnet.NCounters)}
			for k, n := range counterNames {
				// Optional counters only where the switch answered them.
				a := snap.Avail[i]
				if g := ibnet.CounterGroup(k); g != 0 && (a.Groups&g == 0 ||
					k >= ibnet.CVLXmitWait0 && a.VLs&(1<<(k-ibnet.CVLXmitWait0)) == 0) {
					continue
				}
				r.Counters[n] = snap.Totals[i][k]
			}
			recs = append(recs, r)
		}
	})
	if sweepErr != nil {
		if len(recs) == 0 {
			return fmt.Errorf("fabric sweep: %w", sweepErr)
		}
		fmt.Fprintf(stderr, "warning: %v\n", sweepErr) // some ports did not answer
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(struct {
			SweepSeconds float64       `json:"sweep_seconds"`
			TotalSeconds float64       `json:"total_seconds"`
			MADSeconds   float64       `json:"mad_seconds"`
			Links        []sweepRecord `json:"links"`
		}{sweepTime.Seconds(), total.Seconds(), madTime.Seconds(), recs})
	}
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "SWITCH\tGUID\tPORT\t→ REMOTE\tREMOTE GUID\tPORT\tSTATE\tRATE\tXMIT_DATA\tRCV_DATA\tXMIT_WAIT\tSYMBOL_ERR\tDISCARDS")
	for _, r := range recs {
		fmt.Fprintf(tw, "%s\t%s\t%d\t→ %s\t%s\t%d\t%s\t%s\t%d\t%d\t%d\t%d\t%d\n", r.Switch, r.SwitchGUID, r.Port, r.Remote, r.RemoteGUID,
			r.RemotePort, r.State, r.Rate, r.Counters["xmit_data"], r.Counters["rcv_data"], r.Counters["xmit_wait"],
			r.Counters["symbol_errors"], r.Counters["xmit_discards"])
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	_, err = fmt.Fprintf(stdout, "%d links, sweep %.3f s (discovery included), %.1f µs per MAD\n", len(recs), sweepTime.Seconds(), madTime.Seconds()*1e6)
	return err
}
