package infiniband

// counter maps one sysfs counter file to node_exporter's series (after
// node_infiniband_).
type counter struct {
	file, metric, help string
	// mult: port_*_data counts 4-byte words ("divided by 4 unconditionally",
	// per lane), so node_exporter multiplies by 4 to get octets.
	mult uint64
	// sat32: a 32-bit PMA counter (no extended counters) that stops at
	// 2^32-1 instead of wrapping; a saturated value is left out.
	sat32 bool
	// lifespan: a gauge in ms, exported in whole seconds as node_exporter does.
	lifespan bool
}

// portCounters are the files of ports/<n>/counters.
var portCounters = [...]counter{
	{"excessive_buffer_overrun_errors", "excessive_buffer_overrun_errors_total", "Number of times that OverrunErrors consecutive flow control update periods occurred, each having at least one overrun error.", 1, false, false},
	{"link_downed", "link_downed_total", "Number of times the link failed to recover from an error state and went down", 1, false, false},
	{"link_error_recovery", "link_error_recovery_total", "Number of times the link successfully recovered from an error state", 1, false, false},
	{"local_link_integrity_errors", "local_link_integrity_errors_total", "Number of times that the count of local physical errors exceeded the threshold specified by LocalPhyErrors.", 1, false, false},
	{"multicast_rcv_packets", "multicast_packets_received_total", "Number of multicast packets received (including errors)", 1, false, false},
	{"multicast_xmit_packets", "multicast_packets_transmitted_total", "Number of multicast packets transmitted (including errors)", 1, false, false},
	{"port_rcv_constraint_errors", "port_constraint_errors_received_total", "Number of packets received on the switch physical port that are discarded", 1, false, false},
	{"port_rcv_data", "port_data_received_bytes_total", "Number of data octets received on all links", 4, true, false},
	{"port_rcv_discards", "port_discards_received_total", "Number of inbound packets discarded by the port because the port is down or congested", 1, false, false},
	{"port_rcv_errors", "port_errors_received_total", "Number of packets containing an error that were received on this port", 1, false, false},
	{"port_rcv_packets", "port_packets_received_total", "Number of packets received on all VLs by this port (including errors)", 1, true, false},
	{"port_rcv_remote_physical_errors", "port_receive_remote_physical_errors_total", "Number of packets marked with the EBP (End of Bad Packet) delimiter received on the port.", 1, false, false},
	{"port_rcv_switch_relay_errors", "port_receive_switch_relay_errors_total", "Number of packets that could not be forwarded by the switch.", 1, false, false},
	{"port_xmit_constraint_errors", "port_constraint_errors_transmitted_total", "Number of packets not transmitted from the switch physical port", 1, false, false},
	{"port_xmit_data", "port_data_transmitted_bytes_total", "Number of data octets transmitted on all links", 4, true, false},
	{"port_xmit_discards", "port_discards_transmitted_total", "Number of outbound packets discarded by the port because the port is down or congested", 1, false, false},
	{"port_xmit_packets", "port_packets_transmitted_total", "Number of packets transmitted on all VLs from this port (including errors)", 1, true, false},
	{"port_xmit_wait", "port_transmit_wait_total", "Number of ticks during which the port had data to transmit but no data was sent during the entire tick", 1, true, false},
	{"symbol_error", "symbol_error_total", "Number of minor link errors detected on one or more physical lanes.", 1, false, false},
	{"unicast_rcv_packets", "unicast_packets_received_total", "Number of unicast packets received (including errors)", 1, false, false},
	{"unicast_xmit_packets", "unicast_packets_transmitted_total", "Number of unicast packets transmitted (including errors)", 1, false, false},
	{"VL15_dropped", "vl15_dropped_total", "Number of incoming VL15 packets dropped due to resource limitations.", 1, false, false},
}

// extCounters are ports/<n>/counters_ext (64-bit counters before Linux 4.5).
var extCounters = [...]counter{
	{"port_multicast_rcv_packets", "legacy_multicast_packets_received_total", "Number of multicast packets received", 1, false, false},
	{"port_multicast_xmit_packets", "legacy_multicast_packets_transmitted_total", "Number of multicast packets transmitted", 1, false, false},
	{"port_rcv_data_64", "legacy_data_received_bytes_total", "Number of data octets received on all links", 4, false, false},
	{"port_rcv_packets_64", "legacy_packets_received_total", "Number of data packets received on all links", 1, false, false},
	{"port_unicast_rcv_packets", "legacy_unicast_packets_received_total", "Number of unicast packets received", 1, false, false},
	{"port_unicast_xmit_packets", "legacy_unicast_packets_transmitted_total", "Number of unicast packets transmitted", 1, false, false},
	{"port_xmit_data_64", "legacy_data_transmitted_bytes_total", "Number of data octets transmitted on all links", 4, false, false},
	{"port_xmit_packets_64", "legacy_packets_transmitted_total", "Number of data packets received on all links", 1, false, false},
}

