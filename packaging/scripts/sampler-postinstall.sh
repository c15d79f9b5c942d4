#!/bin/sh
# Package vigil-sampler.
# Units are not enabled here: configuration management enables them once
# the site's config is in place (systemctl enable --now UNIT). An upgrade
# restarts the units that were running.
set -e
VIGIL_UNITS="vigil-sampler.service"
if [ -d /run/systemd/system ]; then
	systemctl daemon-reload >/dev/null || true
	for unit in $VIGIL_UNITS; do
		systemctl try-restart "$unit" >/dev/null || true
	done
fi
exit 0
