// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
/*
 * sm_impostor: a forged SMInfo answer for the census impostor test. Test-only.
 *
 * An SMInfo GUID is only a claim: any port that opens its SM class can
 * answer SubnGet(SMInfo) with any GUID. This tool is such a port. Run
 * attached at a node under ibsim, it sets IsSM on that node's port and
 * answers every SubnGet(SMInfo) addressed to it, LID-routed or directed
 * route, with the GUID, priority and state given on the command line, so a
 * test can check that smhad's census calls it an impostor (doc/census.md,
 * "The impostor_sm alarm") and never takes its answer for the head's.
 *
 *   LD_PRELOAD=/usr/lib/x86_64-linux-gnu/umad2sim/libumad2sim.so \
 *   SIM_HOST=<node> IBSIM_SOCKNAME=<sock> \
 *     sm_impostor <claimed_port_guid hex> <priority 0..15> <state 0..3> [ready_file]
 *
 * IsSM: opening the port's issm device sets CapabilityMask.IsSM, closing it
 * clears it (umad2sim turns the open into ibsim's SIM_CTL_SET_ISSM). Kept
 * open while the tool runs.
 *
 * How ibsim delivers SMInfo: ibsim answers most SMP attributes itself but has
 * no handler for SMInfo; it forwards such a request (QP0, any method) to the
 * issm client of the destination port, and only to an issm client
 * (find_client() in ibsim.c). umad2sim then hands it to the agent registered
 * for its management class, whatever the agent's method mask. Limit: ibsim
 * forwards a GMP it has no handler for (SA, ...) sent to this port's LID to
 * the issm client too, and umad2sim's receiver thread dereferences a NULL
 * queue for a class no agent is registered for; only the SMP classes are.
 *
 * The answer is the request with method GetResp (0x81) and the SMInfo
 * payload (IBA SMInfo: GUID, SM_Key, ActCount, Priority << 4 | SMState at
 * data offset 64), as OpenSM builds it (osm_resp.c): a directed-route answer
 * keeps the request's hop count, hop pointer and paths and sets the D bit of
 * the status word, and goes to the permissive LID 0xffff; a LID-routed one
 * goes to the requester's LID. ibsim never advances the hop pointer (a DR SMP
 * reaches its end with hop pointer 0, and ibsim drops a DR answer whose hop
 * pointer is not 0), so copying it unchanged is right here, as it is for
 * OpenSM on hardware, where the kernel's SMI handles it. SM_Key is answered
 * 0; ActCount counts the answers, so the SM looks alive. Anything else
 * (SubnSet(SMInfo), traps, other attributes) is ignored without an answer.
 *
 * After the issm and the agents are set up, writes "ready\n" to ready_file
 * (temp + rename: a reader never sees it half written). Prints a line to
 * stderr per request (answered or ignored). Runs until SIGTERM or SIGINT,
 * then unregisters, closes the issm (IsSM cleared) and the port and exits 0;
 * exit 1 on setup errors.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <infiniband/umad.h>
#include <inttypes.h>
#include <limits.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MAD_SIZE 256
#define SMP_DATA 64	/* SMP data offset */
#define SMP_IPATH 128	/* DR initial path */
#define CLASS_SUBN_LID 0x01
#define CLASS_SUBN_DIR 0x81
#define METHOD_GET 0x01
#define METHOD_GET_RESP 0x81
#define ATTR_SMINFO 0x0020
#define DR_DIRECTION 0x80	/* D bit: top bit of the DR status word */
#define RECV_WAIT_MS 200	/* how often the loop looks at the stop flag */

static volatile sig_atomic_t stop;

static void on_signal(int sig)
{
	(void)sig;
	stop = 1;
}

static int parse_ulong(const char *s, int base, unsigned long long max, unsigned long long *out)
{
	char *end;

	errno = 0;
	*out = strtoull(s, &end, base);
	return errno || end == s || *end || *s == '-' || *out > max ? -1 : 0;
}

static void put_be(uint8_t *p, uint64_t v, int n)
{
	int i;

	for (i = n - 1; i >= 0; i--, v >>= 8)
		p[i] = v & 0xff;
}

static int write_ready(const char *path)
{
	char tmp[PATH_MAX];
	FILE *f;

	if (snprintf(tmp, sizeof(tmp), "%s.tmp", path) >= (int)sizeof(tmp))
		return -1;
	f = fopen(tmp, "w");
	if (!f)
		return -1;
	if (fputs("ready\n", f) == EOF) {
		fclose(f);
		return -1;
	}
	if (fclose(f) == EOF)
		return -1;
	return rename(tmp, path);
}

/* "lid 5" or "DR path 0,1,3,2" of a request, for the log line. */
static void describe_source(const uint8_t *mad, const void *umad, char *buf, size_t size)
{
	const ib_mad_addr_t *addr = umad_get_mad_addr((void *)umad);
	int hops, i, n;

	if (mad[1] != CLASS_SUBN_DIR) {
		snprintf(buf, size, "lid %u", ntohs(addr->lid));
		return;
	}
	hops = mad[7] & 0x3f;
	n = snprintf(buf, size, "DR path 0");
	for (i = 1; i <= hops && n > 0 && (size_t)n < size; i++)
		n += snprintf(buf + n, size - n, ",%u", mad[SMP_IPATH + i]);
}

