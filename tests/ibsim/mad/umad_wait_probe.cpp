// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
// umad_wait_probe: the experiment behind UmadTransport's receive thread
// (doc/mad-transport.md). Opens the default umad port and prints, one
// "key value" line each, how the umad fd behaves with each wait mechanism:
//   epoll_add   <rc> <errno>      epoll_ctl(EPOLL_CTL_ADD) on the umad fd
//   poll_mixed  <rc> <eventfd revents> <ms>   poll([umad fd, signalled eventfd], 300 ms)
//   umad_recv   <rc> <ms>         umad_recv() with a 200 ms timeout, nothing pending
// Exit 0 once all ran, 5 if no port could be opened.
#include <poll.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <vector>

#include <infiniband/umad.h>

namespace {
long long ms_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() -
                                                               t0)
      .count();
}
}  // namespace

int main() {
  umad_port_t port;
  if (umad_get_port(nullptr, 0, &port) < 0) return 5;
  int id = umad_open_port(port.ca_name, port.portnum);
  umad_release_port(&port);
  if (id < 0) return 5;
  if (umad_register(id, 0x81, 1, 0, nullptr) < 0) return 5;
  int fd = umad_get_fd(id);

  int ep = epoll_create1(EPOLL_CLOEXEC);
  epoll_event ev{};
  ev.events = EPOLLIN;
  errno = 0;
  int rc = epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev);
  std::printf("epoll_add %d %d\n", rc, rc < 0 ? errno : 0);
  close(ep);

  int efd = eventfd(1, EFD_CLOEXEC);  // readable from the start
  pollfd p[2] = {{fd, POLLIN, 0}, {efd, POLLIN, 0}};
  auto t0 = std::chrono::steady_clock::now();
  rc = poll(p, 2, 300);
  std::printf("poll_mixed %d %d %lld\n", rc, p[1].revents, ms_since(t0));
  close(efd);

  std::vector<char> buf(umad_size() + 256);
  int len = 256;
  t0 = std::chrono::steady_clock::now();
  rc = umad_recv(id, buf.data(), &len, 200);
  std::printf("umad_recv %d %lld\n", rc, ms_since(t0));
  umad_close_port(id);
  return 0;
}
