// delay_relay: a userspace "wire" between two network namespaces, standing in
// for sch_netem (not in this kernel). It creates a TUN device in each
// namespace, reads every packet the kernel routes into one, holds it for a
// one-way delay after serialising it at a set rate behind a bounded FIFO, and
// writes it into the other.
//
//   delay_relay --ns-a NS --ns-b NS [--dev rtt0] [--delay-ms 25]
//               [--rate-mbit 1000] [--queue-kb 4096] [--no-gso]
//
// NS is a name under /run/netns (`ip netns add`) or a path to a netns file.
// The devices are created from this process: setns() into each namespace,
// open /dev/net/tun there (a TUN fd belongs to the namespace it was opened
// in), TUNSETIFF, then setns() back. They are not persistent, so they vanish
// when this process exits, however it exits. Addresses and "link up" are left
// to the caller (`ip -n NS addr add ... dev rtt0; ip -n NS link set rtt0 up`).
// "ready" is printed on stdout once both devices exist.
//
// With GSO (the default) the devices use IFF_VNET_HDR and TUNSETOFFLOAD
// (checksum + TSO4/6): the TCP stack hands over 64 KiB super-packets with a
// virtio_net_hdr in front, and writing header + packet into the other device
// unchanged delivers them as one GSO skb, so a packet costs one read and one
// write whatever its size. --no-gso gives plain 1500-byte packets.
//
// Model per direction (what netem + a rate limit would do): a packet arriving
// at time t starts serialising at max(t, link_free), takes wire_bytes * 8 /
// rate, and is delivered one delay after it has been serialised. wire_bytes
// counts the headers of every segment of a GSO packet. A packet that would
// wait longer than --queue-kb at the rate is dropped (tail drop), as is one
// beyond --limit-mb of held bytes. --rate-mbit 0 means no rate limit.
//
// SIGTERM/SIGINT: print statistics to stderr and exit 0. SIGUSR1: print them.
// The process also gets SIGTERM when its parent dies (PR_SET_PDEATHSIG), so a
// killed test script does not leave it holding the namespaces.
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <linux/if.h>
#include <linux/if_tun.h>
#include <linux/virtio_net.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <time.h>
#include <unistd.h>

enum { kMaxPacket = 256 * 1024, kReadBurst = 64 };

struct packet {
  struct packet* next;
  uint64_t due_ns;  // when it leaves the delay line
  uint32_t len;     // bytes including the virtio_net_hdr, as read
  unsigned char data[];
};

struct direction {
  const char* name;  // "a->b"
  int in, out;
  struct packet *head, *tail;  // FIFO: due_ns is non-decreasing
  uint64_t link_free_ns;       // when the serialiser is next idle
  uint64_t held_bytes;
  // Statistics.
  uint64_t packets, bytes, wire_bytes, gso_packets, dropped_queue, dropped_limit, write_errors;
  uint64_t max_held_bytes, max_backlog_ns;
};

static struct {
  const char* ns[2];
  const char* dev;
  uint64_t delay_ns;
  uint64_t rate_bps;  // 0 = unlimited
  uint64_t queue_bytes;
  uint64_t limit_bytes;
  int gso;
  size_t vnet_hdr_len;
} opt = {
    .dev = "rtt0",
    .delay_ns = 25000000ull,
    .rate_bps = 1000000000ull,
    .queue_bytes = 4096ull * 1024,
    .limit_bytes = 256ull << 20,
    .gso = 1,
};

static volatile sig_atomic_t stop_requested;
static volatile sig_atomic_t stats_requested;

static void onSignal(int sig) {
  if (sig == SIGUSR1)
    stats_requested = 1;
  else
    stop_requested = 1;
}

static void die(const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fprintf(stderr, "delay_relay: ");
  vfprintf(stderr, fmt, ap);
  fprintf(stderr, "\n");
  va_end(ap);
  exit(1);
}

