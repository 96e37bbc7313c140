/* SPDX-License-Identifier: MIT */
/*
 * t_abi.c - the public ABI's growth rules (weblocks.h, GROWING STRUCTS):
 * the size member of the option structs at every entry point that takes
 * them, their initializer macros, and the version against configure's.
 */
#include <errno.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "../common.h"
#include "weblocks/async.h"
#include "weblocks/inspect.h"

/* Above this, a size is refused whatever follows (weblocks.h). */
#define SIZE_CAP 4096

/*
 * How a caller's struct may be laid out: as built against this header,
 * an older one, or a newer one with a longer struct.
 */
enum layout {
	L_ZERO,       /* size 0: the first layout, as code without size has */
	L_EXACT,      /* size = sizeof: this header (the macros) */
	L_BIG_ZERO,   /* a newer header's, its new fields all zero */
	L_BIG_SET,    /* a newer header's, one of its new fields set */
	L_TINY,       /* size 1 */
	L_CUT,        /* the first layout without its last field */
	L_HUGE,       /* beyond SIZE_CAP, though every byte is zero */
	L_COUNT
};

static const char *const layout_name[L_COUNT] = {
	"size 0", "exact size", "larger, zero tail", "larger, nonzero tail",
	"size 1", "first layout cut short", "larger than the cap",
};

static bool valid(enum layout l)
{
	return l == L_ZERO || l == L_EXACT || l == L_BIG_ZERO;
}

/* Room for a struct from a much newer header. */
struct big_options {
	struct wlk_options o;
	unsigned char newer[SIZE_CAP];
};

struct big_manager_options {
	struct wlk_manager_options o;
	unsigned char newer[SIZE_CAP];
};

/*
 * The size for @l of a struct of @known bytes whose first layout ends at
 * @first with a field of @last_field bytes, with @tail the bytes after
 * the struct, to zero or to set.
 */
static size_t layout_size(enum layout l, size_t known, size_t first,
			  unsigned char *tail, size_t last_field)
{
	memset(tail, 0, SIZE_CAP);
	switch (l) {
	case L_ZERO:
		return 0;
	case L_EXACT:
		return known;
	case L_BIG_ZERO:
		return known + 24;
	case L_BIG_SET:
		tail[17] = 1;
		return known + 24;
	case L_TINY:
		return 1;
	case L_CUT:
		return first - last_field;
	case L_HUGE:
		return SIZE_CAP + 1;
	case L_COUNT:
		break;
	}
	cr_assert_fail("layout %d", l);
	return 0;
}

/* @base laid out as @l in @b. */
static const struct wlk_options *options_as(struct big_options *b,
					    enum layout l,
					    struct wlk_options base)
{
	b->o = base;
	b->o.size = layout_size(l, sizeof(b->o),
				offsetof(struct wlk_options, timeout_ns) +
					sizeof(b->o.timeout_ns),
				b->newer, sizeof(b->o.timeout_ns));
	return &b->o;
}

static const struct wlk_manager_options *
manager_options_as(struct big_manager_options *b, enum layout l,
		   struct wlk_manager_options base)
{
	b->o = base;
	b->o.size = layout_size(l, sizeof(b->o),
				offsetof(struct wlk_manager_options,
					 max_name_len) +
					sizeof(b->o.max_name_len),
				b->newer, sizeof(b->o.max_name_len));
	return &b->o;
}

/*
 * The options every request test uses: shared, so that it is granted
 * beside another manager's shared lock (a mode not read would queue
 * behind it), with a timeout (the first layout's last field) that would
 * end such a wait.
 */
static const struct wlk_options probe = {
	.mode = WLK_SHARED,
	.timeout_ns = 2000000000ull,
};

/* Another manager holds "r" shared; the caller's request joins it. */
static struct wlk_manager *shared_holder(struct wlk_lock **l)
{
	struct wlk_manager *other = t_open();
	struct wlk_options o = WLK_OPTIONS_INIT;

	o.mode = WLK_SHARED;
	T_ASSERT_RC(wlk_acquire(other, "r", 1, &o, l), 0);
	return other;
}

