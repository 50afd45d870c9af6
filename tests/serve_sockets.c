/*
 * serve_sockets.c — what curl cannot show about `tolk serve`, with raw
 * sockets on loopback: a client sending a byte at a time is cut off by the
 * connection timeout; --max-connections bounds sockets; a client that hangs
 * up while its text is being translated gets its work cancelled (and the
 * metrics say so); many clients at once all get answers; SIGTERM under load
 * lets in-flight requests finish and exits 0; past --drain, what is left
 * is cancelled with a 503 and the exit is still 0.
 *
 * Usage: serve_sockets TOLK MODEL_DIR. Also the program the ThreadSanitizer
 * build runs (TOLK_SANITIZE=thread): the server under load from every side.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "testutil.h"


static const char *tolk, *model;
static pid_t started[16];
static int n_started;

/* A failed check must not leave servers behind. */
static void kill_started(void) {
  for (int i = 0; i < n_started; i++) kill(started[i], SIGKILL);
}

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* TOLK_TEST_TIME_SCALE: how much longer than a release build the server
 * may take (the ThreadSanitizer build runs it several times slower); the
 * waits for something to happen and the bounds on how long it took grow
 * by it, not the timeouts the checks are about. */
static double time_scale = 1;

static void sleep_s(double s) {
  struct timespec ts = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};
  nanosleep(&ts, NULL);
}

struct server {
  pid_t pid;
  int port;
};

/* Starts `tolk serve --port 0 -m MODEL extra...` and reads its port. */
static struct server start(const char *const *extra) {
  struct server s = {0, 0};
  int out[2];
  if (pipe(out)) return s;
  const char *argv[32] = {tolk, "serve", "--port", "0", "-m", model};
  int n = 6;
  for (; extra && *extra && n < 30; extra++) argv[n++] = *extra;
  argv[n] = NULL;
  s.pid = fork();
  if (s.pid == 0) {
    dup2(out[1], 1);
    close(out[0]);
    execv(tolk, (char *const *)argv);
    _exit(127);
  }
  close(out[1]);
  if (n_started < 16) started[n_started++] = s.pid;
  FILE *f = fdopen(out[0], "r");
  char line[256];
  if (f && fgets(line, sizeof line, f)) {
    char *colon = strrchr(line, ':');
    if (!strncmp(line, "listening on http://", 20) && colon) s.port = atoi(colon + 1);
  }
  /* Keep the pipe open in a detached reader so the server's stdout never blocks. */
  return s;
}

static int stop(struct server *s, double *took) {
  double t0 = now_s();
  kill(s->pid, SIGTERM);
  int st = 0;
  waitpid(s->pid, &st, 0);
  if (took) *took = now_s() - t0;
  return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

static int dial(int port) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in a = {0};
  a.sin_family = AF_INET;
  a.sin_port = htons((uint16_t)port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, (struct sockaddr *)&a, sizeof a)) {
    close(fd);
    return -1;
  }
  struct timeval tv = {(time_t)(20 * time_scale), 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  return fd;
}

/* One request on a new connection; the whole answer into resp. Returns the
 * status (0: no answer). */
static int http(int port, const char *method, const char *path, const char *ctype, const char *body,
                char *resp, size_t cap) {
  int fd = dial(port);
  if (fd < 0) return 0;
  char head[512];
  size_t bl = body ? strlen(body) : 0;
  int hl = body ? snprintf(head, sizeof head,
                           "%s %s HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Type: %s\r\nContent-Length: %zu\r\n\r\n",
                           method, path, ctype ? ctype : "application/json", bl)
                  : snprintf(head, sizeof head, "%s %s HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", method, path);
  if (write(fd, head, (size_t)hl) != hl || (bl && write(fd, body, bl) != (ssize_t)bl)) {
    close(fd);
    return 0;
  }
  size_t n = 0;
  ssize_t got;
  while (n + 1 < cap && (got = read(fd, resp + n, cap - n - 1)) > 0) n += (size_t)got;
  resp[n] = '\0';
  close(fd);
  int status = 0;
  if (sscanf(resp, "HTTP/1.1 %d", &status) != 1) status = 0;
  return status;
}

