/* SPDX-License-Identifier: MIT */
/*
 * tabs.c - browser "tabs" (processes) coordinating through one lock bucket.
 *
 * usage: tabs [-n TABS] [-s SECONDS] [-o ORIGIN] [-k]
 *
 * The parent forks TABS processes that share the bucket of one origin:
 *
 *  - Leader election. Every tab requests the exclusive lock "primary". The
 *    holder is the primary tab for a few ticks, then lets go (as if it had
 *    been closed and reopened) and queues again at the back, so the lock
 *    passes to the next tab in FIFO order.
 *  - Readers and a writer. Tabs read a small file under the lock "doc" in
 *    shared mode, and append a line to it under "doc" in exclusive mode. A
 *    line is written in two steps with a pause in between, so a reader let
 *    in beside a writer would find half a line.
 *  - A holder killed (-k). One more tab joins the election a quarter of the
 *    way through; once it is primary the parent SIGKILLs it, lock held, and
 *    the lock passes to the next tab in the queue without anyone releasing
 *    it. The new primary says how long after the kill it got the lock.
 *
 * Meanwhile the parent shows the bucket's state (wlk_query()) every 200 ms.
 * The tabs check what the locks promise: one primary at a time, no reader
 * beside a writer, only whole lines in the file, fencing tokens that grow in
 * grant order. The program exits 0 only if no check failed. Sleeps only pace
 * the show; no check depends on timing.
 */
/* memmem() is a GNU extension: declared only with _GNU_SOURCE, which an
 * in-tree build gets from config.h and a build outside the tree
 * (cc tabs.c $(pkg-config ...)) from here. Undeclared, it would be taken
 * to return int, and its pointer truncated. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <weblocks.h>

#define MAX_TABS 32
#define FRAME_MS 200		/* how often the parent shows the state */
#define TICK_MS 100		/* a primary's unit of work */
#define GRACE_NS 2000000000ull	/* before SIGTERM, then SIGKILL */
#define NSEC_PER_SEC 1000000000ull
#define SUM_SUFFIX_LEN 14	/* " sum=XXXXXXXX\n" */
#define MAX_SHOWN_VIOLATIONS 20

/* Counters the tabs share with the parent (an anonymous shared mapping). */
struct shared {
	atomic_long elections;
	atomic_long reads;
	atomic_long writes;
	atomic_long violations;
	atomic_int primaries;		/* tabs being primary right now */
	atomic_int readers;		/* tabs reading the doc right now */
	atomic_int writers;		/* tabs writing the doc right now */
	_Atomic uint64_t primary_token;	/* token of the last primary */
	/* -k: the tab that is killed while primary, and when it was. */
	atomic_int victim_holds;	/* it holds "primary": kill it now */
	atomic_int dead_primaries;	/* 1 once it is killed: it counted in */
	_Atomic uint64_t killed_ns;	/* when; 0 once a tab reported it */
};

/* One tab: a manager (a clientId) used by two threads. */
struct tab {
	int id;
	struct wlk_manager *m;
	struct wlk_signal *sig;
	uint64_t elect_rng;	/* only the election thread uses it */
	uint64_t doc_rng;	/* only the doc thread uses it */
	atomic_int failed;	/* an unexpected error, not a violation */
};

static struct shared *sh;
static char doc_path[4096];
static uint64_t start_ns, deadline_ns;
static volatile sig_atomic_t stop_requested; /* the signal number */
/* Set in a tab once its signal exists; the signal handler aborts it. */
static struct wlk_signal *volatile tab_signal;

/*
 * SIGINT, SIGTERM, SIGPIPE (say, "tabs | head"): stop, tidily.
 * Async-signal-safe, wlk_signal_abort() included.
 */
static void on_signal(int signo)
{
	struct wlk_signal *s = tab_signal;

	if (!stop_requested)
		stop_requested = signo;
	if (s)
		wlk_signal_abort(s, 0);
}

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * NSEC_PER_SEC + (uint64_t)ts.tv_nsec;
}

static double elapsed_s(void)
{
	return (double)(now_ns() - start_ns) / NSEC_PER_SEC;
}