/* After a refused request: nothing of @m's queued or held. */
static void assert_untouched(struct wlk_manager *obs, const char *what)
{
	cr_assert_eq(t_pending_n(obs, NULL, 0), 0, "%s: left a request", what);
	cr_assert_eq(t_held_n(obs, NULL, 0), 1, "%s: changed held", what);
}

Test(abi, acquire_size_rule, T_FIX, .timeout = 30)
{
	struct wlk_manager *m = t_open();
	struct wlk_lock *held, *l;
	struct wlk_manager *obs = shared_holder(&held);
	struct big_options b;

	for (enum layout v = 0; v < L_COUNT; v++) {
		const struct wlk_options *o = options_as(&b, v, probe);

		l = (struct wlk_lock *)&l;
		if (!valid(v)) {
			T_ASSERT_RC(wlk_acquire(m, "r", 1, o, &l), WLK_EINVAL);
			cr_assert_eq(l, (struct wlk_lock *)&l,
				     "%s: *out written", layout_name[v]);
			assert_untouched(obs, layout_name[v]);
			continue;
		}
		T_ASSERT_RC(wlk_acquire(m, "r", 1, o, &l), 0);
		cr_assert_eq(wlk_lock_mode(l), WLK_SHARED, "%s: mode lost",
			     layout_name[v]);
		cr_assert_eq(t_held_n(obs, "r", 1), 2, "%s", layout_name[v]);
		T_ASSERT_RC(wlk_release(l), 0);
	}
	T_ASSERT_RC(wlk_release(held), 0);
}

static int cb_shared(struct wlk_lock *lock, void *arg)
{
	++*(int *)arg;
	return lock && wlk_lock_mode(lock) == WLK_SHARED ? 7 : -1;
}

Test(abi, request_size_rule, T_FIX, .timeout = 30)
{
	struct wlk_manager *m = t_open();
	struct wlk_lock *held;
	struct wlk_manager *obs = shared_holder(&held);
	struct big_options b;

	for (enum layout v = 0; v < L_COUNT; v++) {
		const struct wlk_options *o = options_as(&b, v, probe);
		int runs = 0;

		T_ASSERT_RC(wlk_request(m, "r", 1, o, cb_shared, &runs),
			    valid(v) ? 7 : WLK_EINVAL);
		cr_assert_eq(runs, valid(v), "%s: callback runs %d",
			     layout_name[v], runs);
		assert_untouched(obs, layout_name[v]);
	}
	T_ASSERT_RC(wlk_release(held), 0);
}

/* One asynchronous request's completion. */
struct done {
	atomic_int calls;
	int status;
	enum wlk_mode mode;
};

static atomic_int g_calls;

static void on_done(struct wlk_async *req, int status, struct wlk_lock *lock,
		    void *arg)
{
	struct done *d = arg;

	d->status = status;
	d->mode = lock ? wlk_lock_mode(lock) : (enum wlk_mode)-1;
	if (lock)
		wlk_release(lock);
	atomic_fetch_add(&d->calls, 1);
	atomic_fetch_add(&g_calls, 1);
}

Test(abi, request_async_size_rule, T_FIX, .timeout = 30)
{
	struct wlk_manager *m = t_open();
	struct wlk_lock *held;
	struct wlk_manager *obs = shared_holder(&held);
	struct big_options b;
	int want = 0;

	for (enum layout v = 0; v < L_COUNT; v++) {
		const struct wlk_options *o = options_as(&b, v, probe);
		struct wlk_async *req = (struct wlk_async *)&req;
		struct done d = {0};
		int rc;

		rc = wlk_request_async(m, "r", 1, o, on_done, &d, &req);
		if (!valid(v)) {
			cr_assert_eq(rc, WLK_EINVAL, "%s: got %s",
				     layout_name[v], t_ename(rc));
			cr_assert_eq(req, (struct wlk_async *)&req,
				     "%s: *out written", layout_name[v]);
			assert_untouched(obs, layout_name[v]);
			continue;
		}
		cr_assert_eq(rc, 0, "%s: got %s", layout_name[v], t_ename(rc));
		cr_assert(t_pump(m, &g_calls, ++want, T_WAIT_MS),
			  "%s: no completion", layout_name[v]);
		cr_assert_eq(d.status, 0, "%s: status %s", layout_name[v],
			     t_ename(d.status));
		cr_assert_eq(d.mode, WLK_SHARED, "%s: mode lost",
			     layout_name[v]);
	}
	cr_assert_eq(atomic_load(&g_calls), want, "a refused request completed");
	T_ASSERT_RC(wlk_release(held), 0);
}

