// SPDX-License-Identifier: GPL-2.0
/*
 * Hostile RoCEv2 packets: sends random and mutated datagrams to UDP 4791 of
 * an address, from a raw IPv4 socket, in batches (sendmmsg).
 *
 * Eight classes, taken in turn:
 *   0 random   random bytes, 0 to 299 of them;
 *   1 flip     a well-formed packet with one to three of its bits flipped
 *              after its ICRC was computed (never in the byte the ICRC
 *              masks);
 *   2 trunc    a well-formed packet cut short;
 *   3 opcode   every opcode in turn with a header of any length (0 to 64
 *              bytes of random bytes after the BTH), ICRC valid;
 *   4 noqp     a well-formed request, ICRC valid, to a QP number no QP has;
 *   5 psn      a well-formed request or response, ICRC valid, to a live
 *              QP (-q) with a PSN far ahead of its window;
 *   6 rkey     an RDMA WRITE or READ with a random R_Key, ICRC valid, to a
 *              live QP, PSN far ahead;
 *   7 oversize a SEND with a payload past a path MTU of 1024 (and within
 *              an Ethernet MTU of 1500), ICRC valid, to a live QP or, without
 *              -q, to no QP.
 * Classes 0 to 4 can only be dropped before any queue pair sees them (a
 * random packet with a valid ICRC aside: one in 2^32); the tool prints how
 * many of those it sent ("must_drop"), and the count of each class.
 *
 * Usage: rxe_rust_fuzz -s SRC -d DST -n COUNT [-S SEED] [-q QPN:RQ_PSN:SQ_PSN]...
 *                      [-l ROUNDS] [-r PACKETS_PER_SECOND] [-o FILE]
 * -q names a live QP and its expected receive PSN and next send PSN (as
 * `rdma resource show qp` gives them): requests go far ahead of the first,
 * responses far ahead of the second, so that none is in a window the QP
 * accepts (each may at most have the QP ask its peer to resend). -l ROUNDS
 * sends classes 5 to 7 in one round of eight in ROUNDS (the others send
 * classes 0 to 2 then): each of them can make the live QP's peer go back.
 * -o writes each datagram (IP header on) to FILE, length-prefixed (u16, host
 * order), for checking the tool against rxe_rust_capture.py.
 */

#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define ROCE_PORT 4791
#define BATCH 64
#define MAX_LIVE 16
#define CLASSES 8
#define MAX_PKT 1600
#define BTH_LEN 12
/* QP numbers are handed out from 16 upwards: none of these exists. */
#define NO_QPN_BASE 0xe00000

static const char *const class_name[CLASSES] = {
	"random", "flip", "trunc", "opcode", "noqp", "psn", "rkey", "oversize",
};

static uint32_t crc_table[256];
static uint64_t rng_state;
static struct in_addr src, dst;
static uint32_t live_qpn[MAX_LIVE], live_rq_psn[MAX_LIVE], live_sq_psn[MAX_LIVE];
static int nlive;
/* Classes 5 to 7 (to live QPs) run in one round of CLASSES datagrams of this many. */
static unsigned long live_every = 1;

static uint32_t rnd(void)
{
	/* xorshift64*: repeatable from the seed. */
	rng_state ^= rng_state >> 12;
	rng_state ^= rng_state << 25;
	rng_state ^= rng_state >> 27;
	return (uint32_t)((rng_state * 0x2545F4914F6CDD1DULL) >> 32);
}

static void crc_init(void)
{
	for (uint32_t i = 0; i < 256; i++) {
		uint32_t c = i;

		for (int k = 0; k < 8; k++)
			c = c & 1 ? 0xedb88320 ^ (c >> 1) : c >> 1;
		crc_table[i] = c;
	}
}

static uint32_t crc_update(uint32_t crc, const uint8_t *p, size_t n)
{
	while (n--)
		crc = crc_table[(crc ^ *p++) & 0xff] ^ (crc >> 8);
	return crc;
}

/*
 * The ICRC of the RoCE packet roce[0..len) under the IPv4 header ip and the
 * UDP header udp (IBTA A17.3.3): the CRC-32 over 64 one bits, the headers
 * with their variant fields set to ones, and the packet.
 */