static uint64_t nowNs(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static uint64_t parseUint(const char* what, const char* s) {
  char* end = NULL;
  errno = 0;
  unsigned long long v = strtoull(s, &end, 10);
  if (errno || end == s || *end || s[0] == '-') die("bad %s: %s", what, s);
  return v;
}

// Opens the TUN device in namespace `ns` and returns its fd; the calling
// thread is back in `home` on return.
static int openTunIn(const char* ns, int home) {
  char path[512];
  if (strchr(ns, '/'))
    snprintf(path, sizeof path, "%s", ns);
  else
    snprintf(path, sizeof path, "/run/netns/%s", ns);
  int nsfd = open(path, O_RDONLY | O_CLOEXEC);
  if (nsfd < 0) die("open %s: %s", path, strerror(errno));
  if (setns(nsfd, CLONE_NEWNET) != 0) die("setns %s: %s", path, strerror(errno));
  close(nsfd);

  int fd = open("/dev/net/tun", O_RDWR | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) die("open /dev/net/tun in %s: %s", ns, strerror(errno));
  struct ifreq ifr;
  memset(&ifr, 0, sizeof ifr);
  ifr.ifr_flags = IFF_TUN | IFF_NO_PI | (opt.gso ? IFF_VNET_HDR : 0);
  snprintf(ifr.ifr_name, IFNAMSIZ, "%s", opt.dev);
  if (ioctl(fd, TUNSETIFF, &ifr) != 0) die("TUNSETIFF %s in %s: %s", opt.dev, ns, strerror(errno));
  if (opt.gso) {
    int hdr = (int)sizeof(struct virtio_net_hdr);
    if (ioctl(fd, TUNSETVNETHDRSZ, &hdr) != 0) die("TUNSETVNETHDRSZ: %s", strerror(errno));
    unsigned offloads = TUN_F_CSUM | TUN_F_TSO4 | TUN_F_TSO6 | TUN_F_TSO_ECN;
    if (ioctl(fd, TUNSETOFFLOAD, offloads) != 0) die("TUNSETOFFLOAD: %s", strerror(errno));
  }
  if (setns(home, CLONE_NEWNET) != 0) die("setns back: %s", strerror(errno));
  return fd;
}

// Bytes the packet occupies on a wire: a GSO packet becomes ceil(payload /
// gso_size) segments, each with its own IP + TCP headers.
static uint64_t wireBytes(const unsigned char* p, size_t len, int* is_gso) {
  *is_gso = 0;
  if (!opt.gso) return len;
  if (len < opt.vnet_hdr_len) return 0;
  struct virtio_net_hdr h;
  memcpy(&h, p, sizeof h);
  const unsigned char* ip = p + opt.vnet_hdr_len;
  size_t ip_len = len - opt.vnet_hdr_len;
  uint8_t type = h.gso_type & (uint8_t)~VIRTIO_NET_HDR_GSO_ECN;
  if (type == VIRTIO_NET_HDR_GSO_NONE || h.gso_size == 0 || ip_len < 20) return ip_len;
  size_t l3, l4_off;
  if ((ip[0] >> 4) == 4) {
    l3 = (size_t)(ip[0] & 0x0f) * 4;
    l4_off = l3;
  } else {
    l3 = 40;
    l4_off = 40;
  }
  size_t l4 = 20;
  if (type != VIRTIO_NET_HDR_GSO_UDP && ip_len >= l4_off + 13) l4 = (size_t)(ip[l4_off + 12] >> 4) * 4;
  else if (type == VIRTIO_NET_HDR_GSO_UDP) l4 = 8;
  size_t hdrs = l3 + l4;
  if (ip_len <= hdrs) return ip_len;
  size_t segs = (ip_len - hdrs + h.gso_size - 1) / h.gso_size;
  *is_gso = segs > 1;
  return ip_len + (segs - 1) * hdrs;
}

static void enqueue(struct direction* d, const unsigned char* buf, size_t len, uint64_t now) {
  int is_gso = 0;
  uint64_t wire = wireBytes(buf, len, &is_gso);
  uint64_t start = d->link_free_ns > now ? d->link_free_ns : now;
  uint64_t tx_ns = opt.rate_bps ? wire * 8ull * 1000000000ull / opt.rate_bps : 0;
  uint64_t backlog_ns = start - now;
  if (opt.rate_bps && backlog_ns * opt.rate_bps / 8000000000ull > opt.queue_bytes) {
    d->dropped_queue++;
    return;
  }
  if (d->held_bytes + len > opt.limit_bytes) {
    d->dropped_limit++;
    return;
  }
  struct packet* p = malloc(sizeof *p + len);
  if (!p) {
    d->dropped_limit++;
    return;
  }
  memcpy(p->data, buf, len);
  p->len = (uint32_t)len;
  p->next = NULL;
  d->link_free_ns = start + tx_ns;
  p->due_ns = d->link_free_ns + opt.delay_ns;
  if (d->tail)
    d->tail->next = p;
  else
    d->head = p;
  d->tail = p;
  d->held_bytes += len;
  d->packets++;
  d->bytes += len;
  d->wire_bytes += wire;
  d->gso_packets += (uint64_t)is_gso;
  if (d->held_bytes > d->max_held_bytes) d->max_held_bytes = d->held_bytes;
  if (backlog_ns > d->max_backlog_ns) d->max_backlog_ns = backlog_ns;
}

static void readSome(struct direction* d, unsigned char* buf, uint64_t now) {
  for (int i = 0; i < kReadBurst; ++i) {
    ssize_t n = read(d->in, buf, kMaxPacket);
    if (n < 0) {
      if (errno == EAGAIN || errno == EINTR) return;
      die("read %s: %s", d->name, strerror(errno));
    }
    if (n == 0) return;
    enqueue(d, buf, (size_t)n, now);
  }
}

static void deliverDue(struct direction* d, uint64_t now) {
  while (d->head && d->head->due_ns <= now) {
    struct packet* p = d->head;
    d->head = p->next;
    if (!d->head) d->tail = NULL;
    // The kernel takes the whole packet or nothing; a TUN write does not block
    // for long and an error (e.g. the device going down) drops the packet.
    if (write(d->out, p->data, p->len) != (ssize_t)p->len) d->write_errors++;
    d->held_bytes -= p->len;
    free(p);
  }
}

static void printStats(const struct direction* dirs, double seconds) {
  for (int i = 0; i < 2; ++i) {
    const struct direction* d = &dirs[i];
    fprintf(stderr,
            "delay_relay: %s %" PRIu64 " packets (%" PRIu64 " GSO), %" PRIu64
            " bytes, %.1f Mbit/s average over %.1f s, dropped %" PRIu64 " (queue) %" PRIu64
            " (limit), write errors %" PRIu64 ", max held %" PRIu64 " KiB, max backlog %.2f ms\n",
            d->name, d->packets, d->gso_packets, d->wire_bytes,
            seconds > 0 ? (double)d->wire_bytes * 8 / seconds / 1e6 : 0.0, seconds, d->dropped_queue,
            d->dropped_limit, d->write_errors, d->max_held_bytes / 1024,
            (double)d->max_backlog_ns / 1e6);
  }
}

static void usage(void) {
  fprintf(stderr,
          "usage: delay_relay --ns-a NS --ns-b NS [--dev NAME] [--delay-ms MS] [--delay-us US]\n"
          "                   [--rate-mbit MBIT] [--queue-kb KB] [--limit-mb MB] [--no-gso]\n");
  exit(2);
}

int main(int argc, char** argv) {
  static const struct option longopts[] = {
      {"ns-a", required_argument, NULL, 'a'},      {"ns-b", required_argument, NULL, 'b'},
      {"dev", required_argument, NULL, 'd'},       {"delay-ms", required_argument, NULL, 'm'},
      {"delay-us", required_argument, NULL, 'u'},  {"rate-mbit", required_argument, NULL, 'r'},
      {"queue-kb", required_argument, NULL, 'q'},  {"limit-mb", required_argument, NULL, 'l'},
      {"no-gso", no_argument, NULL, 'n'},          {"help", no_argument, NULL, 'h'},
      {NULL, 0, NULL, 0}};
  int c;
  while ((c = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
    switch (c) {
      case 'a': opt.ns[0] = optarg; break;
      case 'b': opt.ns[1] = optarg; break;
      case 'd':
        if (strlen(optarg) == 0 || strlen(optarg) >= IFNAMSIZ) die("bad --dev %s", optarg);
        opt.dev = optarg;
        break;
      case 'm': opt.delay_ns = parseUint("--delay-ms", optarg) * 1000000ull; break;
      case 'u': opt.delay_ns = parseUint("--delay-us", optarg) * 1000ull; break;
      case 'r': opt.rate_bps = parseUint("--rate-mbit", optarg) * 1000000ull; break;
      case 'q': opt.queue_bytes = parseUint("--queue-kb", optarg) * 1024ull; break;
      case 'l': opt.limit_bytes = parseUint("--limit-mb", optarg) << 20; break;
      case 'n': opt.gso = 0; break;
      default: usage();
    }
  }
  if (optind != argc || !opt.ns[0] || !opt.ns[1]) usage();
  opt.vnet_hdr_len = opt.gso ? sizeof(struct virtio_net_hdr) : 0;

  // Die with the parent (the test script), and wake up on time: the default
  // 50 us timer slack would add jitter to every delivery.
  if (prctl(PR_SET_PDEATHSIG, SIGTERM) != 0) die("PR_SET_PDEATHSIG: %s", strerror(errno));
  if (getppid() == 1) die("parent already gone");
  prctl(PR_SET_TIMERSLACK, 1UL);

  sigset_t block, empty;
  sigemptyset(&block);
  sigaddset(&block, SIGTERM);
  sigaddset(&block, SIGINT);
  sigaddset(&block, SIGUSR1);
  sigemptyset(&empty);
  sigprocmask(SIG_BLOCK, &block, NULL);  // delivered only inside ppoll: no lost wake-ups
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = onSignal;
  sigaction(SIGTERM, &sa, NULL);
  sigaction(SIGINT, &sa, NULL);
  sigaction(SIGUSR1, &sa, NULL);

  int home = open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC);
  if (home < 0) die("open /proc/self/ns/net: %s", strerror(errno));
  int fd_a = openTunIn(opt.ns[0], home);
  int fd_b = openTunIn(opt.ns[1], home);
  close(home);

  struct direction dirs[2];
  memset(dirs, 0, sizeof dirs);
  dirs[0].name = "a->b";
  dirs[0].in = fd_a;
  dirs[0].out = fd_b;
  dirs[1].name = "b->a";
  dirs[1].in = fd_b;
  dirs[1].out = fd_a;

  unsigned char* buf = malloc(kMaxPacket);
  if (!buf) die("out of memory");
  printf("ready: %s in %s and %s, delay %.3f ms, rate %" PRIu64 " Mbit/s, queue %" PRIu64
         " KiB, %s\n",
         opt.dev, opt.ns[0], opt.ns[1], (double)opt.delay_ns / 1e6, opt.rate_bps / 1000000,
         opt.queue_bytes / 1024, opt.gso ? "GSO (vnet_hdr, TSO offloads)" : "no GSO");
  fflush(stdout);

  const uint64_t started = nowNs();
  while (!stop_requested) {
    uint64_t now = nowNs();
    deliverDue(&dirs[0], now);
    deliverDue(&dirs[1], now);

    uint64_t next = UINT64_MAX;
    for (int i = 0; i < 2; ++i)
      if (dirs[i].head && dirs[i].head->due_ns < next) next = dirs[i].head->due_ns;
    struct timespec ts, *tsp = NULL;
    if (next != UINT64_MAX) {
      now = nowNs();
      uint64_t wait = next > now ? next - now : 0;
      ts.tv_sec = (time_t)(wait / 1000000000ull);
      ts.tv_nsec = (long)(wait % 1000000000ull);
      tsp = &ts;
    }
    struct pollfd pfd[2] = {{.fd = fd_a, .events = POLLIN}, {.fd = fd_b, .events = POLLIN}};
    int n = ppoll(pfd, 2, tsp, &empty);
    if (n < 0 && errno != EINTR) die("ppoll: %s", strerror(errno));
    if (stats_requested) {
      stats_requested = 0;
      printStats(dirs, (double)(nowNs() - started) / 1e9);
    }
    if (n <= 0) continue;
    now = nowNs();
    for (int i = 0; i < 2; ++i) {
      if (pfd[i].revents & (POLLERR | POLLHUP | POLLNVAL)) die("%s: device error", dirs[i].name);
      if (pfd[i].revents & POLLIN) readSome(&dirs[i], buf, now);
    }
  }
  printStats(dirs, (double)(nowNs() - started) / 1e9);
  return 0;
}