/* The value of the first metrics line starting with `prefix`. */
static double metric(int port, const char *prefix) {
  static char buf[1 << 20];
  if (http(port, "GET", "/metrics", NULL, NULL, buf, sizeof buf) != 200) return -1;
  for (char *l = buf; l && *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL)
    if (!strncmp(l, prefix, strlen(prefix))) return atof(l + strlen(prefix));
  return -1;
}

/* Waits until the server holds work (queued or decoding). */
static bool wait_busy(int port) {
  for (int i = 0; i < 200 * time_scale; i++) {
    if (metric(port, "tolk_queue_depth{slot=\"0\",model=\"marian-tiny\"} ") > 0 ||
        metric(port, "tolk_live_rows{slot=\"0\",model=\"marian-tiny\"} ") > 0)
      return true;
    sleep_s(0.01);
  }
  return false;
}

/* A body of n sentences. */
static char *long_text(int n) {
  char *b = malloc((size_t)n * 24 + 64);
  size_t w = (size_t)sprintf(b, "{\"q\":\"");
  for (int i = 0; i < n; i++) w += (size_t)sprintf(b + w, "Open the file %d. ", i);
  sprintf(b + w, "\",\"source\":\"en\",\"target\":\"zh\"}");
  return b;
}

/* ------------------------------------------------------------------ slow clients, connection limit */

static void slow_and_many(void) {
  const char *extra[] = {"--conn-timeout", "1", "--max-connections", "6", NULL};
  struct server s = start(extra);
  CHECK_MSG(s.port > 0, "server did not start");
  if (!s.port) return;
  /* Five idle sockets leave a slot free of six, so none is shed: they are
   * cut after --conn-timeout. */
  int idle[5];
  for (int i = 0; i < 5; i++) idle[i] = dial(s.port);
  double t0 = now_s();
  char c;
  ssize_t got;
  for (int i = 0; i < 5; i++) {
    got = read(idle[i], &c, 1);
    CHECK_MSG(got <= 0, "idle connection %d got data", i);
    close(idle[i]);
  }
  CHECK_MSG(now_s() - t0 < 3.0, "idle connections lived %.2fs with --conn-timeout 1", now_s() - t0);
  CHECK_MSG(now_s() - t0 > 0.7, "idle connections were cut after %.2fs, before --conn-timeout 1", now_s() - t0);
  /* A client sending a byte every 0.2 s keeps MHD's inactivity timer happy,
   * but not the read deadline. */
  int fd = dial(s.port);
  const char *req = "POST /translate HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n";
  t0 = now_s();
  bool cut = false;
  for (size_t i = 0; i < strlen(req) && !cut; i++) {
    if (send(fd, req + i, 1, MSG_NOSIGNAL) != 1) cut = true;
    sleep_s(0.2);
    errno = 0;
    if (recv(fd, &c, 1, MSG_DONTWAIT) == 0) cut = true;
  }
  CHECK_MSG(cut && now_s() - t0 < 3.0, "a byte-a-0.2s client was not cut (%.2fs)", now_s() - t0);
  close(fd);
  char resp[4096];
  int st = http(s.port, "GET", "/health", NULL, NULL, resp, sizeof resp);
  CHECK_MSG(st == 200, "server unwell after slow clients: %d %s", st, resp);
  CHECK_MSG(stop(&s, NULL) == 0, "exit status after SIGTERM");
}

/* ------------------------------------------------------------------ connection pressure */

/* Sends `req` on fd and reads one answer's status line; 0: none. */
static int ask(int fd, const char *req) {
  if (write(fd, req, strlen(req)) != (ssize_t)strlen(req)) return 0;
  char buf[1024];
  ssize_t got = read(fd, buf, sizeof buf - 1);
  buf[got > 0 ? got : 0] = '\0';
  int status = 0;
  return sscanf(buf, "HTTP/1.1 %d", &status) == 1 ? status : 0;
}

