/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Tracepoints on the packet path of the Rust Soft-RoCE driver
 * (drivers/infiniband/sw/rxe_rust): packets sent and received, packets
 * dropped with the reason, retransmissions, RNR NAKs and work completions.
 *
 * The events are created in the driver module (rxe_rust_trace.c) and called
 * from Rust through rust/kernel/rdma/trace.rs. Devices are named by their
 * index, as `rdma dev` shows it; QP numbers are the local queue pair's.
 */

#undef TRACE_SYSTEM
#define TRACE_SYSTEM rxe_rust

#if !defined(_TRACE_RXE_RUST_H) || defined(TRACE_HEADER_MULTI_READ)
#define _TRACE_RXE_RUST_H

#include <linux/tracepoint.h>
#include <rdma/ib_cm.h>
#include <rdma/ib_pack.h>
#include <rdma/rdma_cm.h>
/* rdma_show_wc_status(), which needs the two CM headers too. */
#include <trace/misc/rdma.h>

/* The opcodes of the transports the driver implements (IBTA 9.2). */
#define RXE_RUST_OPCODE_LIST					\
	rxe_op(RC_SEND_FIRST)					\
	rxe_op(RC_SEND_MIDDLE)					\
	rxe_op(RC_SEND_LAST)					\
	rxe_op(RC_SEND_LAST_WITH_IMMEDIATE)			\
	rxe_op(RC_SEND_ONLY)					\
	rxe_op(RC_SEND_ONLY_WITH_IMMEDIATE)			\
	rxe_op(RC_RDMA_WRITE_FIRST)				\
	rxe_op(RC_RDMA_WRITE_MIDDLE)				\
	rxe_op(RC_RDMA_WRITE_LAST)				\
	rxe_op(RC_RDMA_WRITE_LAST_WITH_IMMEDIATE)		\
	rxe_op(RC_RDMA_WRITE_ONLY)				\
	rxe_op(RC_RDMA_WRITE_ONLY_WITH_IMMEDIATE)		\
	rxe_op(RC_RDMA_READ_REQUEST)				\
	rxe_op(RC_RDMA_READ_RESPONSE_FIRST)			\
	rxe_op(RC_RDMA_READ_RESPONSE_MIDDLE)			\
	rxe_op(RC_RDMA_READ_RESPONSE_LAST)			\
	rxe_op(RC_RDMA_READ_RESPONSE_ONLY)			\
	rxe_op(RC_ACKNOWLEDGE)					\
	rxe_op(RC_ATOMIC_ACKNOWLEDGE)				\
	rxe_op(RC_COMPARE_SWAP)					\
	rxe_op(RC_FETCH_ADD)					\
	rxe_op(RC_SEND_LAST_WITH_INVALIDATE)			\
	rxe_op(RC_SEND_ONLY_WITH_INVALIDATE)			\
	rxe_op(RC_FLUSH)					\
	rxe_op(RC_ATOMIC_WRITE)					\
	rxe_op(UC_SEND_FIRST)					\
	rxe_op(UC_SEND_MIDDLE)					\
	rxe_op(UC_SEND_LAST)					\
	rxe_op(UC_SEND_LAST_WITH_IMMEDIATE)			\
	rxe_op(UC_SEND_ONLY)					\
	rxe_op(UC_SEND_ONLY_WITH_IMMEDIATE)			\
	rxe_op(UC_RDMA_WRITE_FIRST)				\
	rxe_op(UC_RDMA_WRITE_MIDDLE)				\
	rxe_op(UC_RDMA_WRITE_LAST)				\
	rxe_op(UC_RDMA_WRITE_LAST_WITH_IMMEDIATE)		\
	rxe_op(UC_RDMA_WRITE_ONLY)				\
	rxe_op(UC_RDMA_WRITE_ONLY_WITH_IMMEDIATE)		\
	rxe_op(UD_SEND_ONLY)					\
	rxe_op_end(UD_SEND_ONLY_WITH_IMMEDIATE)

#undef rxe_op
#undef rxe_op_end
#define rxe_op(x)	TRACE_DEFINE_ENUM(IB_OPCODE_##x);
#define rxe_op_end(x)	TRACE_DEFINE_ENUM(IB_OPCODE_##x);

