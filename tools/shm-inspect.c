/* SPDX-License-Identifier: MIT */
/*
 * shm-inspect.c - look inside libweblocks' bucket segments: the command
 * line, dump and watch. list.c and check.c do the other commands, text.c
 * and render.c the output, guard.c the library calls.
 *
 * Options (see shm-inspect(1)):
 *   list [--json]
 *   dump TARGET [--json] [--locked] [--bucket B] [--partition P]
 *   check TARGET [--locked] [--repair] [--bucket B] [--partition P]
 *   watch TARGET [-i SECONDS] [-n COUNT] [--locked] [--bucket B]
 *         [--partition P]
 *   rm TARGET [--force] [--bucket B] [--partition P]
 *   gc [--dry-run]
 * where TARGET is ORIGIN|SEGMENT (told apart by their form), or
 * --origin ORIGIN, or --segment SEGMENT.
 *
 * A client of the library like any other (LMDB's mdb_stat is the model):
 * it uses weblocks/inspect.h only, maps read-only and takes no lock unless
 * asked, and writes to a segment only with --locked or --repair.
 */
#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "layout-id.h" /* generated from lib/format/layout.h (Makefile.am) */
#include "shm-inspect.h"

const char *progname = "shm-inspect";

static const char usage_line[] =
	"usage: shm-inspect list|dump|check|watch|rm|gc [OPTIONS] [TARGET]"
	" (--help for more)\n";

static const char help_text[] =
	"Look inside libweblocks' shared-memory segments (one per origin "
	"bucket).\n"
	"\n"
	"  list [--json]        every segment of this user, with its state\n"
	"  dump TARGET [--json] [--locked] [--bucket B] [--partition P]\n"
	"                       header, agents, held and pending locks, who\n"
	"                       blocks whom\n"
	"  check TARGET [--locked] [--repair] [--bucket B] [--partition P]\n"
	"                       check every invariant; --repair reaps dead\n"
	"                       agents and repairs through the library\n"
	"  watch TARGET [-i SECONDS] [-n COUNT] [--locked] [--bucket B]\n"
	"        [--partition P]\n"
	"                       redraw the dump every SECONDS (default 2)\n"
	"  rm TARGET [--force] [--bucket B] [--partition P]\n"
	"                       remove the segment; one in use only with\n"
	"                       --force\n"
	"  gc [--dry-run]       remove every segment no live process uses\n"
	"\n"
	"TARGET is --origin ORIGIN (its bucket \"default\" and partition\n"
	"\"\" unless given), --segment SEGMENT (a file in /dev/shm:\n"
	"wlk" SHM_INSPECT_LAYOUT "-1000-<hash>, /wlk" SHM_INSPECT_LAYOUT
	"-..., or /dev/shm/wlk" SHM_INSPECT_LAYOUT "-...; "
	SHM_INSPECT_LAYOUT " is the\n"
	"segment layout version this build reads), or one of\n"
	"them alone: a SEGMENT if it has no ':' and starts with '/' or with\n"
	"'wlk', digits and '-'; else an ORIGIN. An origin that looks like a\n"
	"segment (\"/srv/app\") needs --origin.\n"
	"Nothing is written to a segment unless --locked or --repair is "
	"given.\n"
	"\n"
	"Exit status: 0 ok; 1 usage error; 2 cannot open (not found,\n"
	"permission, foreign owner) or cannot write the output; 3 segment\n"
	"damaged or inconsistent; 4 incompatible layout version; 5 check\n"
	"found a deadlock; 6 check found locks held by dead processes, or\n"
	"no live process attached (stale); 7 rm: in use, no --force.\n";

enum cmd { CMD_LIST, CMD_DUMP, CMD_CHECK, CMD_WATCH, CMD_RM, CMD_GC };

static const struct {
	const char *name;
	const char *opts; /* the short codes of its options */
} cmds[] = {
	[CMD_LIST] = {"list", "j"},
	[CMD_DUMP] = {"dump", "jLbpos"},
	[CMD_CHECK] = {"check", "LRbpos"},
	[CMD_WATCH] = {"watch", "Lbpinos"},
	[CMD_RM] = {"rm", "Fbpos"},
	[CMD_GC] = {"gc", "N"},
};

