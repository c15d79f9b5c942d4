package ibnet

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
)

// Width is PortInfo.LinkWidthActive as "4x" and its lane count.
func Width(enc int) (string, int) {
	switch enc {
	case 1:
		return "1x", 1
	case 2:
		return "4x", 4
	case 4:
		return "8x", 8
	case 8:
		return "12x", 12
	case 16:
		return "2x", 2
	}
	return "unknown", 0
}

// Speed is the active lane speed as "EDR", its signalling rate and its
// data rate per lane in Gb/s (after 8b/10b or 64b/66b encoding).
func Speed(speed, espeed int) (name string, signal, data float64) {
	switch espeed {
	case 1:
		return "FDR", 14.0625, 13.636
	case 2:
		return "EDR", 25.78125, 25
	case 4:
		return "HDR", 53.125, 50
	case 8:
		return "NDR", 106.25, 100
	}
	switch speed {
	case 1:
		return "SDR", 2.5, 2
	case 2:
		return "DDR", 5, 4
	case 4:
		return "QDR", 10, 8
	}
	return "unknown", 0, 0
}

// Rate describes a link's speed: the rate string as ibstat prints it
// ("100 Gb/s": lanes × nominal lane rate), width, speed and the data
// capacity in bytes per second.
func (l *Link) Rate() (rate, width, speed string, bytesPerSecond float64) {
	width, lanes := Width(l.Width)
	speed, signal, data := Speed(l.Speed, l.ESpeed)
	nominal := signal
	switch speed { // the marketing rates
	case "FDR":
		nominal = 14
	case "EDR":
		nominal = 25
	case "HDR":
		nominal = 50
	case "NDR":
		nominal = 100
	}
	return strconv.FormatFloat(nominal*float64(lanes), 'f', -1, 64) + " Gb/s", width, speed,
		data * float64(lanes) * 1e9 / 8
}

// GUID formats a GUID as in the series labels: 0x and 16 hex digits.
func GUID(g uint64) string { return fmt.Sprintf("0x%016x", g) }

// RemoteTypeName is "switch" or "ca" for the remote_type label.
func RemoteTypeName(t int) string {
	switch t {
	case TypeSwitch:
		return "switch"
	case TypeCA:
		return "ca"
	case 3:
		return "router"
	}
	return "unknown"
}

// HelperName is the helper's file name.
const HelperName = "vigil-ibmad"

// FindHelper locates vigil-ibmad: path if given, else next to the running
// executable (bin/), else on PATH.
func FindHelper(path string) (string, error) {
	if path != "" {
		return path, nil
	}
	if exe, err := os.Executable(); err == nil {
		p := filepath.Join(filepath.Dir(exe), HelperName)
		if st, err := os.Stat(p); err == nil && !st.IsDir() {
			return p, nil
		}
	}
	p, err := exec.LookPath(HelperName)
	if err != nil {
		return "", fmt.Errorf("%s not found next to this program nor on PATH (make build builds it where the libibmad headers are installed): %w", HelperName, err)
	}
	return p, nil
}
