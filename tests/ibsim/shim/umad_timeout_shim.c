// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
/*
 * umad timeout shim: gives libibumad clients under ibsim the kernel's send
 * timeout behaviour. Test-only; LD_PRELOAD it together with libumad2sim.so.
 *
 * Why: with the kernel's ib_umad, umad_send(fd, agent, umad, len, timeout_ms,
 * retries) on a request that gets no response completes after about
 * timeout_ms * (retries + 1) with a copy of the request whose ib_user_mad
 * status is ETIMEDOUT, read from the same fd as responses
 * (drivers/infiniband/core/user_mad.c send_handler()). umad2sim has no such
 * timer: a request to a frozen peer (SIGSTOP'ed OpenSM) is never completed,
 * so OpenSM's vendor layer (libvendor/osm_vendor_ibumad.c) never calls its
 * send_err_callback and a sweep that queried the frozen SM waits forever.
 *
 * Layering (all in-process):
 *   OpenSM -> libosmvendor: umad_send(..., timeout, retries), and a receiver
 *             thread blocked in umad_recv(fd, umad, &len, -1)
 *   libibumad: umad_send = write(fd), umad_recv = poll(fd) + read(fd)
 *   libumad2sim.so (LD_PRELOAD): intercepts open/read/write/poll/ioctl on the
 *             umad fds (>= 1024) and talks to ibsim over a unix socket.
 * This shim interposes one level higher, on libibumad's exported umad_send and
 * umad_recv (calls from libosmvendor go through the PLT, so LD_PRELOAD wins;
 * the real functions come from dlsym(RTLD_NEXT)):
 *   - umad_send of a request (response bit clear) with timeout_ms > 0 records
 *     {fd, agent, mgmt class, low 32 TID bits, deadline, copy of the MAD}
 *     before the real send (a fast response must find it);
 *   - umad_recv waits in short slices so it can notice a deadline even when
 *     the caller passed -1; a response, or an ibsim error completion (ibsim
 *     returns the request with status 110 when the peer's socket is gone),
 *     with a matching TID clears the record; at the deadline it returns the
 *     recorded request with status ETIMEDOUT, as the kernel does;
 *   - with retries > 0, the request is sent again each time timeout_ms passes
 *     without a response, retries times, with the same TID, as the kernel's
 *     MAD layer resends it (drivers/infiniband/core/mad.c retry_send()); only
 *     after the last try does it complete with ETIMEDOUT. Without this, one
 *     lost MAD under the loss shim (umad_loss_shim.c) failed a request the
 *     kernel would have retried: OpenSM's standby polling, three retries on
 *     hardware, had one try, and gave up on a live master under 20 % loss;
 *   - a late response to a request already completed (timed out, or answered
 *     after a resend) is dropped, as the kernel drops responses with no
 *     outstanding send.
 * Resends happen in umad_recv, which OpenSM's receiver thread is always in;
 * a client that is not in umad_recv when a try times out is resent late.
 * Not emulated: RMPP.
 * The TID's upper 32 bits are matched loosely because the kernel and
 * umad2sim both rewrite them (agent id); OpenSM itself matches on the low 32.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <infiniband/umad.h>
#include <pthread.h>
#include <stdint.h>
#include <string.h>
#include <time.h>

#define SHIM_MAX_PENDING 4096
#define SHIM_MAX_EXPIRED 256
#define SHIM_MAD_SIZE 256
#define SHIM_SLICE_MS 10
#define SHIM_UMAD_HDR 128 /* >= umad_size(), checked at the first send */
#define SHIM_MAX_RESEND 16

struct pending {
	int used;
	int fd;
	int agent;
	uint8_t mgmt_class;
	uint32_t tid_lo;
	int64_t deadline_ns;  /* of the current try */
	int64_t try_ns;       /* timeout_ms of one try */
	int tries_left;       /* resends still to make */
	int resent;           /* sent more than once */
	int timeout_ms;
	int mad_len;
	uint8_t umad[SHIM_UMAD_HDR + SHIM_MAD_SIZE]; /* header (address) + MAD */
};

