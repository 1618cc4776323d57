#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# rdma_rxe_rust refuses bad requests with a clear error and stays usable:
# unknown and VLAN netdevices, the same netdevice twice, a duplicate device
# name, and loading it while the C driver rdma_rxe is loaded (and the other
# way round).

source "$(dirname "$0")/rxe_rust_lib.sh"

cleanup() {
	rdma link del rxe0 2>/dev/null
	rdma link del rxd0 2>/dev/null
	ip link del eth0.7 2>/dev/null
	ip link del dum0 2>/dev/null
	ip link del dum1 2>/dev/null
	unload_all
}
trap cleanup EXIT

ko=$(modinfo -n $RXE_RUST 2>/dev/null)

ktap_print_header
ktap_set_plan 19
unload_all
# The log checks below read only what this run wrote: with a large kernel
# log ring, an earlier suite's identical message would otherwise pass them.
MARKER="rxe_rust_bad_input: start $$"
echo "$MARKER" >/dev/kmsg
# Succeeds if the kernel log holds the text $1 since the marker.
logged() {
	log_since "$MARKER" | grep -qF -- "$1"
}
modprobe $RXE_RUST
ip link add dum0 type dummy && ip link set dum0 up
ip link add dum1 type dummy && ip link set dum1 up

check "unknown netdevice: No such device" \
	fails_with "No such device" rdma link add rxe9 type rxe netdev nosuch0
check "VLAN netdevice: Operation not permitted" \
	bash -c "ip link add link eth0 name eth0.7 type vlan id 7 && $(declare -f fails_with); fails_with 'Operation not permitted' rdma link add rxe9 type rxe netdev eth0.7"
check "no device was left by the refused requests" bash -c "! rdma dev show rxe9 2>/dev/null"
check "first link on dum0" rdma link add rxd0 type rxe netdev dum0
check "same netdevice twice: File exists" \
	fails_with "File exists" rdma link add rxd1 type rxe netdev dum0
# The RDMA core answers a taken name with ENFILE, for the C driver too.
check "duplicate device name on another netdevice: ENFILE, as with rdma_rxe" \
	fails_with "Too many open files in system" rdma link add rxd0 type rxe netdev dum1
check "no stray device from the duplicates" \
	bash -c "! rdma dev show rxd1 2>/dev/null && [ \$(rdma dev show | grep -c rxd0) -eq 1 ]"
check "dum1 is still free for a device" \
	bash -c "rdma link add rxd2 type rxe netdev dum1 && rdma link del rxd2"
check "the first device still works" ibv_devinfo -d rxd0
check "dmesg names the refused VLAN request" \
	logged "rxe creation allowed on top of a real device only"
check "dmesg names the duplicate netdevice" logged "already configured on dum0"

# Rust driver with devices present: the C driver must not load.
check "modprobe rdma_rxe while rdma_rxe_rust is loaded fails with a message" \
	fails_with "rdma_rxe_rust is loaded" modprobe $RXE_C
check "rdma_rxe is not loaded, rxd0 unaffected" \
	bash -c "! grep -q '^rdma_rxe ' /proc/modules && ibv_devinfo -d rxd0 >/dev/null"
check "rmmod rdma_rxe_rust with a device present removes it" \
	bash -c "rmmod $RXE_RUST && ! rdma dev show rxd0 2>/dev/null"

# C driver loaded: ours must refuse to load, cleanly.
modprobe $RXE_C && rdma link add rxe0 type rxe netdev eth0
check "modprobe rdma_rxe_rust while rdma_rxe is loaded fails with a message" \
	fails_with "rdma_rxe is loaded" modprobe $RXE_RUST
check "insmod of the module file itself fails with EBUSY" \
	fails_with "Device or resource busy" insmod "$ko"
check "the module's refusal is explained in the kernel log" \
	logged "link type 'rxe' is provided by module rdma_rxe, which is loaded"
check "the C driver's device still works" \
	bash -c "ibv_devinfo -d rxe0 >/dev/null && rdma link del rxe0 && rmmod $RXE_C"
check "rdma_rxe_rust loads once rdma_rxe is gone" \
	bash -c "modprobe $RXE_RUST && rdma link add rxe0 type rxe netdev eth0 && rdma link del rxe0 && rmmod $RXE_RUST"
ktap_finished