/* True when the server has closed fd (EOF within a second). */
static bool closed_by_server(int fd) {
  struct timeval tv = {1, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  char c;
  return read(fd, &c, 1) == 0;
}

/* Sockets that send nothing cannot hold every slot: with the slots short, a
 * new connection sheds the one waiting longest, never-served ones first, and
 * never one whose request is being served. --conn-timeout is longer than
 * the whole test can take, so only shedding can explain a cut: at 60 s,
 * under TSan on a machine busy at a higher priority, the test ran 133 s and
 * a connection left waiting was cut at its deadline. */
static void shed_idle(void) {
  const char *extra[] = {"--conn-timeout", "900", "--max-connections", "6", "--max-queue", "100000",
                         "--max-chars", "0", "--timeout", "900", NULL};
  struct server s = start(extra);
  CHECK_MSG(s.port > 0, "server did not start");
  if (!s.port) return;
  const char *get = "GET /health HTTP/1.1\r\nHost: x\r\n\r\n";
  int served = dial(s.port); /* keep-alive, answered once, then waiting */
  CHECK_MSG(ask(served, get) == 200, "keep-alive connection not answered");
  int idle[5];
  for (int i = 0; i < 5; i++) {
    idle[i] = dial(s.port);
    sleep_s(0.02); /* in order of age */
  }
  /* Six held of six: the oldest never-served one went, not the older served one. */
  CHECK_MSG(closed_by_server(idle[0]), "the oldest idle connection was not shed at six of six slots");
  int seventh = dial(s.port);
  CHECK_MSG(seventh >= 0 && ask(seventh, get) == 200, "a new connection was not served while idle ones held the slots");
  CHECK_MSG(closed_by_server(idle[1]), "the second oldest idle connection was not shed");
  CHECK_MSG(ask(served, get) == 200, "the served keep-alive connection was shed before never-served ones");
  /* A request being translated is never shed, however many arrive. */
  char *body = long_text(600);
  int busy = dial(s.port);
  char head[256];
  int hl = snprintf(head, sizeof head, "POST /translate HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %zu\r\n\r\n", strlen(body));
  CHECK_MSG(write(busy, head, (size_t)hl) == hl && write(busy, body, strlen(body)) == (ssize_t)strlen(body), "send");
  CHECK_MSG(wait_busy(s.port), "the long text never reached the scheduler");
  int crowd[40];
  for (int i = 0; i < 40; i++) crowd[i] = dial(s.port);
  CHECK_MSG(wait_busy(s.port), "the long text was done before the crowd came: the check below proves nothing");
  char resp[1 << 15];
  size_t n = 0;
  ssize_t got;
  while (n + 1 < sizeof resp && (got = read(busy, resp + n, sizeof resp - n - 1)) > 0) {
    n += (size_t)got;
    resp[n] = '\0';
    if (strstr(resp, "}")) break;
  }
  resp[n] = '\0';
  CHECK_MSG(!strncmp(resp, "HTTP/1.1 200", 12), "the request being served was cut under pressure: %.200s", resp);
  double shed = metric(s.port, "tolk_connections_cut_total{reason=\"shed\"} ");
  CHECK_MSG(shed >= 40, "tolk_connections_cut_total{reason=\"shed\"} is %g after 40+ sheds", shed);
  CHECK_MSG(metric(s.port, "tolk_connections_cut_total{reason=\"slow\"} ") == 0, "a connection was cut as slow");
  for (int i = 0; i < 40; i++) close(crowd[i]);
  for (int i = 0; i < 5; i++) close(idle[i]);
  close(busy);
  close(seventh);
  close(served);
  free(body);
  CHECK_MSG(stop(&s, NULL) == 0, "exit status after SIGTERM");
}

/* ------------------------------------------------------------------ hang-ups */

static void hang_up(void) {
  const char *extra[] = {"--max-queue", "100000", "--max-chars", "0", NULL};
  struct server s = start(extra);
  CHECK_MSG(s.port > 0, "server did not start");
  if (!s.port) return;
  char *body = long_text(3000);
  int fd = dial(s.port);
  char head[256];
  int hl = snprintf(head, sizeof head, "POST /translate HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %zu\r\n\r\n", strlen(body));
  CHECK_MSG(write(fd, head, (size_t)hl) == hl && write(fd, body, strlen(body)) == (ssize_t)strlen(body), "send");
  sleep_s(0.3);
  close(fd); /* the client leaves while its 3000 sentences are queued */
  double dropped = 0;
  for (int i = 0; i < 50 * time_scale && dropped <= 0; i++) {
    sleep_s(0.1);
    dropped = metric(s.port, "tolk_sentences_dropped_total{slot=\"0\",model=\"marian-tiny\",reason=\"cancelled\"} ");
  }
  CHECK_MSG(dropped > 0, "no sentence was cancelled after the client left (%g)", dropped);
  double depth = metric(s.port, "tolk_queue_depth{slot=\"0\",model=\"marian-tiny\"} ");
  CHECK_MSG(depth == 0, "the queue still holds %g sentences", depth);
  /* A stream whose client leaves: cancelled too. */
  free(body);
  body = long_text(3000);
  char *stream = malloc(strlen(body) + 64);
  sprintf(stream, "{\"texts\":[\"%s\"],\"stream\":true}", strstr(body, "Open"));
  strstr(stream, "\",\"source")[0] = '\0';
  strcat(stream, "\"],\"stream\":true}");
  fd = dial(s.port);
  hl = snprintf(head, sizeof head, "POST /v1/translate HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %zu\r\n\r\n", strlen(stream));
  CHECK_MSG(write(fd, head, (size_t)hl) == hl && write(fd, stream, strlen(stream)) == (ssize_t)strlen(stream), "send");
  char buf[4096];
  ssize_t got = read(fd, buf, sizeof buf - 1);
  buf[got > 0 ? got : 0] = '\0';
  CHECK_MSG(strstr(buf, "text/event-stream") != NULL, "no stream: %s", buf);
  close(fd);
  double before = dropped;
  for (int i = 0; i < 50 * time_scale && dropped <= before; i++) {
    sleep_s(0.1);
    dropped = metric(s.port, "tolk_sentences_dropped_total{slot=\"0\",model=\"marian-tiny\",reason=\"cancelled\"} ");
  }
  CHECK_MSG(dropped > before, "a stream's sentences went on after its client left");
  free(stream);
  free(body);
  CHECK_MSG(stop(&s, NULL) == 0, "exit status after SIGTERM");
}

/* ------------------------------------------------------------------ load and drain */

struct load {
  int port, n, ok, other;
  atomic_bool *stopping;
};

static void *client(void *arg) {
  struct load *l = arg;
  char resp[8192];
  for (int i = 0; i < l->n; i++) {
    const char *bodies[] = {"{\"q\":\"Hello world. Open it.\",\"source\":\"en\",\"target\":\"zh\"}",
                            "{\"texts\":[\"Save the file.\"],\"stream\":true}",
                            "{\"text\":[\"Goodbye.\"],\"target_lang\":\"ZH\"}"};
    const char *paths[] = {"/translate", "/v1/translate", "/v2/translate"};
    int k = i % 3, st = http(l->port, "POST", paths[k], NULL, bodies[k], resp, sizeof resp);
    if (st == 200) l->ok++;
    else if (atomic_load(l->stopping) && (st == 503 || st == 0)) l->other++; /* refused while draining */
    else {
      fprintf(stderr, "client: %s -> %d: %.200s\n", paths[k], st, resp);
      l->other += 1000;
    }
  }
  return NULL;
}

struct flight {
  int port, status;
  const char *path, *body;
  char resp[1 << 16];
};

static void *fly(void *arg) {
  struct flight *f = arg;
  f->status = http(f->port, "POST", f->path, NULL, f->body, f->resp, sizeof f->resp);
  return NULL;
}

static void load_and_drain(void) {
  /* A long --timeout and --drain: the request in flight must neither be
   * refused as one that would miss its deadline nor cut by the drain (the
   * TSan build translates ten times slower); --drain's end is tested below. */
  const char *extra[] = {"--max-queue", "100000", "--max-chars", "0", "--timeout", "900", "--drain", "300", NULL};
  struct server s = start(extra);
  CHECK_MSG(s.port > 0, "server did not start");
  if (!s.port) return;
  atomic_bool stopping = false;
  enum { N = 8 };
  pthread_t th[N];
  struct load l[N];
  for (int i = 0; i < N; i++) {
    l[i] = (struct load){s.port, 30, 0, 0, &stopping};
    pthread_create(&th[i], NULL, client, &l[i]);
  }
  for (int i = 0; i < N; i++) pthread_join(th[i], NULL);
  int ok = 0, bad = 0;
  for (int i = 0; i < N; i++) ok += l[i].ok, bad += l[i].other;
  CHECK_MSG(ok == N * 30 && bad == 0, "%d of %d answered 200 under load (%d other)", ok, N * 30, bad);

  /* SIGTERM under load, a long request in flight: it finishes, exit 0. */
  char *body = long_text(300);
  struct flight *f = calloc(1, sizeof *f);
  *f = (struct flight){.port = s.port, .path = "/translate", .body = body};
  pthread_t t;
  pthread_create(&t, NULL, fly, f);
  CHECK_MSG(wait_busy(s.port), "the long request never reached the scheduler");
  for (int i = 0; i < 4; i++) {
    l[i] = (struct load){s.port, 20, 0, 0, &stopping};
    pthread_create(&th[i], NULL, client, &l[i]);
  }
  sleep_s(0.1);
  atomic_store(&stopping, true);
  double took;
  int rc = stop(&s, &took);
  pthread_join(t, NULL);
  for (int i = 0; i < 4; i++) pthread_join(th[i], NULL);
  bad = 0;
  for (int i = 0; i < 4; i++) bad += l[i].other >= 1000;
  CHECK_MSG(rc == 0, "exit status %d after SIGTERM under load", rc);
  CHECK_MSG(f->status == 200 && strstr(f->resp, "translatedText"), "the request in flight got %d: %.200s", f->status, f->resp);
  CHECK_MSG(bad == 0, "%d clients got something else than 200/503/refused while draining", bad);
  free(body);

  /* Past --drain, what is left is cancelled: 503, and still exit 0. */
  const char *extra2[] = {"--max-queue", "100000", "--max-chars", "0", "--drain", "0.3", NULL};
  s = start(extra2);
  CHECK_MSG(s.port > 0, "server did not start");
  body = long_text(20000);
  *f = (struct flight){.port = s.port, .path = "/translate", .body = body};
  pthread_create(&t, NULL, fly, f);
  CHECK_MSG(wait_busy(s.port), "the long request never reached the scheduler");
  rc = stop(&s, &took);
  pthread_join(t, NULL);
  CHECK_MSG(rc == 0 && took < 4 * time_scale, "exit %d after %.2fs with --drain 0.3", rc, took);
  CHECK_MSG(f->status == 503 && strstr(f->resp, "cancelled"), "a request past the drain got %d: %.200s", f->status, f->resp);
  free(body);
  free(f);
}

int main(int argc, char **argv) {
  if (argc != 3) {
    fprintf(stderr, "usage: serve_sockets TOLK MODEL_DIR\n");
    return 2;
  }
  tolk = argv[1];
  model = argv[2];
  const char *ts = getenv("TOLK_TEST_TIME_SCALE");
  if (ts && atof(ts) >= 1) time_scale = atof(ts);
  signal(SIGPIPE, SIG_IGN);
  atexit(kill_started);
  slow_and_many();
  shed_idle();
  hang_up();
  load_and_drain();
  return tu_finish("serve_sockets");
}
