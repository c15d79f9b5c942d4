// Package dmi reports the machine's DMI (SMBIOS) identity from
// /sys/class/dmi/id (node_exporter's dmi collector).
package dmi

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/vigil-hpc/vigil/internal/kernfs"
	"github.com/vigil-hpc/vigil/internal/metric"
	"github.com/vigil-hpc/vigil/internal/sampler"
	"github.com/vigil-hpc/vigil/internal/sampler/plugins/infodesc"
)

//go:embed sample.toml
var sampleConfig string

func init() {
	sampler.Register(sampler.Registration{
		Name:         "dmi",
		Description:  "DMI identity (BIOS, board, chassis, product) from /sys/class/dmi/id",
		Default:      true,
		New:          func(sampler.Configurable) sampler.Plugin { return &DMI{} },
		SampleConfig: sampleConfig,
	})
}

// labels maps the files of /sys/class/dmi/id to label names, sorted by
// label name.
var labels = [...][2]string{
	{"bios_date", "bios_date"}, {"bios_release", "bios_release"}, {"bios_vendor", "bios_vendor"},
	{"bios_version", "bios_version"}, {"board_asset_tag", "board_asset_tag"}, {"board_name", "board_name"},
	{"board_serial", "board_serial"}, {"board_vendor", "board_vendor"}, {"board_version", "board_version"},
	{"chassis_asset_tag", "chassis_asset_tag"}, {"chassis_serial", "chassis_serial"},
	{"chassis_vendor", "chassis_vendor"}, {"chassis_version", "chassis_version"},
	{"product_family", "product_family"}, {"product_name", "product_name"}, {"product_serial", "product_serial"},
	{"product_sku", "product_sku"}, {"product_uuid", "product_uuid"}, {"product_version", "product_version"},
	{"sys_vendor", "system_vendor"},
}

const help = "A metric with a constant '1' value labeled by bios_date, bios_release, bios_vendor, bios_version, " +
	"board_asset_tag, board_name, board_serial, board_vendor, board_version, chassis_asset_tag, " +
	"chassis_serial, chassis_vendor, chassis_version, product_family, product_name, product_serial, " +
	"product_sku, product_uuid, product_version, system_vendor if provided by DMI."

// DMI is the dmi plugin.
type DMI struct {
	desc *metric.Desc
}

// Init reads the identity once: it does not change until the next boot.
// Files only root may read (the serials and UUID, mode 0400) are left out,
// as upstream does.
func (d *DMI) Init(env sampler.Env) error {
	dir := env.FS.Path("sys", "class", "dmi", "id")
	var pairs []string
	for _, l := range labels {
		b, err := os.ReadFile(filepath.Join(dir, l[0]))
		switch {
		case err == nil:
		case errors.Is(err, os.ErrNotExist) || errors.Is(err, os.ErrPermission):
			continue
		default:
			return fmt.Errorf("dmi: %w", err)
		}
		v := string(infodesc.Clip(kernfs.TrimSpace(b)))
		pairs = append(pairs, l[1], strings.ToValidUTF8(v, "\uFFFD"))
	}
	if len(pairs) == 0 {
		return sampler.ErrNotAvailable // no DMI (ARM boards, some VMs)
	}
	d.desc = metric.NewDesc("node_dmi_info", help, metric.Gauge, pairs...)
	return nil
}

// Sample reports the one info series.
func (d *DMI) Sample(_ context.Context, _ time.Time, b *metric.Batch) error {
	b.Add(d.desc, 1)
	return nil
}