struct expired {
	int fd;
	uint8_t mgmt_class;
	uint32_t tid_lo;
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct pending pendings[SHIM_MAX_PENDING];
static int pending_high; /* one past the highest slot ever used */
static struct expired expireds[SHIM_MAX_EXPIRED];
static unsigned expired_next;

typedef int (*send_fn)(int, int, void *, int, int, int);
typedef int (*recv_fn)(int, void *, int *, int);

static send_fn real_send(void)
{
	static send_fn fn;
	if (!fn)
		fn = (send_fn)dlsym(RTLD_NEXT, "umad_send");
	return fn;
}

static recv_fn real_recv(void)
{
	static recv_fn fn;
	if (!fn)
		fn = (recv_fn)dlsym(RTLD_NEXT, "umad_recv");
	return fn;
}

static int64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static uint32_t mad_tid_lo(const uint8_t *mad)
{
	return (uint32_t)mad[12] << 24 | (uint32_t)mad[13] << 16 |
	       (uint32_t)mad[14] << 8 | (uint32_t)mad[15];
}

static int mad_is_response(const uint8_t *mad)
{
	return (mad[3] & 0x80) != 0;
}

/* Returns the slot index, or -1 if the table is full (then: no timeout). */
static int pending_add(int fd, int agent, const void *umad, int len,
		       int timeout_ms, int retries)
{
	const uint8_t *mad = umad_get_mad((void *)umad);
	int i, slot = -1;

	pthread_mutex_lock(&lock);
	for (i = 0; i < SHIM_MAX_PENDING; i++) {
		if (!pendings[i].used) {
			slot = i;
			break;
		}
	}
	if (slot >= 0) {
		struct pending *p = &pendings[slot];
		p->used = 1;
		p->fd = fd;
		p->agent = agent;
		p->mgmt_class = mad[1];
		p->tid_lo = mad_tid_lo(mad);
		p->try_ns = (int64_t)timeout_ms * 1000000;
		p->deadline_ns = now_ns() + p->try_ns;
		p->tries_left = retries < 0 ? 0 : retries > SHIM_MAX_RESEND ? SHIM_MAX_RESEND : retries;
		p->resent = 0;
		p->timeout_ms = timeout_ms;
		p->mad_len = len < SHIM_MAD_SIZE ? len : SHIM_MAD_SIZE;
		memcpy(p->umad, umad, umad_size() + (size_t)p->mad_len);
		if (slot >= pending_high)
			pending_high = slot + 1;
	}
	pthread_mutex_unlock(&lock);
	return slot;
}

/* Remembers a TID whose later responses are to be dropped. Under the lock. */
static void expired_add_locked(const struct pending *p)
{
	expireds[expired_next % SHIM_MAX_EXPIRED] =
	    (struct expired){p->fd, p->mgmt_class, p->tid_lo};
	expired_next++;
}

static void pending_drop(int slot)
{
	pthread_mutex_lock(&lock);
	pendings[slot].used = 0;
	pthread_mutex_unlock(&lock);
}

/*
 * A MAD arrived on fd. Returns 1 if it must be dropped (late response to a
 * request already completed as timed out), else clears its pending record.
 */
static int pending_complete(int fd, const uint8_t *mad, uint32_t status)
{
	uint32_t tid = mad_tid_lo(mad);
	int i, found = 0, drop = 0;

	if (!mad_is_response(mad) && status == 0)
		return 0; /* an incoming request, not a completion */
	pthread_mutex_lock(&lock);
	for (i = 0; i < pending_high; i++) {
		struct pending *p = &pendings[i];
		if (p->used && p->fd == fd && p->tid_lo == tid &&
		    p->mgmt_class == mad[1]) {
			p->used = 0;
			found = 1;
			/* an answer to one try: drop the answers to the others */
			if (p->resent)
				expired_add_locked(p);
			break;
		}
	}
	if (!found && status == 0) {
		for (i = 0; i < SHIM_MAX_EXPIRED; i++) {
			struct expired *e = &expireds[i];
			if (e->fd == fd && e->tid_lo == tid &&
			    e->mgmt_class == mad[1] && tid != 0) {
				e->tid_lo = 0;
				drop = 1;
				break;
			}
		}
	}
	pthread_mutex_unlock(&lock);
	return drop;
}

/* A try to send again, copied out of the table (sent outside the lock). */
struct resend {
	int agent;
	int timeout_ms;
	int mad_len;
	uint8_t umad[SHIM_UMAD_HDR + SHIM_MAD_SIZE];
};

/*
 * If a request on fd passed the deadline of its last try, builds its
 * ETIMEDOUT completion in umad (capacity: umad_size() + *length) and returns
 * its agent id; else -1. A request with tries left whose try passed its
 * deadline is copied to `again` (at most `max_again`, count in *n_again) and
 * gets a new deadline. Also reports the nearest deadline on fd in *next_ns
 * (0: none).
 */
static int pending_take_expired(int fd, void *umad, int *length,
				int64_t *next_ns, struct resend *again,
				int max_again, int *n_again)
{
	int64_t now = now_ns();
	int i, agent = -1;

	*next_ns = 0;
	*n_again = 0;
	pthread_mutex_lock(&lock);
	for (i = 0; i < pending_high; i++) {
		struct pending *p = &pendings[i];
		if (!p->used || p->fd != fd)
			continue;
		if (p->deadline_ns <= now && p->tries_left > 0 &&
		    *n_again < max_again) {
			struct resend *r = &again[(*n_again)++];
			r->agent = p->agent;
			r->timeout_ms = p->timeout_ms;
			r->mad_len = p->mad_len;
			memcpy(r->umad, p->umad, umad_size() + (size_t)p->mad_len);
			p->tries_left--;
			p->resent = 1;
			p->deadline_ns = now + p->try_ns;
		} else if (p->deadline_ns <= now && p->tries_left == 0 &&
			   agent < 0) {
			struct ib_user_mad *u = umad;
			int n = p->mad_len < *length ? p->mad_len : *length;

			memset(u, 0, umad_size());
			u->agent_id = (uint32_t)p->agent;
			u->status = ETIMEDOUT;
			u->length = (uint32_t)(umad_size() + (size_t)n);
			memcpy(umad_get_mad(umad), umad_get_mad(p->umad), (size_t)n);
			*length = n;
			agent = p->agent;
			expired_add_locked(p);
			p->used = 0;
			continue;
		}
		if (*next_ns == 0 || p->deadline_ns < *next_ns)
			*next_ns = p->deadline_ns;
	}
	pthread_mutex_unlock(&lock);
	return agent;
}

int umad_send(int fd, int agentid, void *umad, int length, int timeout_ms,
	      int retries)
{
	const uint8_t *mad = umad_get_mad(umad);
	int slot = -1, ret;

	if (!real_send())
		return -EIO;
	if (timeout_ms > 0 && length >= 24 && !mad_is_response(mad) &&
	    umad_size() <= SHIM_UMAD_HDR)
		slot = pending_add(fd, agentid, umad, length, timeout_ms, retries);
	ret = real_send()(fd, agentid, umad, length, timeout_ms, retries);
	if (ret < 0 && slot >= 0)
		pending_drop(slot);
	return ret;
}

int umad_recv(int fd, void *umad, int *length, int timeout_ms)
{
	int64_t caller_deadline = timeout_ms > 0 ? now_ns() + (int64_t)timeout_ms * 1000000 : 0;
	int in_length;

	if (!real_recv())
		return -EIO;
	if (!umad || !length)
		return real_recv()(fd, umad, length, timeout_ms);
	in_length = *length;
	for (;;) {
		struct resend again[4];
		int64_t next_ns, slice_ns;
		int ret, agent, n_again, i;

		*length = in_length;
		agent = pending_take_expired(fd, umad, length, &next_ns, again,
					     4, &n_again);
		/* A resend that fails to send is one more lost try. */
		for (i = 0; i < n_again; i++)
			real_send()(fd, again[i].agent, again[i].umad,
				    again[i].mad_len, again[i].timeout_ms, 0);
		if (agent >= 0) {
			errno = 0;
			return agent;
		}
		if (n_again > 0)
			continue; /* more tries may be due */

		slice_ns = (int64_t)SHIM_SLICE_MS * 1000000;
		if (next_ns) {
			int64_t to_deadline = next_ns - now_ns();
			if (to_deadline < slice_ns)
				slice_ns = to_deadline > 1000000 ? to_deadline : 1000000;
		}
		if (timeout_ms > 0) {
			int64_t left = caller_deadline - now_ns();
			if (left <= 0) {
				errno = ETIMEDOUT;
				return -ETIMEDOUT;
			}
			if (left < slice_ns)
				slice_ns = left;
		}
		if (timeout_ms == 0)
			slice_ns = 0;

		*length = in_length;
		ret = real_recv()(fd, umad, length,
				  (int)((slice_ns + 999999) / 1000000));
		if (ret >= 0) {
			struct ib_user_mad *u = umad;
			if (*length >= 24 &&
			    pending_complete(fd, umad_get_mad(umad), u->status))
				continue; /* late response to a timed-out send */
			return ret;
		}
		if (ret != -ETIMEDOUT || timeout_ms == 0)
			return ret;
	}
}
