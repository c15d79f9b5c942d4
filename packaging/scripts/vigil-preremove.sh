#!/bin/sh
# Package vigil.
# Stop the units on removal (dpkg: remove; rpm: 0 left), not on upgrade.
set -e
VIGIL_UNITS="vigil-aggregator.service vigil-server.service"
case "$1" in
remove|0) ;;
*) exit 0 ;;
esac
if [ -d /run/systemd/system ]; then
	for unit in $VIGIL_UNITS; do
		systemctl disable --now "$unit" >/dev/null 2>&1 || true
	done
fi
exit 0