/*
 * Manager options whose first and last fields both show: the client_id,
 * and a max_name_len that only a fresh bucket takes.
 */
#define SHORT_NAMES 7

Test(abi, manager_open_size_rule, T_FIX, .timeout = 30)
{
	struct big_manager_options b;

	for (enum layout v = 0; v < L_COUNT; v++) {
		char bucket[32];
		struct wlk_manager_options base = {
			.bucket = bucket,
			.client_id = "abi-client",
			.max_name_len = SHORT_NAMES,
		};
		const struct wlk_manager_options *o;
		struct wlk_manager *m = (struct wlk_manager *)&m;
		struct wlk_lock *l;

		snprintf(bucket, sizeof(bucket), "abi-%d", (int)v);
		t_track_bucket(t_origin, bucket, NULL);
		o = manager_options_as(&b, v, base);
		if (!valid(v)) {
			T_ASSERT_RC(wlk_manager_open(t_origin, o, &m),
				    WLK_EINVAL);
			cr_assert_eq(m, (struct wlk_manager *)&m,
				     "%s: *out written", layout_name[v]);
			T_ASSERT_RC(wlk_bucket_remove(t_origin, &base),
				    -ENOENT);
			continue;
		}
		m = t_open_opts(o);
		cr_assert_str_eq(wlk_manager_client_id(m), "abi-client", "%s",
				 layout_name[v]);
		T_ASSERT_RC(wlk_acquire(m, "12345678", 8, NULL, &l),
			    WLK_ENAMETOOLONG);
		T_ASSERT_RC(wlk_acquire(m, "1234567", 7, NULL, &l), 0);
		T_ASSERT_RC(wlk_release(l), 0);
		t_close(m);
	}
}

Test(abi, bucket_remove_size_rule, T_FIX, .timeout = 30)
{
	struct wlk_manager_options base = WLK_MANAGER_OPTIONS_INIT;
	struct big_manager_options b;

	base.bucket = "abi-rm";
	t_track_bucket(t_origin, base.bucket, NULL);
	for (enum layout v = 0; v < L_COUNT; v++) {
		const struct wlk_manager_options *o;

		t_close(t_open_opts(&base)); /* the bucket exists, unused */
		o = manager_options_as(&b, v, base);
		/* A bucket not read would be "default", which has no
		 * segment: -ENOENT. */
		T_ASSERT_RC(wlk_bucket_remove(t_origin, o),
			    valid(v) ? 0 : WLK_EINVAL);
		T_ASSERT_RC(wlk_bucket_remove(t_origin, &base),
			    valid(v) ? -ENOENT : 0);
	}
}

Test(abi, inspect_open_size_rule, T_FIX, .timeout = 30)
{
	struct wlk_manager_options base = WLK_MANAGER_OPTIONS_INIT;
	struct big_manager_options b;
	struct wlk_manager *m;

	base.bucket = "abi-inspect";
	t_track_bucket(t_origin, base.bucket, NULL);
	m = t_open_opts(&base);
	for (enum layout v = 0; v < L_COUNT; v++) {
		const struct wlk_manager_options *o;
		struct wlk_inspect *in = (struct wlk_inspect *)&in;
		struct wlk_inspect_snapshot *s;

		o = manager_options_as(&b, v, base);
		if (!valid(v)) {
			T_ASSERT_RC(wlk_inspect_open(t_origin, o, 0, &in),
				    WLK_EINVAL);
			cr_assert_eq(in, (struct wlk_inspect *)&in,
				     "%s: *out written", layout_name[v]);
			continue;
		}
		T_ASSERT_RC(wlk_inspect_open(t_origin, o, 0, &in), 0);
		T_ASSERT_RC(wlk_inspect_snapshot(in, &s), 0);
		cr_assert_str_eq(s->header.bucket, "abi-inspect", "%s",
				 layout_name[v]);
		wlk_inspect_snapshot_free(s);
		wlk_inspect_close(in);
	}
	t_close(m);
}