/* ---- dump and watch ---- */

/* One dump of @t to stdout; errors go to @err. Returns a library code. */
static int dump_once(const struct target *t, bool json, FILE *err)
{
	struct wlk_inspect_snapshot *s = NULL;
	struct wlk_inspect *in = NULL;
	struct json j;
	int rc;

	rc = open_target(t, &in);
	if (!rc)
		rc = take_snapshot(in, t->flags & WLK_INSPECT_LOCKED, &s);
	wlk_inspect_close(in);
	if (rc) {
		if (err != stderr)
			fputs("error: ", err);
		else
			fprintf(err, "%s: ", progname);
		esc_c(err, t->arg, strlen(t->arg));
		fprintf(err, ": %s (%s)\n", error_text(rc), error_name(rc));
		target_hint(err, t, rc);
		return rc;
	}
	if (json) {
		json_init(&j, stdout);
		json_object(&j, NULL);
		json_str(&j, "format", FORMAT_ID);
		json_str(&j, "command", "dump");
		dump_json(&j, s);
		json_end(&j);
	} else {
		dump_text(stdout, s);
	}
	wlk_inspect_snapshot_free(s);
	return 0;
}

static int flush_stdout(void)
{
	if (fflush(stdout) == 0 && !ferror(stdout))
		return EXIT_OK;
	fprintf(stderr, "%s: cannot write the output: %s\n", progname,
		strerror(errno));
	return EXIT_OPEN;
}

static int cmd_dump(const struct target *t, bool json)
{
	int rc = dump_once(t, json, stderr);

	if (rc)
		return exit_status(rc);
	return flush_stdout();
}

static volatile sig_atomic_t stop;

/* A second interrupt ends a watch stuck in a --locked snapshot. */
static void on_stop(int sig)
{
	(void)sig;
	if (stop)
		_exit(EXIT_OK);
	stop = 1;
}

static void nap(double seconds)
{
	struct timespec ts = {
		.tv_sec = (time_t)seconds,
		.tv_nsec = (long)((seconds - (double)(time_t)seconds) * 1e9),
	};

	/* A signal cuts it short; the loop then looks at stop. */
	nanosleep(&ts, NULL);
}

static int cmd_watch(const struct target *t, double interval,
		     unsigned long count)
{
	/* Restarting, so that an interrupted write is not an error;
	 * nanosleep() returns early whatever the flag says. */
	struct sigaction sa = {.sa_handler = on_stop, .sa_flags = SA_RESTART};
	bool tty = isatty(STDOUT_FILENO);

	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	for (unsigned long n = 0; !stop; n++) {
		time_t now = time(NULL);
		char when[64] = "?";
		struct tm tm;
		int rc;

		if (localtime_r(&now, &tm))
			strftime(when, sizeof(when), "%Y-%m-%d %H:%M:%S", &tm);
		if (tty)
			fputs("\033[H\033[2J", stdout);
		else if (n)
			fputc('\n', stdout);
		printf("==== every %gs: shm-inspect dump ", interval);
		esc_c(stdout, t->arg, strlen(t->arg));
		printf(" ==== %s\n", when);
		/* Errors go in the frame: the human is looking there. */
		rc = dump_once(t, false, stdout);
		if (flush_stdout())
			return EXIT_OPEN;
		if (count && n + 1 >= count)
			return exit_status(rc);
		if (!stop)
			nap(interval);
	}
	return EXIT_OK;
}

/* ---- the command line ---- */

static int usage(const char *why, const char *what)
{
	if (why)
		fprintf(stderr, "%s: %s%s\n", progname, why, what ? what : "");
	fputs(usage_line, stderr);
	return EXIT_USAGE;
}