static uint32_t icrc(const uint8_t *ip, const uint8_t *udp, const uint8_t *roce, size_t len)
{
	static const uint8_t ones[8] = { 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff };
	uint8_t h[20 + 8 + BTH_LEN];
	uint32_t crc = 0xffffffff;

	memcpy(h, ip, 20);
	h[1] = 0xff;			/* type of service */
	h[8] = 0xff;			/* time to live */
	h[10] = h[11] = 0xff;		/* header checksum */
	memcpy(h + 20, udp, 8);
	h[26] = h[27] = 0xff;		/* UDP checksum */
	memcpy(h + 28, roce, BTH_LEN);
	h[28 + 4] = 0xff;		/* the BTH's reserved byte */
	crc = crc_update(crc, ones, sizeof(ones));
	crc = crc_update(crc, h, sizeof(h));
	crc = crc_update(crc, roce + BTH_LEN, len - BTH_LEN);
	return ~crc;
}

static void put16(uint8_t *p, uint16_t v)
{
	p[0] = v >> 8;
	p[1] = v;
}

static void put32(uint8_t *p, uint32_t v)
{
	p[0] = v >> 24;
	p[1] = v >> 16;
	p[2] = v >> 8;
	p[3] = v;
}

/* IPv4 and UDP headers for a RoCE packet of len bytes; ident must not be 0. */
static void headers(uint8_t *d, size_t len, uint16_t ident, uint16_t sport)
{
	memset(d, 0, 28);
	d[0] = 0x45;
	put16(d + 2, 28 + len);
	put16(d + 4, ident);
	d[6] = 0x40;			/* DF */
	d[8] = 64;
	d[9] = IPPROTO_UDP;
	memcpy(d + 12, &src, 4);
	memcpy(d + 16, &dst, 4);
	put16(d + 20, sport);
	put16(d + 22, ROCE_PORT);
	put16(d + 24, 8 + len);
}

static void random_bytes(uint8_t *p, size_t n)
{
	while (n--)
		*p++ = rnd();
}

/* A BTH: no SE, no pad, transport version 0, the default P_Key. */
static void bth(uint8_t *p, uint8_t opcode, uint32_t qpn, uint32_t psn)
{
	p[0] = opcode;
	p[1] = 0;
	put16(p + 2, 0xffff);
	put32(p + 4, qpn & 0xffffff);
	put32(p + 8, psn & 0xffffff);
}

/*
 * A well-formed request or response of a few kinds to QP qpn, with PSN rq_psn
 * for a request and sq_psn for a response; returns its length, ICRC not
 * included.
 */
static size_t well_formed(uint8_t *p, uint32_t qpn, uint32_t rq_psn, uint32_t sq_psn,
			  int payload_max)
{
	static const uint8_t ops[] = { 0x04, 0x0a, 0x0c, 0x10, 0x11, 0x13, 0x24, 0x64 };
	uint8_t op = ops[rnd() % sizeof(ops)];
	size_t n = BTH_LEN, pay = (rnd() % (payload_max / 4 + 1)) * 4;

	bth(p, op, qpn, op == 0x10 || op == 0x11 ? sq_psn : rq_psn);
	switch (op) {
	case 0x0a:	/* RDMA WRITE ONLY: RETH */
	case 0x0c:	/* RDMA READ request: RETH, no payload */
		random_bytes(p + n, 16);
		n += 16;
		if (op == 0x0c)
			pay = 0;
		break;
	case 0x10:	/* RDMA READ response ONLY: AETH */
	case 0x11:	/* ACK: AETH, no payload */
		random_bytes(p + n, 4);
		n += 4;
		if (op == 0x11)
			pay = 0;
		break;
	case 0x13:	/* CMP_SWAP: AtomicETH */
		random_bytes(p + n, 28);
		n += 28;
		pay = 0;
		break;
	case 0x64:	/* UD SEND ONLY: DETH */
		random_bytes(p + n, 8);
		n += 8;
		break;
	}
	random_bytes(p + n, pay);
	return n + pay;
}

static uint32_t no_qpn(void)
{
	return NO_QPN_BASE | (rnd() & 0xfffff);
}