Test(abi, initializers)
{
	struct wlk_options o = WLK_OPTIONS_INIT;
	struct wlk_manager_options mo = WLK_MANAGER_OPTIONS_INIT;
	struct wlk_options d = { .size = sizeof d, .mode = WLK_SHARED };

	cr_assert_eq(o.size, sizeof(struct wlk_options));
	cr_assert_eq(mo.size, sizeof(struct wlk_manager_options));
	/* Everything else is the default: zero. */
	cr_assert(o.mode == WLK_EXCLUSIVE && !o.if_available && !o.steal &&
		  !o.signal && !o.timeout_ns);
	cr_assert(!mo.bucket && !mo.partition && !mo.client_id &&
		  !mo.permissions && !mo.max_names && !mo.max_requests &&
		  !mo.max_name_len);
	cr_assert_eq(d.size, sizeof(struct wlk_options));
	cr_assert_eq(d.mode, WLK_SHARED);
	/* The size comes first, where every layout has it. */
	cr_assert_eq(offsetof(struct wlk_options, size), 0);
	cr_assert_eq(offsetof(struct wlk_manager_options, size), 0);
}

/* Both initializer styles, and the NULL default, request the same. */
Test(abi, initializers_work, T_FIX, .timeout = 10)
{
	struct wlk_manager_options mo = WLK_MANAGER_OPTIONS_INIT;
	struct wlk_options o = WLK_OPTIONS_INIT;
	struct wlk_options d = { .size = sizeof d, .mode = WLK_SHARED };
	struct wlk_manager *m;
	struct wlk_lock *a, *b;

	mo.client_id = "init";
	m = t_open_opts(&mo);
	cr_assert_str_eq(wlk_manager_client_id(m), "init");
	o.mode = WLK_SHARED;
	T_ASSERT_RC(wlk_acquire(m, "r", 1, &o, &a), 0);
	T_ASSERT_RC(wlk_acquire(m, "r", 1, &d, &b), 0);
	cr_assert_eq(t_held_n(m, "r", 1), 2);
	T_ASSERT_RC(wlk_release(a), 0);
	T_ASSERT_RC(wlk_release(b), 0);
}

/* The version, as configure.ac defines it (config.h's PACKAGE_VERSION). */
Test(abi, version_is_configures)
{
	char header[32];
	unsigned int major, minor, patch;
	int end = 0;

	cr_assert_str_eq(wlk_version_string(), PACKAGE_VERSION,
			 "the library's version is not configure's");
	snprintf(header, sizeof(header), "%d.%d.%d", WLK_VERSION_MAJOR,
		 WLK_VERSION_MINOR, WLK_VERSION_PATCH);
	cr_assert_str_eq(header, PACKAGE_VERSION,
			 "weblocks.h's WLK_VERSION_* are not configure's");
	cr_assert_eq(sscanf(wlk_version_string(), "%u.%u.%u%n", &major,
			    &minor, &patch, &end),
		     3);
	cr_assert_eq(wlk_version_string()[end], '\0');
	cr_assert(major < 256 && minor < 256 && patch < 256);
	cr_assert_eq(wlk_version(), major << 16 | minor << 8 | patch,
		     "wlk_version() 0x%06x, wlk_version_string() %s",
		     wlk_version(), wlk_version_string());
	cr_assert_eq(wlk_version(),
		     (unsigned int)(WLK_VERSION_MAJOR << 16 |
				    WLK_VERSION_MINOR << 8 |
				    WLK_VERSION_PATCH));
	cr_assert_eq(wlk_version(), (unsigned int)WLK_VERSION);
}
