#!/bin/sh
# Package vigil.
# Purge (dpkg only) removes the data directory. The vigil user and group
# stay, as Debian does for system users: files it owns may remain
# elsewhere, and the other Vigil package may still use it.
set -e
if [ -d /run/systemd/system ]; then
	systemctl daemon-reload >/dev/null || true
fi
if [ "$1" = purge ]; then
	rm -rf /var/lib/vigil
fi
exit 0
