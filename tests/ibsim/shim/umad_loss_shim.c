// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
/*
 * SMInfo loss shim: drops a given fraction of the SMInfo MADs a libibumad
 * client sends off-node. Test-only; LD_PRELOAD it after the umad timeout shim
 * and before libumad2sim.so:
 *
 *   LD_PRELOAD=umad_timeout_shim.so:umad_loss_shim.so:libumad2sim.so
 *
 * Why: ibsim's console `Error "node"[port] rate [attr]` never drops SMInfo.
 * ibsim forwards a MAD it has no built-in handler for (SMInfo, SA) to the SM
 * client it is addressed to before it applies the port's error rate
 * (process_packet() in ibsim's sim_mad.c), so the HA protocol's own traffic
 * crosses a "lossy" port untouched.
 *
 * What it drops: a MAD passed to umad_send() that is an SMP (management class
 * 0x01 LID-routed or 0x81 directed route) with attribute id 0x0020 (SMInfo),
 * requests and responses alike, except directed-route SMPs with hop count 0
 * (the local port's own SM: on hardware those never cross a cable). A dropped
 * MAD is not handed to the next umad_send (umad2sim never sees it) and the call
 * returns 0, as if the wire lost it; with the timeout shim ahead of this one
 * (see the LD_PRELOAD order above) a dropped request is sent again on each of
 * the sender's retries, each try passing through this shim again, and
 * completes with ETIMEDOUT after the last, as with the kernel's ib_umad.
 *
 * Environment (read once at the first SMInfo MAD):
 *   SMHA_LOSS_PERCENT   loss in percent, 0..100 (default 0), used while
 *                       SMHA_LOSS_CONTROL is unset or names no readable file;
 *   SMHA_LOSS_CONTROL   a file holding the percent; read again for every
 *                       candidate MAD, so a test can turn the loss on and off
 *                       while the process runs (write it atomically: temp +
 *                       rename);
 *   SMHA_LOSS_SEED      seed of the drop decisions (default 1). The sequence
 *                       of decisions a process makes is fixed by the seed, the
 *                       process name (/proc/self/comm) and SIM_HOST, so two
 *                       processes with one seed do not drop in lockstep;
 *   SMHA_LOSS_COUNTS    path prefix of the count file: the shim writes
 *                       "<prefix>.<pid>" (one file per process, so an OpenSM
 *                       restarted by smhad, which inherits the environment,
 *                       does not overwrite the counts of its predecessor).
 *                       The file holds one line, rewritten in place after each
 *                       candidate MAD:
 *                       "pid=P comm=NAME seen=N dropped=M percent=R\n"
 *                       (seen: off-node SMInfo MADs sent while the percent was
 *                       above 0; fixed-width numbers, so a reader never sees a
 *                       shorter line than before).
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <infiniband/umad.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define LOSS_MGMT_CLASS_SMP_LID 0x01
#define LOSS_MGMT_CLASS_SMP_DR 0x81
#define LOSS_ATTR_SMINFO 0x0020

typedef int (*send_fn)(int, int, void *, int, int, int);

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static int initialised;
static int env_percent;
static const char *control_path;
static uint64_t rng_state;
static int count_fd = -1;
static char comm[32] = "?";
static unsigned long long seen, dropped;

static send_fn real_send(void)
{
	static send_fn fn;
	if (!fn)
		fn = (send_fn)dlsym(RTLD_NEXT, "umad_send");
	return fn;
}

/* splitmix64: small, seedable, good enough for drop decisions. */
static uint64_t next_random(void)
{
	uint64_t z = (rng_state += 0x9e3779b97f4a7c15ULL);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

static uint64_t hash_text(const char *s, uint64_t h)
{
	for (; s && *s; s++)
		h = (h ^ (uint8_t)*s) * 0x100000001b3ULL;
	return h;
}

static int parse_percent(const char *text)
{
	char *end;
	long v;

	if (!text || !*text)
		return -1;
	errno = 0;
	v = strtol(text, &end, 10);
	if (errno || end == text || v < 0 || v > 100)
		return -1;
	return (int)v;
}

static void init_locked(void)
{
	const char *seed_text = getenv("SMHA_LOSS_SEED");
	const char *prefix = getenv("SMHA_LOSS_COUNTS");
	uint64_t seed = seed_text && *seed_text ? strtoull(seed_text, NULL, 10) : 1;
	int fd, n;

	initialised = 1;
	env_percent = parse_percent(getenv("SMHA_LOSS_PERCENT"));
	if (env_percent < 0)
		env_percent = 0;
	control_path = getenv("SMHA_LOSS_CONTROL");
	fd = open("/proc/self/comm", O_RDONLY | O_CLOEXEC);
	if (fd >= 0) {
		n = (int)read(fd, comm, sizeof(comm) - 1);
		comm[n > 0 ? n : 0] = '\0';
		if (n > 0 && comm[n - 1] == '\n')
			comm[n - 1] = '\0';
		close(fd);
	}
	rng_state = hash_text(getenv("SIM_HOST"),
			      hash_text(comm, 0xcbf29ce484222325ULL ^ seed));
	if (prefix && *prefix) {
		char path[4096];
		snprintf(path, sizeof(path), "%s.%d", prefix, (int)getpid());
		count_fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	}
}

static int current_percent(void)
{
	char buf[32];
	int fd, n;

	if (!control_path)
		return env_percent;
	fd = open(control_path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return env_percent;
	n = (int)read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return env_percent;
	buf[n] = '\0';
	n = parse_percent(buf);
	return n < 0 ? env_percent : n;
}

static void write_counts_locked(int percent)
{
	char line[160];
	int n;

	if (count_fd < 0)
		return;
	n = snprintf(line, sizeof(line),
		     "pid=%d comm=%s seen=%12llu dropped=%12llu percent=%3d\n",
		     (int)getpid(), comm, seen, dropped, percent);
	if (n > 0 && pwrite(count_fd, line, (size_t)n, 0) < 0) {
		/* nothing to do: the counts are diagnostics for the test */
	}
}

/* 1: an SMInfo SMP that leaves the node (not DR with hop count 0). */
static int is_candidate(const uint8_t *mad, int length)
{
	uint16_t attr;

	if (length < 24)
		return 0;
	if (mad[1] != LOSS_MGMT_CLASS_SMP_LID && mad[1] != LOSS_MGMT_CLASS_SMP_DR)
		return 0;
	attr = (uint16_t)(mad[16] << 8 | mad[17]);
	if (attr != LOSS_ATTR_SMINFO)
		return 0;
	if (mad[1] == LOSS_MGMT_CLASS_SMP_DR && mad[7] == 0)
		return 0; /* hop count 0: the local port */
	return 1;
}

int umad_send(int fd, int agentid, void *umad, int length, int timeout_ms,
	      int retries)
{
	if (!real_send())
		return -EIO;
	if (umad && is_candidate(umad_get_mad(umad), length)) {
		int drop = 0, percent;

		pthread_mutex_lock(&lock);
		if (!initialised)
			init_locked();
		percent = current_percent();
		if (percent > 0) {
			seen++;
			if (next_random() % 100 < (uint64_t)percent) {
				dropped++;
				drop = 1;
			}
			write_counts_locked(percent);
		}
		pthread_mutex_unlock(&lock);
		if (drop)
			return 0;
	}
	return real_send()(fd, agentid, umad, length, timeout_ms, retries);
}
