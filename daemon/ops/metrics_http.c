/* metrics_http.c - GET /metrics over libmicrohttpd (metrics_http.h). */
#define _GNU_SOURCE /* open_memstream is POSIX 2008; SOCK_CLOEXEC */
#include "metrics_http.h"

#include <arpa/inet.h>
#include <errno.h>
#include <microhttpd.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "log.h"

#define CONTENT_TYPE "text/plain; version=0.0.4; charset=utf-8"

struct rd_metrics_http {
  struct MHD_Daemon *mhd;
  int fd;
  rd_metrics_render_fn render;
  void *arg;
};

int rd_metrics_listen_parse(const char *listen, char *host, size_t host_cap, char *port,
                            size_t port_cap, rd_error_t *err) {
  const char *h = "127.0.0.1", *p = listen;
  size_t hlen = strlen(h);
  const char *colon = strrchr(listen, ':');
  if (colon != NULL) {
    p = colon + 1;
    if (colon > listen) { /* a host is given */
      h = listen;
      hlen = (size_t)(colon - listen);
      if (h[0] == '[') { /* [v6]:port */
        if (hlen < 3 || h[hlen - 1] != ']')
          return rd_error_set(err, RD_EINVAL, "metrics-listen '%.64s': expected [ADDRESS]:PORT "
                              "for an IPv6 address", listen);
        h++;
        hlen -= 2;
      } else if (memchr(h, ':', hlen) != NULL) {
        return rd_error_set(err, RD_EINVAL, "metrics-listen '%.64s': write an IPv6 address in "
                            "brackets, [ADDRESS]:PORT", listen);
      }
    }
  }
  size_t plen = strlen(p);
  unsigned long v = 0;
  int ok = plen > 0 && plen <= 5;
  for (size_t i = 0; ok && i < plen; i++) {
    ok = p[i] >= '0' && p[i] <= '9';
    v = v * 10 + (unsigned long)(p[i] - '0');
  }
  if (!ok || v > 65535)
    return rd_error_set(err, RD_EINVAL, "metrics-listen '%.64s': expected PORT, :PORT or "
                        "HOST:PORT with a port in 0..65535", listen);
  if (hlen == 0 || hlen >= host_cap || plen >= port_cap)
    return rd_error_set(err, RD_EINVAL, "metrics-listen '%.64s': the host is empty or too long",
                        listen);
  memcpy(host, h, hlen);
  host[hlen] = '\0';
  memcpy(port, p, plen + 1);
  return RD_OK;
}

/* A listening socket on host:port; bound receives the address. */
static int listen_socket(const char *addr, char *bound, size_t bound_cap, int *fd_out,
                         rd_error_t *err) {
  char host[256], port[8];
  int rc = rd_metrics_listen_parse(addr, host, sizeof host, port, sizeof port, err);
  if (rc) return rc;
  struct addrinfo hints, *res = NULL;
  memset(&hints, 0, sizeof hints);
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  int g = getaddrinfo(host, port, &hints, &res);
  if (g != 0)
    return rd_error_set(err, RD_EINVAL, "metrics-listen %s: %s", addr, gai_strerror(g));
  int fd = -1, e = 0;
  for (struct addrinfo *a = res; a != NULL && fd < 0; a = a->ai_next) {
    fd = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) {
      e = errno;
      continue;
    }
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (bind(fd, a->ai_addr, a->ai_addrlen) != 0 || listen(fd, 16) != 0) {
      e = errno;
      close(fd);
      fd = -1;
    }
  }
  freeaddrinfo(res);
  if (fd < 0)
    return rd_error_set(err, RD_EINVAL, "cannot listen for metrics on %s: %s", addr,
                        strerror(e));
  struct sockaddr_storage ss;
  socklen_t sl = sizeof ss;
  int bport = 0;
  if (getsockname(fd, (struct sockaddr *)&ss, &sl) == 0)
    bport = ss.ss_family == AF_INET6 ? ntohs(((struct sockaddr_in6 *)&ss)->sin6_port)
                                     : ntohs(((struct sockaddr_in *)&ss)->sin_port);
  if (bound != NULL)
    snprintf(bound, bound_cap, strchr(host, ':') ? "[%s]:%d" : "%s:%d", host, bport);
  *fd_out = fd;
  return RD_OK;
}