RXE_RUST_OPCODE_LIST

#undef rxe_op
#undef rxe_op_end
#define rxe_op(x)	{ IB_OPCODE_##x, #x },
#define rxe_op_end(x)	{ IB_OPCODE_##x, #x }

#define rxe_rust_show_opcode(x) \
	__print_symbolic(x, RXE_RUST_OPCODE_LIST)

/* Why a requester sends again what it sent (the Rust side uses these). */
#ifndef _TRACE_RXE_RUST_ENUMS
#define _TRACE_RXE_RUST_ENUMS
enum rxe_rust_retransmit_cause {
	RXE_RUST_RETRANSMIT_NAK,	/* a NAK: a transport retry */
	RXE_RUST_RETRANSMIT_TIMEOUT,	/* the local ACK timeout: a retry */
	RXE_RUST_RETRANSMIT_REORDER,	/* an implied NAK's window: a retry */
	RXE_RUST_RETRANSMIT_TAIL_PROBE,	/* the last packet, before the timeout */
	RXE_RUST_RETRANSMIT_RNR,	/* the request an RNR NAK refused */
};
#endif

TRACE_DEFINE_ENUM(RXE_RUST_RETRANSMIT_NAK);
TRACE_DEFINE_ENUM(RXE_RUST_RETRANSMIT_TIMEOUT);
TRACE_DEFINE_ENUM(RXE_RUST_RETRANSMIT_REORDER);
TRACE_DEFINE_ENUM(RXE_RUST_RETRANSMIT_TAIL_PROBE);
TRACE_DEFINE_ENUM(RXE_RUST_RETRANSMIT_RNR);

/*
 * linear counts the bytes of a packet that are in one piece, from the BTH:
 * fewer than len for a received datagram whose payload is read from its
 * pages where it came, without making it linear first.
 */
DECLARE_EVENT_CLASS(rxe_rust_packet_class,
	TP_PROTO(u32 dev, u32 qpn, u32 dest_qpn, u8 opcode, u32 psn, u32 len,
		 u32 linear),
	TP_ARGS(dev, qpn, dest_qpn, opcode, psn, len, linear),
	TP_STRUCT__entry(
		__field(u32, dev)
		__field(u32, qpn)
		__field(u32, dest_qpn)
		__field(u32, psn)
		__field(u32, len)
		__field(u32, linear)
		__field(u8, opcode)
	),
	TP_fast_assign(
		__entry->dev = dev;
		__entry->qpn = qpn;
		__entry->dest_qpn = dest_qpn;
		__entry->psn = psn;
		__entry->len = len;
		__entry->linear = linear;
		__entry->opcode = opcode;
	),
	TP_printk("dev=%u qpn=%u dest_qpn=%u opcode=%s psn=%u len=%u linear=%u",
		  __entry->dev, __entry->qpn, __entry->dest_qpn,
		  rxe_rust_show_opcode(__entry->opcode), __entry->psn,
		  __entry->len, __entry->linear)
);

/*
 * A packet left a queue pair, to the wire or to a queue pair of the same
 * device (loopback); len counts its bytes from the BTH to the ICRC.
 */
DEFINE_EVENT(rxe_rust_packet_class, rxe_rust_xmit,
	TP_PROTO(u32 dev, u32 qpn, u32 dest_qpn, u8 opcode, u32 psn, u32 len,
		 u32 linear),
	TP_ARGS(dev, qpn, dest_qpn, opcode, psn, len, linear));

/* A packet reached its queue pair's transport (qpn is its destination). */
DEFINE_EVENT(rxe_rust_packet_class, rxe_rust_recv,
	TP_PROTO(u32 dev, u32 qpn, u32 dest_qpn, u8 opcode, u32 psn, u32 len,
		 u32 linear),
	TP_ARGS(dev, qpn, dest_qpn, opcode, psn, len, linear));

/*
 * A received packet was dropped for reason, before its queue pair's
 * transport took it or by that transport ("transport"); qpn is its
 * destination QP, 0xffffff (the multicast QPN) when none was read.
 */
