# SPDX-License-Identifier: GPL-2.0
#
# NVMe over RDMA helpers shared by rxe_rust_nvme.sh (both ends in one VM)
# and rxe_rust_nvme_peer.sh (one end per host, for scripts/interop).
# Sourced, bash, after rxe_rust_lib.sh. The caller sets IP4 (the target's
# address) and DEV (its RDMA device).

# The subsystem, the host's identity and the service both ends use.
NQN=nqn.2026-11.org.kernel:rxe-rust-nvme
HOSTNQN=nqn.2014-08.org.nvmexpress:uuid:6c1d8a57-2f0b-4c59-9a7e-7a1e5d0c0de1
HOSTID=6c1d8a57-2f0b-4c59-9a7e-7a1e5d0c0de1
SVC=4420
NVMET=/sys/kernel/config/nvmet

# One I/O queue of the minimum depth: each queue costs the host a set of
# fast-registration MRs, and the debug kernel makes each allocation slow.
CONNECT_OPTS="--nr-io-queues=1 --queue-size=16 --hostnqn=$HOSTNQN --hostid=$HOSTID"

# Sets CTRL to the controller (nvmeN) the host has for our subsystem; fails
# if there is none. Shell built-ins only: on the debug kernel each program
# started costs 0.2 s of CPU time or more, and the cycles poll this.
find_controller() {
	local c q
	CTRL=
	for c in /sys/class/nvme/nvme*; do
		read -r q 2>/dev/null <"$c/subsysnqn" || continue
		[ "$q" = "$NQN" ] && { CTRL=${c##*/}; return 0; }
	done
	return 1
}

controller() {
	find_controller && echo "$CTRL"
}

# Sets NSDEV to the block device of our subsystem's namespace 1
# (/dev/nvmeXn1), once it exists: its parent is our controller (the test
# kernel has no NVMe multipath, whose head disks would hang off the
# subsystem instead).
find_namespace() {
	local n
	NSDEV=
	find_controller || return 1
	for n in /sys/class/nvme/"$CTRL"/nvme*n1; do
		n=/dev/${n##*/}
		[ -b "$n" ] && { NSDEV=$n; return 0; }
	done
	return 1
}

namespace_dev() {
	find_namespace && echo "$NSDEV"
}

no_controller() {
	! find_controller
}

# Exports /dev/nullb0 as namespace 1 of $NQN over rdma on $IP4:$SVC.
target_setup() {
	local s=$NVMET/subsystems/$NQN p=$NVMET/ports/1
	mountpoint -q /sys/kernel/config || mount -t configfs none /sys/kernel/config || return 1
	modprobe nvmet && modprobe nvmet-rdma || return 1
	mkdir "$s" && echo 1 >"$s/attr_allow_any_host" &&
		mkdir "$s/namespaces/1" &&
		echo -n /dev/nullb0 >"$s/namespaces/1/device_path" &&
		echo 1 >"$s/namespaces/1/enable" &&
		mkdir "$p" && echo rdma >"$p/addr_trtype" && echo ipv4 >"$p/addr_adrfam" &&
		echo $IP4 >"$p/addr_traddr" && echo $SVC >"$p/addr_trsvcid" &&
		ln -s "$s" "$p/subsystems/$NQN"
}

# Connects with nvme-cli and waits for the namespace's block device.
nvme_connect() {
	nvme connect -t rdma -a $IP4 -s $SVC -n $NQN $CONNECT_OPTS || return 1
	WAIT_SECONDS=30 wait_for find_namespace || {
		echo "no block device for $NQN after connecting"
		ls /sys/class/nvme /sys/block
		return 1
	}
}

# Disconnects our controller (only ours) and waits until it is gone.
nvme_disconnect() {
	nvme disconnect -n $NQN >/dev/null || return 1
	WAIT_SECONDS=30 wait_for no_controller || { echo "controller $(controller) still there"; return 1; }
}

# Connects as nvme-cli does, with shell built-ins: writes the options to
# /dev/nvme-fabrics and reads back "instance=N,cntlid=M". nvme-cli costs a
# second of CPU time per run on the debug kernel; the kernel's work is the
# same (the first connect and disconnect of each driver go through nvme-cli).
fabrics_connect() {
	local fd line
	exec {fd}<>/dev/nvme-fabrics || return 1
	printf '%s' "nqn=$NQN,transport=rdma,traddr=$IP4,trsvcid=$SVC,hostnqn=$HOSTNQN,hostid=$HOSTID,nr_io_queues=1,queue_size=16" >&$fd &&
		read -r line <&$fd
	exec {fd}>&-
	case $line in
	instance=*) echo "connected: $line" ;;
	*) echo "no controller from /dev/nvme-fabrics: '$line'"; return 1 ;;
	esac
	WAIT_SECONDS=30 wait_for find_namespace || {
		echo "no block device for $NQN after connecting"
		return 1
	}
}

# Deletes our controller as nvme disconnect does (delete_controller returns
# once it is gone) and checks that it is.
fabrics_disconnect() {
	find_controller || { echo "no controller to disconnect"; return 1; }
	echo 1 >"/sys/class/nvme/$CTRL/delete_controller" || return 1
	WAIT_SECONDS=30 wait_for no_controller || { echo "controller $CTRL still there"; return 1; }
}

# The device's verbs objects by kind ("pd 3 cq 5 qp 5 ..."), from rdma resource show.
resources() {
	rdma resource show | sed -n "s/^[0-9]*: $DEV: //p"
}

same_resources() {
	[ "$(resources)" = "$1" ]
}

# Succeeds once the device has $1 queue pairs.
qps_are() {
	[ "$(resources | sed -n 's/.* qp \([0-9]*\) .*/\1/p')" = "$1" ]
}

# Undoes target_setup (the modules stay).
target_teardown() {
	local s=$NVMET/subsystems/$NQN p=$NVMET/ports/1
	[ -L "$p/subsystems/$NQN" ] && rm "$p/subsystems/$NQN"
	[ -d "$p" ] && rmdir "$p"
	if [ -d "$s" ]; then
		echo 0 >"$s/namespaces/1/enable"
		rmdir "$s/namespaces/1" && rmdir "$s"
	fi
	return 0
}

