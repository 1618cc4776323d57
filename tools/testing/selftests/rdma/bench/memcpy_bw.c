// SPDX-License-Identifier: GPL-2.0
/*
 * The bound for rdma_rxe_rust's benchmarks: how fast this machine copies
 * memory. Copies one preallocated 64 MiB buffer into another (both touched
 * first, so no page faults are timed) for about SECONDS seconds and prints
 * the rate in MB/s on one line (MB = 2^20 bytes, the unit perftest reports).
 *
 * Usage: memcpy_bw [SECONDS] [MIB]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

int main(int argc, char **argv)
{
	double seconds = argc > 1 ? atof(argv[1]) : 1.0;
	size_t size = (argc > 2 ? strtoul(argv[2], NULL, 0) : 64) << 20;
	char *src = malloc(size), *dst = malloc(size);
	unsigned long copies = 0;
	double start, t;

	if (!src || !dst || !size) {
		fprintf(stderr, "memcpy_bw: cannot allocate 2 x %zu bytes\n", size);
		return 1;
	}
	memset(src, 0x5a, size);
	memset(dst, 0xa5, size);
	start = now();
	do {
		memcpy(dst, src, size);
		/* The copy must not be optimised away. */
		__asm__ volatile("" : : "r"(dst) : "memory");
		src[copies % size]++;
		copies++;
		t = now() - start;
	} while (t < seconds);
	printf("%.1f\n", copies * (double)size / t / (1 << 20));
	return 0;
}
