#!/bin/sh
# Fails while /tmp/golden-2411-munge/fail-prolog exists (provokes REQUEST_JOB_REQUEUE).
[ -e /tmp/golden-2411-munge/fail-prolog ] && exit 1
exit 0