TRACE_EVENT(rxe_rust_drop,
	TP_PROTO(u32 dev, u32 qpn, const char *reason),
	TP_ARGS(dev, qpn, reason),
	TP_STRUCT__entry(
		__field(u32, dev)
		__field(u32, qpn)
		__string(reason, reason)
	),
	TP_fast_assign(
		__entry->dev = dev;
		__entry->qpn = qpn;
		__assign_str(reason);
	),
	TP_printk("dev=%u qpn=%u reason=%s",
		  __entry->dev, __entry->qpn, __get_str(reason))
);

/*
 * A requester went back to send again from psn. Transport retries (counted
 * in completer_retry_err) follow a NAK, the local ACK timeout or the end of
 * an implied NAK's reorder window; a tail probe sends the last packet again
 * before the timeout when nothing was acknowledged for a while; after an
 * RNR NAK's timer the refused request goes again.
 */
TRACE_EVENT(rxe_rust_retransmit,
	TP_PROTO(u32 dev, u32 qpn, u32 psn, u8 cause),
	TP_ARGS(dev, qpn, psn, cause),
	TP_STRUCT__entry(
		__field(u32, dev)
		__field(u32, qpn)
		__field(u32, psn)
		__field(u8, cause)
	),
	TP_fast_assign(
		__entry->dev = dev;
		__entry->qpn = qpn;
		__entry->psn = psn;
		__entry->cause = cause;
	),
	TP_printk("dev=%u qpn=%u psn=%u cause=%s",
		  __entry->dev, __entry->qpn, __entry->psn,
		  __print_symbolic(__entry->cause,
				   { RXE_RUST_RETRANSMIT_NAK, "nak" },
				   { RXE_RUST_RETRANSMIT_TIMEOUT, "timeout" },
				   { RXE_RUST_RETRANSMIT_REORDER, "reorder" },
				   { RXE_RUST_RETRANSMIT_TAIL_PROBE, "tail_probe" },
				   { RXE_RUST_RETRANSMIT_RNR, "rnr" }))
);

/*
 * A responder sent an RNR NAK (sent=1: no receive WQE for the request at
 * psn), or a requester received one (sent=0); timer is the 5-bit RNR
 * timer code it carries.
 */
TRACE_EVENT(rxe_rust_rnr_nak,
	TP_PROTO(u32 dev, u32 qpn, u32 psn, u8 timer, bool sent),
	TP_ARGS(dev, qpn, psn, timer, sent),
	TP_STRUCT__entry(
		__field(u32, dev)
		__field(u32, qpn)
		__field(u32, psn)
		__field(u8, timer)
		__field(bool, sent)
	),
	TP_fast_assign(
		__entry->dev = dev;
		__entry->qpn = qpn;
		__entry->psn = psn;
		__entry->timer = timer;
		__entry->sent = sent;
	),
	TP_printk("dev=%u qpn=%u psn=%u timer=%u sent=%d",
		  __entry->dev, __entry->qpn, __entry->psn, __entry->timer,
		  __entry->sent)
);

/*
 * A work completion was made for a queue pair (recv=1: of its receive
 * queue); opcode is the enum ib_wc_opcode value.
 */
TRACE_EVENT(rxe_rust_complete,
	TP_PROTO(u32 dev, u32 qpn, u64 wr_id, u32 status, u32 opcode,
		 u32 byte_len, bool recv),
	TP_ARGS(dev, qpn, wr_id, status, opcode, byte_len, recv),
	TP_STRUCT__entry(
		__field(u64, wr_id)
		__field(u32, dev)
		__field(u32, qpn)
		__field(u32, status)
		__field(u32, opcode)
		__field(u32, byte_len)
		__field(bool, recv)
	),
	TP_fast_assign(
		__entry->wr_id = wr_id;
		__entry->dev = dev;
		__entry->qpn = qpn;
		__entry->status = status;
		__entry->opcode = opcode;
		__entry->byte_len = byte_len;
		__entry->recv = recv;
	),
	TP_printk("dev=%u qpn=%u wr_id=0x%llx status=%s opcode=%u byte_len=%u recv=%d",
		  __entry->dev, __entry->qpn, __entry->wr_id,
		  rdma_show_wc_status(__entry->status), __entry->opcode,
		  __entry->byte_len, __entry->recv)
);

#endif /* _TRACE_RXE_RUST_H */

/* This part must be outside protection */
#include <trace/define_trace.h>
