/* The floor of an HTTP server's CPU per request on this machine: one
 * process, one epoll loop, keep-alive connections, each read answered by
 * one fixed response from memory (no parsing past the blank line, no
 * application). What it spends per request is what the kernel's TCP over
 * loopback and the event loop cost: no server that reads and answers over
 * sockets spends less. bench/http/run.sh measures it beside the servers.
 *
 *   floor PORT      (serves 127.0.0.1:PORT until killed) */

#define _GNU_SOURCE
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

static const char RESPONSE[] =
    "HTTP/1.1 200 OK\r\ncontent-type: text/html; charset=UTF-8\r\ncontent-length: 13\r\n"
    "date: Thu, 01 Jan 2026 00:00:00 GMT\r\n\r\nHello, world!";

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: floor PORT\n");
    return 2;
  }
  int l = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  int one = 1;
  setsockopt(l, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  struct sockaddr_in a = {.sin_family = AF_INET,
                          .sin_port = htons((uint16_t)atoi(argv[1])),
                          .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  if (bind(l, (struct sockaddr *)&a, sizeof a) != 0 || listen(l, 4096) != 0) {
    perror("floor: bind/listen");
    return 1;
  }
  int ep = epoll_create1(EPOLL_CLOEXEC);
  struct epoll_event ev = {.events = EPOLLIN, .data.fd = l};
  epoll_ctl(ep, EPOLL_CTL_ADD, l, &ev);
  struct epoll_event events[256];
  char buf[16384];
  for (;;) {
    int n = epoll_wait(ep, events, 256, -1);
    for (int i = 0; i < n; i++) {
      int fd = events[i].data.fd;
      if (fd == l) {
        int c;
        while ((c = accept4(l, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC)) >= 0) {
          setsockopt(c, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
          struct epoll_event ce = {.events = EPOLLIN, .data.fd = c};
          epoll_ctl(ep, EPOLL_CTL_ADD, c, &ce);
        }
        continue;
      }
      ssize_t r = recv(fd, buf, sizeof buf, 0);
      if (r <= 0) {
        if (r < 0 && errno == EAGAIN) {
          continue;
        }
        close(fd);
        continue;
      }
      /* One response per request head in what was read. */
      for (char *p = buf; (p = memmem(p, (size_t)(buf + r - p), "\r\n\r\n", 4)) != NULL; p += 4) {
        if (send(fd, RESPONSE, sizeof RESPONSE - 1, MSG_NOSIGNAL) < 0) {
          break;
        }
      }
      /* HTTP/1.1 clients asking to close: close after answering. */
      if (memmem(buf, (size_t)r, "onnection: close", 16) != NULL) {
        close(fd);
      }
    }
  }
}
