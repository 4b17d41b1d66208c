// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
/*
 * umad_probe: sends one SubnGet(SMInfo) to a LID through libibumad with the
 * given send timeout and retries, waits for the completion and prints it:
 *   "agent=<n> status=<n> tid=<hex> method=<hex> elapsed_ms=<n>"
 * Exit 0 on a completion (answer or timeout status), 2 if umad_recv itself
 * timed out after <recv_wait_ms>, 1 on setup errors. Test tool for the umad
 * timeout shim; run it attached at a node under ibsim.
 * Usage: umad_probe <dlid> <send_timeout_ms> <retries> <recv_wait_ms>
 */
#include <errno.h>
#include <infiniband/umad.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static long elapsed_ms(const struct timespec *t0)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (t.tv_sec - t0->tv_sec) * 1000 + (t.tv_nsec - t0->tv_nsec) / 1000000;
}

int main(int argc, char **argv)
{
	const uint32_t tid = 0x5a5a1234;
	struct timespec t0;
	uint8_t *mad;
	void *umad;
	int port, agent, len, ret;

	if (argc != 5) {
		fprintf(stderr, "usage: %s <dlid> <send_timeout_ms> <retries> <recv_wait_ms>\n", argv[0]);
		return 1;
	}
	if (umad_init() < 0 || (port = umad_open_port(NULL, 0)) < 0) {
		fprintf(stderr, "umad_probe: cannot open umad port\n");
		return 1;
	}
	agent = umad_register(port, 0x01, 1, 0, NULL);
	if (agent < 0) {
		fprintf(stderr, "umad_probe: cannot register agent\n");
		return 1;
	}
	umad = umad_alloc(1, umad_size() + 256);
	if (!umad)
		return 1;
	memset(umad, 0, umad_size() + 256);
	mad = umad_get_mad(umad);
	mad[0] = 1;    /* base version */
	mad[1] = 0x01; /* LID-routed SMP */
	mad[2] = 1;    /* class version */
	mad[3] = 0x01; /* Get */
	mad[12] = (tid >> 24) & 0xff;
	mad[13] = (tid >> 16) & 0xff;
	mad[14] = (tid >> 8) & 0xff;
	mad[15] = tid & 0xff;
	mad[16] = 0x00; /* attribute SMInfo 0x0020 */
	mad[17] = 0x20;
	umad_set_addr(umad, atoi(argv[1]), 0, 0, 0);

	clock_gettime(CLOCK_MONOTONIC, &t0);
	if (umad_send(port, agent, umad, 256, atoi(argv[2]), atoi(argv[3])) < 0) {
		fprintf(stderr, "umad_probe: send failed\n");
		return 1;
	}
	len = 256;
	ret = umad_recv(port, umad, &len, atoi(argv[4]));
	if (ret == -ETIMEDOUT) {
		printf("recv timeout elapsed_ms=%ld\n", elapsed_ms(&t0));
		return 2;
	}
	if (ret < 0) {
		fprintf(stderr, "umad_probe: recv failed %d\n", ret);
		return 1;
	}
	printf("agent=%d status=%d tid=%02x%02x%02x%02x method=%02x elapsed_ms=%ld\n", ret,
	       umad_status(umad), mad[12], mad[13], mad[14], mad[15], mad[3], elapsed_ms(&t0));
	return 0;
}