/* A signal cuts the sleep short; every caller re-checks whether to stop. */
static void sleep_ms(unsigned int ms)
{
	struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000 };

	nanosleep(&ts, NULL);
}

static bool tab_should_stop(void)
{
	return stop_requested || now_ns() >= deadline_ns;
}

/* xorshift64*: cheap randomness for pacing, one state per thread. */
static uint32_t rnd(uint64_t *s)
{
	*s ^= *s >> 12;
	*s ^= *s << 25;
	*s ^= *s >> 27;
	return (uint32_t)((*s * 2685821657736338717ull) >> 32);
}

static int write_all(int fd, const char *p, size_t len)
{
	while (len) {
		ssize_t n = write(fd, p, len);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

/*
 * Output goes out with one write() per line or frame, not through stdio:
 * the tabs leave with _exit(), which would drop stdio buffers, and whole
 * writes keep the processes' lines from mixing.
 */
struct out {
	size_t len;
	char buf[8192];
};

static void out_vprintf(struct out *o, const char *fmt, va_list ap)
	__attribute__((format(printf, 2, 0)));
static void out_vprintf(struct out *o, const char *fmt, va_list ap)
{
	int n;

	if (o->len >= sizeof(o->buf) - 1)
		return;
	n = vsnprintf(o->buf + o->len, sizeof(o->buf) - o->len, fmt, ap);
	if (n > 0)
		o->len += (size_t)n;
	if (o->len > sizeof(o->buf) - 1)
		o->len = sizeof(o->buf) - 1; /* truncated */
}

static void out_printf(struct out *o, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
static void out_printf(struct out *o, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	out_vprintf(o, fmt, ap);
	va_end(ap);
}

static void out_flush(struct out *o)
{
	(void)write_all(STDOUT_FILENO, o->buf, o->len);
	o->len = 0;
}

static void say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void say(const char *fmt, ...)
{
	struct out o = { 0 };
	va_list ap;

	out_printf(&o, "%5.1fs ", elapsed_s());
	va_start(ap, fmt);
	out_vprintf(&o, fmt, ap);
	va_end(ap);
	out_printf(&o, "\n");
	out_flush(&o);
}

static void violation(const char *fmt, ...)
	__attribute__((format(printf, 1, 2)));
static void violation(const char *fmt, ...)
{
	struct out o = { 0 };
	va_list ap;
	long n = atomic_fetch_add(&sh->violations, 1) + 1;

	/* A broken file keeps failing every check: show only the first. */
	if (n > MAX_SHOWN_VIOLATIONS) {
		if (n == MAX_SHOWN_VIOLATIONS + 1)
			say("(further violations are counted, not shown)");
		return;
	}
	out_printf(&o, "%5.1fs VIOLATION: ", elapsed_s());
	va_start(ap, fmt);
	out_vprintf(&o, fmt, ap);
	va_end(ap);
	out_printf(&o, "\n");
	out_flush(&o);
}

/*
 * The document. Each line is "tab-N token=T sum=XXXXXXXX\n": T is the
 * writer's fencing token and the sum an FNV-1a hash of what precedes it.
 */
static uint32_t fnv1a(const char *p, size_t n)
{
	uint32_t h = 2166136261u;

	while (n--) {
		h ^= (unsigned char)*p++;
		h *= 16777619u;
	}
	return h;
}

/* Read the whole file; NULL with errno set on failure. */
static char *slurp(const char *path, size_t *len)
{
	size_t cap = 4096, n = 0;
	char *buf = malloc(cap);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	int saved;

	if (!buf || fd < 0)
		goto fail;
	for (;;) {
		ssize_t r;

		if (n == cap) {
			char *nb = realloc(buf, cap * 2);

			if (!nb)
				goto fail;
			buf = nb;
			cap *= 2;
		}
		r = read(fd, buf + n, cap - n);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			goto fail;
		if (r == 0)
			break;
		n += (size_t)r;
	}
	close(fd);
	*len = n;
	return buf;
fail:
	saved = errno ? errno : ENOMEM;
	free(buf);
	if (fd >= 0)
		close(fd);
	errno = saved;
	return NULL;
}

/*
 * check_doc() - Whether the document is sound: whole lines only, each with
 * a matching checksum, tokens strictly increasing and all below @below (the
 * checker's own token: every line was written under an earlier grant).
 *
 * Return: NULL if sound, else what is wrong. *@lines gets the line count.
 */
static const char *check_doc(const char *p, size_t len, uint64_t below,
			     long *lines)
{
	uint64_t last = 0;
	long n = 0;

	while (len) {
		const char *nl = memchr(p, '\n', len);
		const char *tok;
		size_t linelen, body;
		uint64_t token = 0;
		uint32_t sum = 0;
		size_t i;

		if (!nl)
			return "half-written line at the end";
		linelen = (size_t)(nl - p) + 1;
		if (linelen < SUM_SUFFIX_LEN + 1)
			return "line too short";
		body = linelen - SUM_SUFFIX_LEN;
		if (memcmp(p + body, " sum=", 5))
			return "line without a checksum";
		for (i = body + 5; i < linelen - 1; i++) {
			char c = p[i];
			unsigned int v;

			if (c >= '0' && c <= '9')
				v = (unsigned int)(c - '0');
			else if (c >= 'a' && c <= 'f')
				v = (unsigned int)(c - 'a' + 10);
			else
				return "malformed checksum";
			sum = sum << 4 | v;
		}
		if (sum != fnv1a(p, body))
			return "checksum mismatch";
		tok = memmem(p, body, "token=", 6);
		if (!tok)
			return "line without a token";
		for (tok += 6; tok < p + body && *tok >= '0' && *tok <= '9';
		     tok++)
			token = token * 10 + (uint64_t)(*tok - '0');
		if (token <= last)
			return "tokens out of grant order";
		if (token >= below)
			return "line from a grant later than the reader's";
		last = token;
		n++;
		p += linelen;
		len -= linelen;
	}
	*lines = n;
	return NULL;
}

/* Read and check the document under a lock granted with @token. */
static void tab_check_doc(struct tab *t, uint64_t token, const char *what)
{
	size_t len;
	long lines;
	char *buf = slurp(doc_path, &len);
	const char *why;

	if (!buf) {
		say("tab-%d: cannot read %s: %s", t->id, doc_path,
		    strerror(errno));
		atomic_store(&t->failed, 1);
		return;
	}
	why = check_doc(buf, len, token, &lines);
	if (why)
		violation("tab-%d %s a broken doc: %s", t->id, what, why);
	free(buf);
}

/* Shared "doc": read the file, with other readers but never a writer. */
static int read_doc(struct wlk_lock *lock, void *arg)
{
	struct tab *t = arg;

	/*
	 * Count in before looking at the writers (and writers likewise): if a
	 * reader and a writer ever overlapped, at least one sees the other.
	 */
	atomic_fetch_add(&sh->readers, 1);
	if (atomic_load(&sh->writers))
		violation("tab-%d reads while a tab writes", t->id);
	tab_check_doc(t, wlk_lock_token(lock), "read");
	atomic_fetch_add(&sh->reads, 1);
	/* Linger, so that readers visibly overlap. */
	sleep_ms(10 + rnd(&t->doc_rng) % 40);
	atomic_fetch_sub(&sh->readers, 1);
	return 0;
}

/* Exclusive "doc": append one line, in two halves. */
static int write_doc(struct wlk_lock *lock, void *arg)
{
	struct tab *t = arg;
	uint64_t token = wlk_lock_token(lock);
	char line[128];
	int body, n, fd, err;

	if (atomic_fetch_add(&sh->writers, 1) || atomic_load(&sh->readers))
		violation("tab-%d writes beside another holder of doc", t->id);
	tab_check_doc(t, token, "found");

	body = snprintf(line, sizeof(line), "tab-%d token=%" PRIu64, t->id,
			token);
	n = body + snprintf(line + body, sizeof(line) - (size_t)body,
			    " sum=%08" PRIx32 "\n",
			    fnv1a(line, (size_t)body));
	fd = open(doc_path, O_WRONLY | O_APPEND | O_CLOEXEC);
	if (fd < 0) {
		err = -errno;
	} else {
		/* A broken lock would let readers in during the pause. */
		err = write_all(fd, line, (size_t)body);
		sleep_ms(20 + rnd(&t->doc_rng) % 30);
		if (!err)
			err = write_all(fd, line + body, (size_t)(n - body));
		close(fd);
	}
	if (err) {
		say("tab-%d: cannot append to %s: %s", t->id, doc_path,
		    strerror(-err));
		atomic_store(&t->failed, 1);
	} else {
		atomic_fetch_add(&sh->writes, 1);
	}
	atomic_fetch_sub(&sh->writers, 1);
	return 0;
}

/*
 * A tab has become primary: count it in and check that it is alone (a tab
 * killed while primary never counts out) and that its token is above the
 * last primary's. Return: the election's number.
 */
static long enter_primary(struct tab *t, uint64_t token)
{
	uint64_t prev;

	if (atomic_fetch_add(&sh->primaries, 1) >
	    atomic_load(&sh->dead_primaries))
		violation("tab-%d became primary beside another", t->id);
	prev = atomic_exchange(&sh->primary_token, token);
	if (prev >= token)
		violation("tab-%d: primary token %" PRIu64
			  " is not above the last primary's %" PRIu64,
			  t->id, token, prev);
	return atomic_fetch_add(&sh->elections, 1) + 1;
}

/* Exclusive "primary": this tab leads for a few ticks. */
static int be_primary(struct wlk_lock *lock, void *arg)
{
	struct tab *t = arg;
	uint64_t token = wlk_lock_token(lock);
	unsigned int ticks = 3 + rnd(&t->elect_rng) % 4;
	long n = enter_primary(t, token);
	uint64_t killed = atomic_exchange(&sh->killed_ns, 0);

	if (killed)
		say("tab-%d is primary (election %ld, token %" PRIu64
		    "): the lock passed on %.1f ms after its holder was killed",
		    t->id, n, token, (double)(now_ns() - killed) / 1e6);
	else
		say("tab-%d is primary (election %ld, token %" PRIu64 ")",
		    t->id, n, token);
	while (ticks-- && !tab_should_stop() && !wlk_lock_stolen(lock))
		sleep_ms(TICK_MS);
	atomic_fetch_sub(&sh->primaries, 1);
	return 0;
}

/* The tab of -k: primary until the parent kills it (it never releases). */
static int be_victim(struct wlk_lock *lock, void *arg)
{
	struct tab *t = arg;
	uint64_t token = wlk_lock_token(lock);
	long n = enter_primary(t, token);

	say("tab-%d is primary (election %ld, token %" PRIu64
	    ") and will be killed holding it", t->id, n, token);
	atomic_store(&sh->victim_holds, 1);
	while (!tab_should_stop())
		sleep_ms(TICK_MS);
	atomic_fetch_sub(&sh->primaries, 1);
	return 0;
}

/*
 * Make one request that gives up at the deadline or on SIGINT/SIGTERM.
 * Return: whether to carry on.
 */
static bool tab_request(struct tab *t, const char *name, enum wlk_mode mode,
			wlk_callback cb)
{
	/* The size first: the struct may grow (weblocks.h). */
	struct wlk_options o = { .size = sizeof o, .mode = mode,
				 .signal = t->sig };
	uint64_t now = now_ns();
	int err;

	if (stop_requested || now >= deadline_ns)
		return false;
	o.timeout_ns = deadline_ns - now;
	err = wlk_request(t->m, name, WLK_NUL_TERMINATED, &o, cb, t);
	switch (err) {
	case 0:
		return true;
	case WLK_ETIMEDOUT: /* the deadline */
	case WLK_EABORTED: /* a signal */
		return false;
	case WLK_ESTOLEN: /* only another program on this origin steals */
		say("tab-%d: \"%s\" was stolen", t->id, name);
		return true;
	default:
		say("tab-%d: request \"%s\": %s (%s)", t->id, name,
		    wlk_strerror(err), wlk_error_name(err));
		atomic_store(&t->failed, 1);
		return false;
	}
}

static void *doc_loop(void *arg)
{
	struct tab *t = arg;

	for (;;) {
		/* One visit in four writes. */
		bool w = rnd(&t->doc_rng) % 4 == 0;

		if (!tab_request(t, "doc", w ? WLK_EXCLUSIVE : WLK_SHARED,
				 w ? write_doc : read_doc))
			break;
		/* The tab does other things between visits. */
		sleep_ms(20 + rnd(&t->doc_rng) % 60);
	}
	return NULL;
}

static int tab_main(int id, const char *origin)
{
	struct tab t = { .id = id };
	char client_id[32];
	struct wlk_manager_options mo = { .size = sizeof mo,
					  .client_id = client_id };
	pthread_t doc;
	sigset_t stops;
	int err;

	t.elect_rng = (now_ns() ^ ((uint64_t)getpid() << 32)) | 1;
	t.doc_rng = t.elect_rng * 0x9e3779b97f4a7c15ull | 1;
	snprintf(client_id, sizeof(client_id), "tab-%d", id);

	err = wlk_signal_new(&t.sig);
	if (err) {
		say("tab-%d: wlk_signal_new: %s", id, wlk_strerror(err));
		return 1;
	}
	tab_signal = t.sig;
	if (stop_requested) /* the signal came before tab_signal was set */
		wlk_signal_abort(t.sig, 0);

	err = wlk_manager_open(origin, &mo, &t.m);
	if (err) {
		say("tab-%d: wlk_manager_open: %s", id, wlk_strerror(err));
		return 1;
	}
	err = pthread_create(&doc, NULL, doc_loop, &t);
	if (err) {
		say("tab-%d: pthread_create: %s", id, strerror(err));
		wlk_manager_close(t.m);
		return 1;
	}
	/* The election thread: lead, step down, queue again at the back. */
	while (tab_request(&t, "primary", WLK_EXCLUSIVE, be_primary))
		sleep_ms(50 + rnd(&t.elect_rng) % 100);
	pthread_join(doc, NULL);
	wlk_manager_close(t.m);

	/* Keep the handler off the signal while it is freed. */
	sigemptyset(&stops);
	sigaddset(&stops, SIGINT);
	sigaddset(&stops, SIGTERM);
	sigaddset(&stops, SIGPIPE);
	sigprocmask(SIG_BLOCK, &stops, NULL);
	tab_signal = NULL;
	wlk_signal_free(t.sig);
	return atomic_load(&t.failed) ? 1 : 0;
}

/* The tab of -k: joins the election late, to be killed as its primary. */
static int victim_main(int id, const char *origin, uint64_t join_ns)
{
	struct tab t = { .id = id };
	char client_id[32];
	struct wlk_manager_options mo = { .size = sizeof mo,
					  .client_id = client_id };
	int err;

	snprintf(client_id, sizeof(client_id), "tab-%d", id);
	err = wlk_signal_new(&t.sig);
	if (!err)
		err = wlk_manager_open(origin, &mo, &t.m);
	if (err) {
		say("tab-%d: %s", id, wlk_strerror(err));
		return 1;
	}
	tab_signal = t.sig;
	if (stop_requested)
		wlk_signal_abort(t.sig, 0);
	while (now_ns() < join_ns && !tab_should_stop())
		sleep_ms(TICK_MS);
	tab_request(&t, "primary", WLK_EXCLUSIVE, be_victim);
	/* Not killed: the run ended first; the parent says so. */
	wlk_manager_close(t.m);
	return atomic_load(&t.failed) ? 1 : 0;
}

/* Append a lock name, escaping bytes a terminal should not get. */
static void out_name(struct out *o, const struct wlk_lock_info *li)
{
	size_t i;

	for (i = 0; i < li->name_len; i++) {
		unsigned char c = (unsigned char)li->name[i];

		if (c >= 0x20 && c < 0x7f && c != '\\')
			out_printf(o, "%c", c);
		else
			out_printf(o, "\\x%02x", c);
	}
}

static bool same_name(const struct wlk_lock_info *a,
		      const struct wlk_lock_info *b)
{
	return a->name_len == b->name_len &&
	       !memcmp(a->name, b->name, a->name_len);
}

static int cmp_name(const void *pa, const void *pb)
{
	typedef const struct wlk_lock_info *info_ptr;
	info_ptr a = *(const info_ptr *)pa, b = *(const info_ptr *)pb;
	size_t n = a->name_len < b->name_len ? a->name_len : b->name_len;
	int c = memcmp(a->name, b->name, n);

	if (c)
		return c;
	return (a->name_len > b->name_len) - (a->name_len < b->name_len);
}

static const char *mode_str(enum wlk_mode mode)
{
	return mode == WLK_SHARED ? "sh" : "ex";
}

/*
 * One frame: a line per lock name, its holders (clientId, mode, pid) and
 * then its queue in request order, e.g.
 *   1.2s doc      held: tab-1(sh,pid 41) tab-3(sh,pid 43) | queue: tab-2(ex)
 */
static int show_state(struct wlk_manager *m)
{
	struct wlk_snapshot *s;
	const struct wlk_lock_info **names;
	size_t nheld, npend, nnames = 0, i, j;
	struct out o = { 0 };
	int err = wlk_query(m, &s);

	if (err)
		return err;
	nheld = wlk_snapshot_held_count(s);
	npend = wlk_snapshot_pending_count(s);
	names = calloc(nheld + npend + 1, sizeof(*names));
	if (!names) {
		wlk_snapshot_free(s);
		return -ENOMEM;
	}
	/* The distinct names, sorted, so the lines keep their places. */
	for (i = 0; i < nheld + npend; i++) {
		const struct wlk_lock_info *li = i < nheld ?
			wlk_snapshot_held(s, i) :
			wlk_snapshot_pending(s, i - nheld);

		for (j = 0; j < nnames && !same_name(names[j], li); j++)
			;
		if (j == nnames)
			names[nnames++] = li;
	}
	qsort(names, nnames, sizeof(*names), cmp_name);

	if (!nnames)
		out_printf(&o, "%5.1fs (no locks held or requested)\n",
			   elapsed_s());
	for (j = 0; j < nnames; j++) {
		size_t held = 0, queued;

		if (j == 0)
			out_printf(&o, "%5.1fs ", elapsed_s());
		else
			out_printf(&o, "       ");
		out_name(&o, names[j]);
		out_printf(&o, "%*s held:",
			   names[j]->name_len < 8 ?
			   (int)(8 - names[j]->name_len) : 0, "");
		for (i = 0; i < nheld; i++) {
			const struct wlk_lock_info *li =
				wlk_snapshot_held(s, i);

			if (!same_name(li, names[j]))
				continue;
			out_printf(&o, " %s(%s,pid %ld)", li->client_id,
				   mode_str(li->mode), (long)li->pid);
			held++;
		}
		out_printf(&o, "%s | queue:", held ? "" : " -");
		queued = 0;
		for (i = 0; i < npend; i++) {
			const struct wlk_lock_info *li =
				wlk_snapshot_pending(s, i);

			if (!same_name(li, names[j]))
				continue;
			out_printf(&o, " %s(%s)", li->client_id,
				   mode_str(li->mode));
			queued++;
		}
		out_printf(&o, "%s\n", queued ? "" : " -");
	}
	out_flush(&o);
	free(names);
	wlk_snapshot_free(s);
	return 0;
}

static void usage(FILE *f)
{
	fprintf(f,
		"usage: tabs [-n TABS] [-s SECONDS] [-o ORIGIN] [-k]\n"
		"  -n TABS     number of tab processes, 1..%d (default 4)\n"
		"  -s SECONDS  how long they run (default 5)\n"
		"  -o ORIGIN   origin whose bucket they share\n"
		"              (default https://tabs-demo-PID.example)\n"
		"  -k          one more tab joins the election and is SIGKILLed\n"
		"              while primary: the lock must pass on\n",
		MAX_TABS);
}

int main(int argc, char **argv)
{
	char origin_buf[64];
	const char *origin = NULL;
	const char *tmpdir = getenv("TMPDIR");
	struct wlk_manager_options watcher = { .size = sizeof watcher,
					       .client_id = "watcher" };
	struct wlk_manager *m;
	struct sigaction sa;
	pid_t pids[MAX_TABS];
	int status[MAX_TABS];
	int ntabs = 4, alive = 0, failed_tabs = 0, opt, fd, err, i;
	double seconds = 5;
	bool termed = false, killed = false, hung = false, doc_ok = true;
	bool kill_one = false, victim_killed = false;
	pid_t victim = -1;
	int victim_status = -1;
	uint64_t term_at, kill_at = 0;
	long lines = -1;
	char *end;

	while ((opt = getopt(argc, argv, "n:s:o:kh")) != -1) {
		switch (opt) {
		case 'n':
			ntabs = (int)strtol(optarg, &end, 10);
			if (*end || ntabs < 1 || ntabs > MAX_TABS) {
				fprintf(stderr, "tabs: -n wants 1..%d\n",
					MAX_TABS);
				return 2;
			}
			break;
		case 's':
			seconds = strtod(optarg, &end);
			if (*end || !(seconds > 0 && seconds <= 86400)) {
				fprintf(stderr, "tabs: -s wants 0..86400\n");
				return 2;
			}
			break;
		case 'o':
			origin = optarg;
			break;
		case 'k':
			kill_one = true;
			break;
		case 'h':
			usage(stdout);
			return 0;
		default:
			usage(stderr);
			return 2;
		}
	}
	if (optind != argc) {
		usage(stderr);
		return 2;
	}
	/* A fresh origin per run, so that concurrent runs do not mix. */
	if (!origin) {
		snprintf(origin_buf, sizeof(origin_buf),
			 "https://tabs-demo-%ld.example", (long)getpid());
		origin = origin_buf;
	}

	snprintf(doc_path, sizeof(doc_path), "%s/weblocks-tabs-XXXXXX",
		 tmpdir && *tmpdir ? tmpdir : "/tmp");
	fd = mkstemp(doc_path);
	if (fd < 0) {
		fprintf(stderr, "tabs: cannot create %s: %s\n", doc_path,
			strerror(errno));
		return 1;
	}
	close(fd);

	sh = mmap(NULL, sizeof(*sh), PROT_READ | PROT_WRITE,
		  MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (sh == MAP_FAILED) {
		fprintf(stderr, "tabs: mmap: %s\n", strerror(errno));
		unlink(doc_path);
		return 1;
	}
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_signal;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGPIPE, &sa, NULL);

	/* The parent is a client too: it only watches, with wlk_query(). */
	err = wlk_manager_open(origin, &watcher, &m);
	if (err) {
		fprintf(stderr, "tabs: wlk_manager_open(%s): %s (%s)\n",
			origin, wlk_strerror(err), wlk_error_name(err));
		unlink(doc_path);
		return 1;
	}

	start_ns = now_ns();
	deadline_ns = start_ns + (uint64_t)(seconds * NSEC_PER_SEC);
	term_at = deadline_ns + GRACE_NS;
	say("%d tabs for %.1f s on %s; doc %s", ntabs, seconds, origin,
	    doc_path);
	fflush(NULL); /* nothing buffered may be duplicated by fork() */
	for (i = 0; i < ntabs; i++) {
		pids[i] = fork();
		if (pids[i] == 0)
			_exit(tab_main(i + 1, origin));
		if (pids[i] < 0) {
			say("fork: %s", strerror(errno));
			failed_tabs++;
			stop_requested = SIGTERM;
			break;
		}
		status[i] = -1;
		alive++;
	}
	ntabs = i;
	if (kill_one && !stop_requested) {
		victim = fork();
		if (victim == 0)
			_exit(victim_main(ntabs + 1, origin,
					  start_ns + (deadline_ns - start_ns) / 4));
		if (victim < 0) {
			say("fork: %s", strerror(errno));
			failed_tabs++;
			stop_requested = SIGTERM;
		} else {
			alive++;
		}
	}

	while (alive) {
		uint64_t now;
		pid_t pid;
		int st;

		sleep_ms(FRAME_MS);
		err = show_state(m);
		if (err)
			say("wlk_query: %s", wlk_strerror(err));
		if (atomic_load(&sh->victim_holds) && !victim_killed) {
			say("killing tab-%d (pid %ld) with SIGKILL while it "
			    "holds \"primary\"", ntabs + 1, (long)victim);
			/* Before the kill: the next primary may come at once. */
			atomic_store(&sh->dead_primaries, 1);
			atomic_store(&sh->killed_ns, now_ns());
			kill(victim, SIGKILL);
			victim_killed = true;
		}
		while ((pid = waitpid(-1, &st, WNOHANG)) > 0) {
			if (pid == victim) {
				victim_status = st;
				alive--;
			}
			for (i = 0; i < ntabs; i++) {
				if (pids[i] == pid) {
					status[i] = st;
					alive--;
				}
			}
		}
		/* Tabs stop by themselves at the deadline or on a signal. */
		now = now_ns();
		if (stop_requested && now < term_at)
			term_at = now;
		if (!termed && now >= term_at) {
			if (!stop_requested) {
				say("tabs did not stop at the deadline");
				hung = true;
			}
			for (i = 0; i < ntabs; i++)
				if (status[i] == -1)
					kill(pids[i], SIGTERM);
			if (victim > 0 && victim_status == -1)
				kill(victim, SIGTERM);
			termed = true;
			kill_at = now + GRACE_NS;
		}
		if (termed && !killed && now >= kill_at) {
			say("killing the tabs that are left");
			for (i = 0; i < ntabs; i++)
				if (status[i] == -1)
					kill(pids[i], SIGKILL);
			if (victim > 0 && victim_status == -1)
				kill(victim, SIGKILL);
			killed = true;
		}
	}
	for (i = 0; i < ntabs; i++) {
		if (WIFEXITED(status[i]) && WEXITSTATUS(status[i]) == 0)
			continue;
		failed_tabs++;
		if (WIFSIGNALED(status[i]))
			say("tab-%d died of signal %d", i + 1,
			    WTERMSIG(status[i]));
		else
			say("tab-%d exited with status %d", i + 1,
			    WEXITSTATUS(status[i]));
	}
	/*
	 * -k: the victim must have died of the parent's SIGKILL, and a
	 * waiting tab got the lock after it (be_primary() cleared killed_ns).
	 */
	if (kill_one && !stop_requested && !hung) {
		if (!victim_killed) {
			say("tab-%d was never primary: nothing was killed",
			    ntabs + 1);
			failed_tabs++;
		} else if (!WIFSIGNALED(victim_status) ||
			   WTERMSIG(victim_status) != SIGKILL) {
			say("tab-%d did not die of the SIGKILL", ntabs + 1);
			failed_tabs++;
		} else if (atomic_load(&sh->killed_ns)) {
			violation("the lock of the killed tab-%d never passed "
				  "on", ntabs + 1);
		}
	}
	wlk_manager_close(m);

	/*
	 * Every append completed under the lock, so the file must hold exactly
	 * the lines counted, all sound (unless a tab was killed mid-write).
	 */
	if (!killed) {
		size_t len;
		char *buf = slurp(doc_path, &len);
		const char *why;

		if (!buf) {
			say("cannot read %s: %s", doc_path, strerror(errno));
			doc_ok = false;
		} else {
			why = check_doc(buf, len, UINT64_MAX, &lines);
			if (why)
				violation("final doc is broken: %s", why);
			else if (lines != atomic_load(&sh->writes))
				violation("final doc has %ld lines, not %ld",
					  lines, atomic_load(&sh->writes));
			free(buf);
		}
	}
	unlink(doc_path);

	err = wlk_bucket_remove(origin, NULL);
	if (err && err != -ENOENT)
		say("bucket of %s left in place: %s", origin,
		    wlk_strerror(err));

	say("summary: elections=%ld reads=%ld writes=%ld doc-lines=%ld "
	    "violations=%ld failed-tabs=%d",
	    atomic_load(&sh->elections), atomic_load(&sh->reads),
	    atomic_load(&sh->writes), lines, atomic_load(&sh->violations),
	    failed_tabs);
	if (atomic_load(&sh->violations) || failed_tabs || hung || !doc_ok)
		return 1;
	return stop_requested ? 128 + stop_requested : 0;
}
