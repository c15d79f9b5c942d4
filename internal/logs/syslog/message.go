// Package syslog parses syslog messages (RFC 3164 and RFC 5424), splits TCP
// streams into frames (newline or octet counting, detected per message) and
// runs the UDP, TCP and TLS listeners that feed them to a Sink.
package syslog

import (
	"errors"
	"time"
)

// Severity levels, RFC 5424 section 6.2.1. Lower is more severe.
const (
	SevEmerg uint8 = iota
	SevAlert
	SevCrit
	SevErr
	SevWarning
	SevNotice
	SevInfo
	SevDebug
)

// Defaults used when a message carries no PRI (RFC 3164 section 4.3.3).
const (
	defaultFacility = 1 // user
	defaultSeverity = SevNotice
)

var severityNames = [...]string{"emerg", "alert", "crit", "err", "warning", "notice", "info", "debug"}

// SeverityName returns the keyword for a severity ("warning"), or "" when
// out of range.
func SeverityName(s uint8) string {
	if int(s) < len(severityNames) {
		return severityNames[s]
	}
	return ""
}

// ParseSeverity accepts a keyword (with the common aliases "error", "warn",
// "emergency", "critical", "panic") or a number 0..7.
func ParseSeverity(s string) (uint8, error) {
	switch s {
	case "emerg", "emergency", "panic", "0":
		return SevEmerg, nil
	case "alert", "1":
		return SevAlert, nil
	case "crit", "critical", "2":
		return SevCrit, nil
	case "err", "error", "3":
		return SevErr, nil
	case "warning", "warn", "4":
		return SevWarning, nil
	case "notice", "5":
		return SevNotice, nil
	case "info", "informational", "6":
		return SevInfo, nil
	case "debug", "7":
		return SevDebug, nil
	}
	return 0, errors.New("unknown severity " + quote(s) + " (want emerg, alert, crit, err, warning, notice, info, debug or 0..7)")
}

func quote(s string) string {
	if len(s) > 64 {
		s = s[:64] + "..."
	}
	return "\"" + s + "\""
}

// Message is one parsed syslog message. The string fields share the memory
// of one copy of the frame, so a Message keeps its whole frame alive.
type Message struct {
	Time     time.Time // from the message; the receive time when absent or unparseable
	Received time.Time
	Host     string // from the message; the sender's address when absent
	App      string // RFC 3164 TAG or RFC 5424 APP-NAME
	ProcID   string
	MsgID    string
	SD       string // RFC 5424 STRUCTURED-DATA as sent, "" for "-"
	Text     string // MSG, or the whole frame when Malformed
	Facility uint8
	Severity uint8
	// Malformed marks a frame that did not follow either RFC; Text then holds
	// the whole frame and the other fields what could be parsed before the
	// error.
	Malformed bool
	// Truncated marks a frame cut at the configured maximum size.
	Truncated bool
	// Reliable marks a message received over RELP (acknowledged once
	// stored).
	Reliable bool
}