int main(int argc, char **argv)
{
	unsigned long long guid, priority, state;
	char issm_path[256], from[64];
	uint8_t *mad, *resp;
	void *umad, *reply;
	struct sigaction sa;
	uint32_t act_count = 0;
	int port, agent_lid, agent_dr, issm_fd, len, ret, rc = 0;

	if (argc < 4 || argc > 5 || parse_ulong(argv[1], 16, UINT64_MAX, &guid) ||
	    parse_ulong(argv[2], 10, 15, &priority) || parse_ulong(argv[3], 10, 3, &state)) {
		fprintf(stderr,
			"usage: %s <claimed_port_guid hex> <priority 0..15> <state 0..3> [ready_file]\n",
			argv[0]);
		return 1;
	}

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_signal;
	sigemptyset(&sa.sa_mask);
	if (sigaction(SIGTERM, &sa, NULL) || sigaction(SIGINT, &sa, NULL)) {
		perror("sm_impostor: sigaction");
		return 1;
	}

	if (umad_init() < 0) {
		fprintf(stderr, "sm_impostor: umad_init failed\n");
		return 1;
	}
	port = umad_open_port(NULL, 0);
	if (port < 0) {
		fprintf(stderr, "sm_impostor: umad_open_port failed: %s\n", strerror(-port));
		return 1;
	}
	/* Both SMP classes, as OpenSM binds them; the method mask is moot under umad2sim. */
	agent_lid = umad_register(port, CLASS_SUBN_LID, 1, 0, NULL);
	if (agent_lid < 0) {
		fprintf(stderr, "sm_impostor: cannot register an agent for class 0x01 (LID-routed SMP)\n");
		return 1;
	}
	agent_dr = umad_register(port, CLASS_SUBN_DIR, 1, 0, NULL);
	if (agent_dr < 0) {
		fprintf(stderr, "sm_impostor: cannot register an agent for class 0x81 (directed-route SMP)\n");
		return 1;
	}
	ret = umad_get_issm_path(NULL, 0, issm_path, sizeof(issm_path));
	if (ret < 0) {
		fprintf(stderr, "sm_impostor: cannot resolve the issm path of the port: %s\n",
			strerror(-ret));
		return 1;
	}
	issm_fd = open(issm_path, O_NONBLOCK);	/* as OpenSM does */
	if (issm_fd < 0) {
		fprintf(stderr, "sm_impostor: cannot open %s (IsSM): %s\n", issm_path, strerror(errno));
		return 1;
	}
	umad = umad_alloc(1, umad_size() + MAD_SIZE);
	reply = umad_alloc(1, umad_size() + MAD_SIZE);
	if (!umad || !reply) {
		fprintf(stderr, "sm_impostor: out of memory\n");
		return 1;
	}
	mad = umad_get_mad(umad);
	resp = umad_get_mad(reply);
	if (argc == 5 && write_ready(argv[4])) {
		fprintf(stderr, "sm_impostor: cannot write ready file %s: %s\n", argv[4], strerror(errno));
		return 1;
	}
	fprintf(stderr, "sm_impostor: IsSM set (%s); answering SMInfo as guid 0x%016llx priority %llu state %llu\n",
		issm_path, guid, priority, state);

	while (!stop) {
		unsigned int attr;

		len = MAD_SIZE;
		ret = umad_recv(port, umad, &len, RECV_WAIT_MS);
		if (ret == -ETIMEDOUT || ret == -EINTR || ret == -EWOULDBLOCK)
			continue;
		if (ret < 0) {
			fprintf(stderr, "sm_impostor: umad_recv failed: %s\n", strerror(-ret));
			rc = 1;
			break;
		}
		if (len < SMP_DATA + 64 || (mad[3] & 0x80))
			continue;	/* short, or a response: we send no requests */
		attr = mad[16] << 8 | mad[17];
		describe_source(mad, umad, from, sizeof(from));
		if ((mad[1] != CLASS_SUBN_LID && mad[1] != CLASS_SUBN_DIR) ||
		    mad[3] != METHOD_GET || attr != ATTR_SMINFO) {
			fprintf(stderr, "sm_impostor: ignored class 0x%02x method 0x%02x attr 0x%04x from %s\n",
				mad[1], mad[3], attr, from);
			continue;
		}

		memset(reply, 0, umad_size() + MAD_SIZE);
		memcpy(resp, mad, MAD_SIZE);
		resp[3] = METHOD_GET_RESP;
		resp[4] = mad[1] == CLASS_SUBN_DIR ? DR_DIRECTION : 0; /* status 0 (+ D) */
		resp[5] = 0;
		memset(resp + SMP_DATA, 0, 64);
		put_be(resp + SMP_DATA, guid, 8);	/* GUID; SM_Key (+8) stays 0 */
		put_be(resp + SMP_DATA + 16, ++act_count, 4);
		resp[SMP_DATA + 20] = priority << 4 | state;
		if (mad[1] == CLASS_SUBN_DIR)
			umad_set_addr_net(reply, htons(0xffff), 0, 0, 0);
		else
			umad_set_addr_net(reply, umad_get_mad_addr(umad)->lid, 0, 0, 0);
		ret = umad_send(port, mad[1] == CLASS_SUBN_DIR ? agent_dr : agent_lid, reply,
				MAD_SIZE, 0, 0);
		if (ret < 0) {
			fprintf(stderr, "sm_impostor: send of GetResp(SMInfo) to %s failed: %s\n", from,
				strerror(-ret));
			continue;
		}
		fprintf(stderr,
			"sm_impostor: answered method 0x%02x attr 0x%04x from %s: GetResp guid 0x%016llx priority %llu state %llu act_count %" PRIu32 "\n",
			mad[3], attr, from, guid, priority, state, act_count);
	}

	fprintf(stderr, "sm_impostor: stopping (%" PRIu32 " answers)\n", act_count);
	umad_free(umad);
	umad_free(reply);
	umad_unregister(port, agent_dr);
	umad_unregister(port, agent_lid);
	close(issm_fd);	/* clears IsSM */
	umad_close_port(port);
	umad_done();
	return rc;
}
