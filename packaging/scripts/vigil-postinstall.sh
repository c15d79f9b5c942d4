#!/bin/sh
# Package vigil.
# Units are not enabled here: configuration management enables them once
# the site's config is in place (systemctl enable --now UNIT). An upgrade
# restarts the units that were running.
set -e
VIGIL_UNITS="vigil-aggregator.service vigil-server.service"
if [ -d /var/lib/vigil ]; then
	chown vigil:vigil /var/lib/vigil
	chmod 0750 /var/lib/vigil
fi
if [ -d /run/systemd/system ]; then
	systemctl daemon-reload >/dev/null || true
	for unit in $VIGIL_UNITS; do
		systemctl try-restart "$unit" >/dev/null || true
	done
fi
exit 0