static enum MHD_Result reply(struct MHD_Connection *c, unsigned code, const char *text,
                             const char *allow) {
  struct MHD_Response *r =
      MHD_create_response_from_buffer(strlen(text), (void *)text, MHD_RESPMEM_PERSISTENT);
  if (r == NULL) return MHD_NO;
  MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, "text/plain; charset=utf-8");
  if (allow != NULL) MHD_add_response_header(r, MHD_HTTP_HEADER_ALLOW, allow);
  enum MHD_Result ok = MHD_queue_response(c, code, r);
  MHD_destroy_response(r);
  return ok;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url,
                                  const char *method, const char *version,
                                  const char *upload_data, size_t *upload_data_size,
                                  void **con_cls) {
  (void)version;
  (void)upload_data;
  (void)con_cls;
  rd_metrics_http_t *h = cls;
  if (strcmp(method, MHD_HTTP_METHOD_GET) != 0 && strcmp(method, MHD_HTTP_METHOD_HEAD) != 0) {
    *upload_data_size = 0; /* a body is not read, only refused */
    return reply(c, MHD_HTTP_METHOD_NOT_ALLOWED, "only GET and HEAD\n", "GET, HEAD");
  }
  if (strcmp(url, "/metrics") != 0)
    return reply(c, MHD_HTTP_NOT_FOUND, "replayd serves /metrics only\n", NULL);
  char *buf = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&buf, &len);
  int rc = f != NULL ? h->render(h->arg, f) : RD_ENOMEM;
  if (f != NULL && fclose(f) != 0 && rc == RD_OK) rc = RD_ENOMEM;
  if (rc != RD_OK) {
    free(buf);
    rd_log_warn("metrics", "a scrape failed: out of memory rendering the metrics");
    return reply(c, MHD_HTTP_INTERNAL_SERVER_ERROR, "out of memory\n", NULL);
  }
  struct MHD_Response *r = MHD_create_response_from_buffer(len, buf, MHD_RESPMEM_MUST_FREE);
  if (r == NULL) {
    free(buf);
    return MHD_NO;
  }
  MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, CONTENT_TYPE);
  enum MHD_Result ok = MHD_queue_response(c, MHD_HTTP_OK, r);
  MHD_destroy_response(r);
  return ok;
}

static void mhd_log(void *cls, const char *fmt, va_list ap) {
  (void)cls;
  char msg[256];
  vsnprintf(msg, sizeof msg, fmt, ap);
  msg[strcspn(msg, "\n")] = '\0';
  rd_log_debug("metrics", "libmicrohttpd: %s", msg);
}

int rd_metrics_http_start(const char *listen, rd_metrics_render_fn render, void *arg,
                          rd_metrics_http_t **out, char *bound, size_t bound_cap,
                          rd_error_t *err) {
  *out = NULL;
  rd_metrics_http_t *h = calloc(1, sizeof *h);
  if (h == NULL) return rd_error_set(err, RD_ENOMEM, "out of memory for the metrics endpoint");
  int rc = listen_socket(listen, bound, bound_cap, &h->fd, err);
  if (rc) {
    free(h);
    return rc;
  }
  h->render = render;
  h->arg = arg;
  h->mhd = MHD_start_daemon(
      MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_POLL | MHD_USE_ERROR_LOG, 0, NULL, NULL,
      on_request, h, MHD_OPTION_LISTEN_SOCKET, (MHD_socket)h->fd, MHD_OPTION_CONNECTION_LIMIT,
      (unsigned int)RD_METRICS_HTTP_CONNECTIONS, MHD_OPTION_CONNECTION_TIMEOUT,
      (unsigned int)RD_METRICS_HTTP_TIMEOUT_S, MHD_OPTION_EXTERNAL_LOGGER, mhd_log, NULL,
      MHD_OPTION_END);
  if (h->mhd == NULL) {
    close(h->fd);
    free(h);
    return rd_error_set(err, RD_EINTERNAL, "libmicrohttpd did not start on %s", listen);
  }
  *out = h;
  return RD_OK;
}

void rd_metrics_http_stop(rd_metrics_http_t *h) {
  if (h == NULL) return;
  MHD_stop_daemon(h->mhd); /* closes the listening socket it was given */
  free(h);
}