static const struct option long_opts[] = {
	{"json", no_argument, NULL, 'j'},
	{"locked", no_argument, NULL, 'L'},
	{"repair", no_argument, NULL, 'R'},
	{"bucket", required_argument, NULL, 'b'},
	{"partition", required_argument, NULL, 'p'},
	{"origin", required_argument, NULL, 'o'},
	{"segment", required_argument, NULL, 's'},
	{"interval", required_argument, NULL, 'i'},
	{"count", required_argument, NULL, 'n'},
	{"force", no_argument, NULL, 'F'},
	{"dry-run", no_argument, NULL, 'N'},
	{"help", no_argument, NULL, 'h'},
	{"version", no_argument, NULL, 'V'},
	{NULL, 0, NULL, 0},
};

static int help(void)
{
	fputs(usage_line, stdout);
	fputs(help_text, stdout);
	return flush_stdout();
}

static int version(void)
{
	printf("shm-inspect (libweblocks) %s, segment layout %s, JSON format "
	       "%s\n", PACKAGE_VERSION, SHM_INSPECT_LAYOUT, FORMAT_ID);
	return flush_stdout();
}

/*
 * The option getopt_long() just refused, for the message: a long one is
 * the element before optind (of @v, the vector getopt saw); a short one
 * is in optopt.
 */
static const char *opt_text(char **v)
{
	static char buf[3];
	const char *last = v[optind - 1];

	if (!strncmp(last, "--", 2) || optopt <= 0 || optopt > 0x7e)
		return last;
	buf[0] = '-';
	buf[1] = (char)optopt;
	return buf;
}

static const char *opt_name(int c)
{
	static char buf[32];

	for (size_t i = 0; long_opts[i].name; i++)
		if (long_opts[i].val == c)
			snprintf(buf, sizeof(buf), "--%s", long_opts[i].name);
	return buf;
}

const char *segment_base(const char *arg)
{
	if (!strncmp(arg, "/dev/shm/", 9))
		return arg + 9;
	return arg[0] == '/' ? arg + 1 : arg;
}

/* "wlk<digits>-" first: how every segment's file name starts. */
static bool segment_named(const char *name)
{
	size_t digits;

	if (strncmp(name, "wlk", 3) != 0)
		return false;
	digits = strspn(name + 3, "0123456789");
	return digits > 0 && name[3 + digits] == '-';
}

/*
 * The documented rule: no ':' (every serialized origin has one, segment
 * names never do), and '/' or "wlk<digits>-" first.
 */
static bool looks_like_segment(const char *arg)
{
	if (strchr(arg, ':'))
		return false;
	return arg[0] == '/' || segment_named(arg);
}

/*
 * A SEGMENT that did not open because it is no segment name, or that was
 * taken for one by its leading '/' alone: it may have been meant as an
 * origin (the library accepts "/srv/app"). Say what a SEGMENT is, and how
 * to give an origin.
 */
void target_hint(FILE *f, const struct target *t, int rc)
{
	const char *base = segment_base(t->arg);

	if (!t->segment)
		return;
	if (rc == WLK_EINVAL)
		fprintf(f, "%s: a SEGMENT is a file in /dev/shm: NAME, /NAME "
			   "or /dev/shm/NAME\n", progname);
	if (t->guessed && !segment_named(base) &&
	    (rc == WLK_EINVAL || rc == -ENOENT))
		fprintf(f, "%s: taken for a SEGMENT by its leading '/'; for an "
			   "ORIGIN, use --origin\n", progname);
}

struct args {
	enum cmd cmd;
	struct target t;
	bool json, repair, force, dry_run;
	unsigned int targets; /* given by --origin and --segment */
	double interval;
	unsigned long count;
};


static int parse_number(const char *s, double *d)
{
	char *end;

	errno = 0;
	*d = strtod(s, &end);
	return errno || end == s || *end ? -1 : 0;
}

