#!/usr/bin/env bash
# Emulated hosts on this machine (root): create N network+mount namespaces joined by a bridge,
# print their addresses and prefixes, run a command in each at once, print per-host wire
# bytes, tear everything down. Examples:
#   bash scripts/testhosts.sh -n 3 --bandwidth 1gbit -- sh -c 'ip -br addr; echo $TESTHOST_INDEX'
#   bash scripts/testhosts.sh --sweep          # remove leftovers of killed jobs
source "$(dirname "${BASH_SOURCE[0]}")/_bootstrap.sh"
exec python -m dgl_grappa.cluster.testhosts "$@"