// hwCounters are ports/<n>/hw_counters (mlx5, irdma; Linux 4.6+).
var hwCounters = [...]counter{
	{"duplicate_request", "duplicate_requests_packets_total", "The number of received packets. A duplicate request is a request that had been previously executed.", 1, false, false},
	{"implied_nak_seq_err", "implied_nak_seq_errors_total", "The number of time the requested decided an ACK. with a PSN larger than the expected PSN for an RDMA read or response.", 1, false, false},
	{"lifespan", "lifespan_seconds", "The maximum period in ms which defines the aging of the counter reads. Two consecutive reads within this period might return the same values.", 1, false, true},
	{"local_ack_timeout_err", "local_ack_timeout_errors_total", "The number of times QP's ack timer expired for RC, XRC, DCT QPs at the sender side. The QP retry limit was not exceed, therefore it is still recoverable error.", 1, false, false},
	{"np_cnp_sent", "np_cnp_packets_sent_total", "The number of CNP packets sent by the Notification Point when it noticed congestion experienced in the RoCEv2 IP header (ECN bits).", 1, false, false},
	{"np_ecn_marked_roce_packets", "np_ecn_marked_roce_packets_received_total", "The number of RoCEv2 packets received by the notification point which were marked for experiencing the congestion.", 1, false, false},
	{"out_of_buffer", "out_of_buffer_drops_total", "The number of drops occurred due to lack of WQE for the associated QPs.", 1, false, false},
	{"out_of_sequence", "out_of_sequence_packets_received_total", "The number of out of sequence packets received.", 1, false, false},
	{"packet_seq_err", "packet_sequence_errors_total", "The number of received NAK sequence error packets. The QP retry limit was not exceeded.", 1, false, false},
	{"req_cqe_error", "req_cqes_errors_total", "The number of times requester detected CQEs completed with errors.", 1, false, false},
	{"req_cqe_flush_error", "req_cqes_flush_errors_total", "The number of times requester detected CQEs completed with flushed errors.", 1, false, false},
	{"req_remote_access_errors", "req_remote_access_errors_total", "The number of times requester detected remote access errors.", 1, false, false},
	{"req_remote_invalid_request", "req_remote_invalid_request_errors_total", "The number of times requester detected remote invalid request errors.", 1, false, false},
	{"resp_cqe_error", "resp_cqes_errors_total", "The number of times responder detected CQEs completed with errors.", 1, false, false},
	{"resp_cqe_flush_error", "resp_cqes_flush_errors_total", "The number of times responder detected CQEs completed with flushed errors.", 1, false, false},
	{"resp_local_length_error", "resp_local_length_errors_total", "The number of times responder detected local length errors.", 1, false, false},
	{"resp_remote_access_errors", "resp_remote_access_errors_total", "The number of times responder detected remote access errors.", 1, false, false},
	{"rnr_nak_retry_err", "rnr_nak_retry_packets_received_total", "The number of received RNR NAK packets. The QP retry limit was not exceeded.", 1, false, false},
	{"roce_adp_retrans", "roce_adp_retransmits_total", "The number of adaptive retransmissions for RoCE traffic.", 1, false, false},
	{"roce_adp_retrans_to", "roce_adp_retransmits_timeout_total", "The number of times RoCE traffic reached timeout due to adaptive retransmission.", 1, false, false},
	{"roce_slow_restart", "roce_slow_restart_used_total", "The number of times RoCE slow restart was used.", 1, false, false},
	{"roce_slow_restart_cnps", "roce_slow_restart_cnps_total", "The number of times RoCE slow restart generated CNP packets.", 1, false, false},
	{"roce_slow_restart_trans", "roce_slow_restart_total", "The number of times RoCE slow restart changed state to slow restart.", 1, false, false},
	{"rp_cnp_handled", "rp_cnp_packets_handled_total", "The number of CNP packets handled by the Reaction Point HCA to throttle the transmission rate.", 1, false, false},
	{"rp_cnp_ignored", "rp_cnp_ignored_packets_received_total", "The number of CNP packets received and ignored by the Reaction Point HCA.", 1, false, false},
	{"rx_atomic_requests", "rx_atomic_requests_total", "The number of received ATOMIC request for the associated QPs.", 1, false, false},
	{"rx_dct_connect", "rx_dct_connect_requests_total", "The number of received connection requests for the associated DCTs.", 1, false, false},
	{"rx_icrc_encapsulated", "rx_icrc_encapsulated_errors_total", "The number of RoCE packets with ICRC errors.", 1, false, false},
	{"rx_read_requests", "rx_read_requests_total", "The number of received READ requests for the associated QPs.", 1, false, false},
	{"rx_write_requests", "rx_write_requests_total", "The number of received WRITE requests for the associated QPs.", 1, false, false},
}