/* One option of a command; EXIT_OK or EXIT_USAGE. */
static int take_option(struct args *a, int c, const char *arg)
{
	double d;

	switch (c) {
	case 'j':
		a->json = true;
		return EXIT_OK;
	case 'L':
		a->t.flags |= WLK_INSPECT_LOCKED;
		return EXIT_OK;
	case 'R':
		a->repair = true;
		return EXIT_OK;
	case 'F':
		a->force = true;
		return EXIT_OK;
	case 'N':
		a->dry_run = true;
		return EXIT_OK;
	case 'b':
		a->t.mo.bucket = arg;
		return EXIT_OK;
	case 'p':
		a->t.mo.partition = arg;
		return EXIT_OK;
	case 'o':
	case 's':
		if (a->targets++)
			return usage("give one --origin or --segment", NULL);
		a->t.arg = arg;
		a->t.segment = c == 's';
		return EXIT_OK;
	case 'i':
		/* The comparisons also turn away NaN and infinities. */
		if (parse_number(arg, &d) || !(d >= 0.01 && d <= 86400))
			return usage("interval must be 0.01 to 86400 seconds: ",
				     arg);
		a->interval = d;
		return EXIT_OK;
	default: /* 'n' */
		if (parse_number(arg, &d) || !(d >= 1 && d <= 1e9) ||
		    d != (double)(unsigned long)d)
			return usage("count must be a positive integer: ",
				     arg);
		a->count = (unsigned long)d;
		return EXIT_OK;
	}
}

static int parse(int argc, char **argv, struct args *a)
{
	size_t i;
	int c;

	for (i = 0; i < sizeof(cmds) / sizeof(cmds[0]); i++)
		if (!strcmp(argv[1], cmds[i].name))
			break;
	if (i == sizeof(cmds) / sizeof(cmds[0]))
		return usage("unknown command: ", argv[1]);
	a->cmd = (enum cmd)i;
	a->interval = 2;
	opterr = 0;
	while ((c = getopt_long(argc - 1, argv + 1, ":hi:n:b:p:", long_opts,
				NULL)) != -1) {
		if (c == 'h' || c == 'V')
			exit(c == 'h' ? help() : version());
		if (c == '?' || c == ':')
			return usage(c == '?' ? "unknown option: " :
						"option needs a value: ",
				     opt_text(argv + 1));
		if (!strchr(cmds[a->cmd].opts, c))
			return usage("option not valid for this command: ",
				     opt_name(c));
		if (take_option(a, c, optarg))
			return EXIT_USAGE;
	}
	argc -= optind + 1;
	argv += optind + 1;
	if (a->cmd == CMD_LIST || a->cmd == CMD_GC)
		return argc ? usage("list and gc take no argument", NULL)
			    : EXIT_OK;
	if (a->targets && argc)
		return usage("a TARGET after --origin or --segment: ", argv[0]);
	if (!a->targets && argc != 1)
		return usage("expected one ORIGIN or SEGMENT", NULL);
	if (!a->targets) {
		a->t.arg = argv[0];
		a->t.segment = looks_like_segment(argv[0]);
		a->t.guessed = true;
	}
	if (a->t.segment && (a->t.mo.bucket || a->t.mo.partition))
		return usage("--bucket and --partition go with an ORIGIN",
			     NULL);
	return EXIT_OK;
}

int main(int argc, char **argv)
{
	struct args a = {0};
	int rc;

	if (argc < 2)
		return usage(NULL, NULL);
	if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))
		return argc == 2 ? help() : usage("--help comes alone", NULL);
	if (!strcmp(argv[1], "--version"))
		return argc == 2 ? version() : usage("--version comes alone",
						     NULL);
	rc = parse(argc, argv, &a);
	if (rc)
		return rc;
	guard_init();
	switch (a.cmd) {
	case CMD_LIST:
		return cmd_list(a.json);
	case CMD_DUMP:
		return cmd_dump(&a.t, a.json);
	case CMD_CHECK:
		return cmd_check(&a.t, a.repair);
	case CMD_RM:
		return cmd_rm(&a.t, a.force);
	case CMD_GC:
		return cmd_gc(a.dry_run);
	default:
		return cmd_watch(&a.t, a.interval, a.count);
	}
}