/* A PSN in the half of the PSN space ahead of psn, 2^22 or more ahead. */
static uint32_t far_ahead(uint32_t psn)
{
	return psn + (1u << 22) + (rnd() & ((1u << 21) - 1));
}

/* Builds datagram i (class i % CLASSES) into d; returns its length. */
static size_t datagram(uint8_t *d, unsigned long i, int *cls)
{
	uint8_t *p = d + 28;
	size_t n = 0;
	int k = i % CLASSES, l = nlive ? rnd() % nlive : 0;
	uint32_t rq = nlive ? far_ahead(live_rq_psn[l]) : rnd();
	uint32_t sq = nlive ? far_ahead(live_sq_psn[l]) : rnd();
	uint16_t sport = 0xc000 | (rnd() & 0x3fff), ident = (i & 0xfffe) + 1;
	int crc = 1;

	if (k >= 5 && (i / CLASSES) % live_every)
		k -= 5;
	*cls = k;
	switch (k) {
	case 0:
		n = rnd() % 300;
		random_bytes(p, n);
		crc = 0;
		break;
	case 1:
	case 2:
	case 4:
		n = well_formed(p, no_qpn(), rq, sq, 256);
		/* Cut or flipped, a packet to the live QP keeps PSNs it could not accept. */
		if (nlive && (k == 1 || k == 2))
			p[4] = 0, p[5] = live_qpn[l] >> 16, p[6] = live_qpn[l] >> 8, p[7] = live_qpn[l];
		break;
	case 3:
		bth(p, (i / CLASSES) & 0xff, no_qpn(), rnd());
		n = BTH_LEN + rnd() % 65;
		random_bytes(p + BTH_LEN, n - BTH_LEN);
		n = n / 4 * 4;
		break;
	case 5:
		if (!nlive)
			return datagram(d, i + 1, cls);
		n = well_formed(p, live_qpn[l], rq, sq, 256);
		break;
	case 6:
		if (!nlive)
			return datagram(d, i + 2, cls);
		bth(p, rnd() & 1 ? 0x0a : 0x0c, live_qpn[l], rq);
		random_bytes(p + BTH_LEN, 16);
		n = BTH_LEN + 16;
		if (p[0] == 0x0a) {
			random_bytes(p + n, 64);
			n += 64;
		}
		break;
	case 7:
		bth(p, 0x04, nlive ? live_qpn[l] : no_qpn(), rq);
		/* Past a path MTU of 1024, within the veth's MTU of 1500. */
		n = BTH_LEN + 1024 + 4 * (1 + rnd() % 90);
		random_bytes(p + BTH_LEN, n - BTH_LEN);
		break;
	}
	if (crc) {
		uint32_t c;

		headers(d, n + 4, ident, sport);
		c = icrc(d, d + 20, p, n);
		p[n] = c;
		p[n + 1] = c >> 8;
		p[n + 2] = c >> 16;
		p[n + 3] = c >> 24;
		n += 4;
	}
	if (k == 1) {
		/* One to three distinct bits (two flips of one bit would cancel). */
		size_t bits[3];
		int flips = 1 + rnd() % 3;

		for (int f = 0; f < flips; f++) {
			int dup;

			do {
				bits[f] = rnd() % (n * 8);
				if (bits[f] / 8 == 4)	/* the byte the ICRC masks */
					bits[f] += 8;
				dup = 0;
				for (int g = 0; g < f; g++)
					dup |= bits[g] == bits[f];
			} while (dup);
			p[bits[f] / 8] ^= 1 << (bits[f] % 8);
		}
	}
	if (k == 2)
		n = rnd() % n;
	/* For a packet cut short, the lengths change after its ICRC: it is wrong. */
	headers(d, n, ident, sport);
	return 28 + n;
}

static void usage(void)
{
	fprintf(stderr, "usage: rxe_rust_fuzz -s SRC -d DST -n COUNT [-S SEED] [-q QPN:RQ_PSN:SQ_PSN]... "
		"[-l ROUNDS] [-r PPS] [-o FILE]\n");
	exit(2);
}

