// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
/* umad_capture.so: an LD_PRELOAD logger used once to capture the golden SMP
 * bytes in this folder from infiniband-diags `sminfo` under ibsim. It wraps
 * libibumad's umad_send()/umad_recv() (which libibmad calls through the PLT),
 * forwards to the real functions, and appends each MAD as one hex line
 * ("send <512 hex digits>" / "recv <...>") to the file named by
 * $SMHA_MAD_CAPTURE. Not part of the build; see README.md here for the recipe.
 *
 *   cc -shared -fPIC -o umad_capture.so umad_capture.c -ldl
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>

#include <infiniband/umad.h>

static void log_mad(const char *dir, void *umad, int length) {
  const char *path = getenv("SMHA_MAD_CAPTURE");
  if (!path || length <= 0) return;
  FILE *f = fopen(path, "a");
  if (!f) return;
  const unsigned char *mad = umad_get_mad(umad);
  fprintf(f, "%s ", dir);
  for (int i = 0; i < length; ++i) fprintf(f, "%02x", mad[i]);
  fputc('\n', f);
  fclose(f);
}

int umad_send(int portid, int agentid, void *umad, int length, int timeout_ms, int retries) {
  static int (*real)(int, int, void *, int, int, int);
  if (!real) real = (int (*)(int, int, void *, int, int, int))dlsym(RTLD_NEXT, "umad_send");
  log_mad("send", umad, length);
  return real(portid, agentid, umad, length, timeout_ms, retries);
}

int umad_recv(int portid, void *umad, int *length, int timeout_ms) {
  static int (*real)(int, void *, int *, int);
  if (!real) real = (int (*)(int, void *, int *, int))dlsym(RTLD_NEXT, "umad_recv");
  int rc = real(portid, umad, length, timeout_ms);
  if (rc >= 0) log_mad("recv", umad, *length);
  return rc;
}