int main(int argc, char **argv)
{
	static uint8_t bufs[BATCH][MAX_PKT];
	struct mmsghdr msgs[BATCH];
	struct iovec iov[BATCH];
	struct sockaddr_in to = { .sin_family = AF_INET };
	unsigned long count = 0, sent = 0, per_class[CLASSES] = { 0 }, must_drop = 0, errors = 0;
	unsigned long pps = 0;
	struct timespec t0, now;
	FILE *dump = NULL;
	int opt, fd;

	rng_state = 0x9e3779b97f4a7c15ULL;
	while ((opt = getopt(argc, argv, "s:d:n:S:q:l:r:o:")) != -1) {
		switch (opt) {
		case 's':
			if (inet_pton(AF_INET, optarg, &src) != 1)
				usage();
			break;
		case 'd':
			if (inet_pton(AF_INET, optarg, &dst) != 1)
				usage();
			break;
		case 'n':
			count = strtoul(optarg, NULL, 0);
			break;
		case 'S':
			rng_state ^= strtoull(optarg, NULL, 0) * 0x100000001b3ULL;
			break;
		case 'q':
			if (nlive == MAX_LIVE ||
			    sscanf(optarg, "%u:%u:%u", &live_qpn[nlive], &live_rq_psn[nlive],
				   &live_sq_psn[nlive]) != 3)
				usage();
			nlive++;
			break;
		case 'l':
			live_every = strtoul(optarg, NULL, 0);
			if (!live_every)
				usage();
			break;
		case 'r':
			pps = strtoul(optarg, NULL, 0);
			break;
		case 'o':
			dump = fopen(optarg, "w");
			if (!dump) {
				perror(optarg);
				return 1;
			}
			break;
		default:
			usage();
		}
	}
	if (!src.s_addr || !dst.s_addr || !count)
		usage();
	crc_init();
	fd = socket(AF_INET, SOCK_RAW, IPPROTO_RAW);
	if (fd < 0) {
		perror("socket");
		return 1;
	}
	to.sin_addr = dst;
	memset(msgs, 0, sizeof(msgs));
	clock_gettime(CLOCK_MONOTONIC, &t0);
	while (sent < count) {
		int n = count - sent < BATCH ? count - sent : BATCH, done = 0;
		int cls[BATCH];

		for (int j = 0; j < n; j++) {
			iov[j].iov_base = bufs[j];
			iov[j].iov_len = datagram(bufs[j], sent + j, &cls[j]);
			msgs[j].msg_hdr.msg_iov = &iov[j];
			msgs[j].msg_hdr.msg_iovlen = 1;
			msgs[j].msg_hdr.msg_name = &to;
			msgs[j].msg_hdr.msg_namelen = sizeof(to);
			if (dump) {
				uint16_t l = iov[j].iov_len;

				fwrite(&l, sizeof(l), 1, dump);
				fwrite(bufs[j], 1, l, dump);
			}
		}
		int retries = 0;

		while (done < n) {
			int r = sendmmsg(fd, msgs + done, n - done, 0);

			if (r < 0) {
				if ((errno == ENOBUFS || errno == EAGAIN || errno == EINTR) &&
				    ++retries < 10000) {
					usleep(1000);
					continue;
				}
				/* Counted, and the datagram is skipped (not counted as sent). */
				errors++;
				cls[done] = -1;
				r = 1;
			}
			done += r;
		}
		for (int j = 0; j < n; j++) {
			if (cls[j] < 0)
				continue;
			per_class[cls[j]]++;
			if (cls[j] <= 4)
				must_drop++;
		}
		sent += n;
		if (pps) {
			double due = (double)sent / pps, el;

			clock_gettime(CLOCK_MONOTONIC, &now);
			el = now.tv_sec - t0.tv_sec + (now.tv_nsec - t0.tv_nsec) / 1e9;
			if (due > el)
				usleep((due - el) * 1e6);
		}
	}
	clock_gettime(CLOCK_MONOTONIC, &now);
	printf("sent %lu errors %lu must_drop %lu seconds %.1f\n", sent - errors, errors, must_drop,
	       now.tv_sec - t0.tv_sec + (now.tv_nsec - t0.tv_nsec) / 1e9);
	for (int k = 0; k < CLASSES; k++)
		printf("class %s %lu\n", class_name[k], per_class[k]);
	if (dump)
		fclose(dump);
	close(fd);
	return errors ? 1 : 0;
}
