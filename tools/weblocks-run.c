/* SPDX-License-Identifier: MIT */
/*
 * weblocks-run.c - run a command while holding a weblocks lock, as
 * flock(1) does with a file lock: for shell scripts and cron jobs.
 *
 *   weblocks-run [--shared] [--if-available | --timeout SECONDS] [--steal]
 *                [--bucket B] [--partition P] [--quiet]
 *                ORIGIN NAME [--] COMMAND [ARG...]
 *
 * The wrapper takes the lock, forks and runs the command, waits for it,
 * releases the lock and exits with the command's status. The lock belongs
 * to the wrapper, not to the command: a lock of this library ends when its
 * process execs, so the command (which execs, and may exec again) could
 * never hold it itself. The wrapper stays in between, forwards the usual
 * termination and job signals to the command, and when it dies, however
 * it dies, the library releases the lock; the command then gets SIGTERM
 * (PR_SET_PDEATHSIG), so that it does not go on unprotected.
 */
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <weblocks.h>

/*
 * Exit codes of the wrapper itself (documented in weblocks-run(1) and
 * --help). Anything else is the command's: its exit status, or 128 + the
 * signal that killed it, as a shell reports it. The two "lock not taken"
 * codes are distinct from each other and from 1, which commands use most:
 * 75 is sysexits' EX_TEMPFAIL ("try again later"), 124 what timeout(1)
 * returns when its time runs out; 125-127 follow env(1) and timeout(1).
 */
enum {
	EXIT_UNAVAILABLE = 75, /* --if-available, and the lock was taken */
	EXIT_TIMEDOUT = 124,   /* --timeout passed before the grant */
	EXIT_FAILED = 125,     /* usage, or the library refused */
	EXIT_CANNOT_EXEC = 126,
	EXIT_NOT_FOUND = 127,
	EXIT_SIGNAL_BASE = 128,
};

#define NS_PER_S 1e9

/*
 * The signals passed on to the command: termination, user and window
 * signals. Job control is left alone: a terminal's SIGTSTP stops the whole
 * process group, the wrapper with it, as the shell expects of its job (a
 * wrapper that caught it would keep running with its command stopped).
 * SIGKILL and SIGSTOP cannot be caught; SIGCHLD is the wrapper's own.
 */
static const int forwarded[] = {
	SIGHUP, SIGINT, SIGQUIT, SIGTERM, SIGUSR1, SIGUSR2, SIGALRM, SIGWINCH,
};
#define N_FORWARDED (sizeof(forwarded) / sizeof(forwarded[0]))

static const char usage_line[] =
	"usage: weblocks-run [--shared] [--if-available | --timeout SECONDS]"
	" [--steal]\n"
	"                    [--bucket B] [--partition P] [--quiet]\n"
	"                    ORIGIN NAME [--] COMMAND [ARG...]\n";

static const char help_text[] =
	"Run COMMAND while holding the weblocks lock NAME of ORIGIN's bucket\n"
	"(exclusive unless --shared), as flock(1) does with a file. The lock\n"
	"is held by weblocks-run itself, so it stays held if COMMAND execs;\n"
	"it is released when COMMAND exits, or when weblocks-run dies.\n"
	"\n"
	"  -s, --shared           a shared lock (LockMode \"shared\")\n"
	"  -n, --if-available     do not wait: exit 75 if it is not free\n"
	"  -w, --timeout SECONDS  wait at most SECONDS (decimals allowed)\n"
	"      --steal            take it from its holders (exclusive only)\n"
	"  -b, --bucket B         storage bucket (default \"default\")\n"
	"  -p, --partition P      storage partition (default \"\")\n"
	"  -q, --quiet            no message when the lock is not taken\n"
	"\n"
	"HUP INT QUIT TERM USR1 USR2 ALRM WINCH are passed on to COMMAND.\n"
	"If weblocks-run dies, COMMAND gets SIGTERM.\n"
	"\n"
	"Exit status: COMMAND's (128 + N if signal N killed it); 75 the lock\n"
	"was not free (--if-available); 124 --timeout passed; 125 usage error\n"
	"or the library refused; 126 COMMAND cannot run; 127 COMMAND not\n"
	"found.\n";

static volatile sig_atomic_t child_pid;

/* Runs in the wrapper only once the child exists (the signals are blocked
 * until then); kill() is async-signal-safe. */
static void forward(int sig)
{
	int saved = errno;

	if (child_pid > 0)
		kill((pid_t)child_pid, sig);
	errno = saved;
}

static int fail(const char *what, int err)
{
	fprintf(stderr, "weblocks-run: %s: %s (%s)\n", what,
		wlk_strerror(err), wlk_error_name(err));
	return EXIT_FAILED;
}

static int usage(void)
{
	fputs(usage_line, stderr);
	return EXIT_FAILED;
}

/* Seconds as a decimal number, > 0, to nanoseconds. */
static int parse_timeout(const char *s, uint64_t *ns)
{
	char *end;
	double v;

	errno = 0;
	v = strtod(s, &end);
	if (errno || end == s || *end || !(v > 0) || !isfinite(v) ||
	    v * NS_PER_S >= (double)UINT64_MAX)
		return -1;
	*ns = (uint64_t)(v * NS_PER_S);
	if (*ns == 0)
		*ns = 1;
	return 0;
}

/* The child: the signal mask and dispositions the wrapper inherited, a
 * SIGTERM when the wrapper dies, then the command. Only async-signal-safe
 * calls and exec (the library's threads are not in this process). */
static void run_child(char **cmd, const sigset_t *mask)
{
	size_t i;
	int code;

	for (i = 0; i < N_FORWARDED; i++)
		signal(forwarded[i], SIG_DFL);
	prctl(PR_SET_PDEATHSIG, SIGTERM);
	sigprocmask(SIG_SETMASK, mask, NULL);
	execvp(cmd[0], cmd);
	code = errno == ENOENT ? EXIT_NOT_FOUND : EXIT_CANNOT_EXEC;
	dprintf(STDERR_FILENO, "weblocks-run: %s: %s\n", cmd[0],
		strerror(errno));
	_exit(code);
}

/* Fork and run @cmd, forwarding signals until it ends; its status. */
static int run(char **cmd)
{
	struct sigaction sa;
	sigset_t block, old;
	pid_t pid;
	int status;
	size_t i;

	/* Handlers go in before the fork, with the signals blocked, so that
	 * none that arrives around the fork is lost or kills the wrapper
	 * while the child lives. */
	sigemptyset(&block);
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = forward;
	sa.sa_flags = SA_RESTART;
	sigemptyset(&sa.sa_mask);
	for (i = 0; i < N_FORWARDED; i++)
		sigaddset(&block, forwarded[i]);
	sigprocmask(SIG_BLOCK, &block, &old);
	for (i = 0; i < N_FORWARDED; i++)
		sigaction(forwarded[i], &sa, NULL);

	pid = fork();
	if (pid < 0) {
		perror("weblocks-run: fork");
		return EXIT_FAILED;
	}
	if (pid == 0)
		run_child(cmd, &old);
	child_pid = pid;
	sigprocmask(SIG_SETMASK, &old, NULL);

	while (waitpid(pid, &status, 0) < 0) {
		if (errno != EINTR) {
			perror("weblocks-run: waitpid");
			return EXIT_FAILED;
		}
	}
	if (WIFSIGNALED(status))
		return EXIT_SIGNAL_BASE + WTERMSIG(status);
	return WEXITSTATUS(status);
}

static const struct option long_opts[] = {
	{"shared", no_argument, NULL, 's'},
	{"if-available", no_argument, NULL, 'n'},
	{"timeout", required_argument, NULL, 'w'},
	{"steal", no_argument, NULL, 'S'},
	{"bucket", required_argument, NULL, 'b'},
	{"partition", required_argument, NULL, 'p'},
	{"quiet", no_argument, NULL, 'q'},
	{"help", no_argument, NULL, 'h'},
	{"version", no_argument, NULL, 'V'},
	{NULL, 0, NULL, 0},
};

int main(int argc, char **argv)
{
	struct wlk_manager_options mo = WLK_MANAGER_OPTIONS_INIT;
	struct wlk_options o = WLK_OPTIONS_INIT;
	struct wlk_manager *m;
	struct wlk_lock *lock;
	const char *origin, *name;
	bool quiet = false;
	int c, err, code;

	/* '+': options end at ORIGIN, so COMMAND's own options are its. */
	while ((c = getopt_long(argc, argv, "+snw:b:p:qh", long_opts,
				NULL)) != -1) {
		switch (c) {
		case 's':
			o.mode = WLK_SHARED;
			break;
		case 'n':
			o.if_available = true;
			break;
		case 'w':
			if (parse_timeout(optarg, &o.timeout_ns)) {
				fprintf(stderr, "weblocks-run: --timeout: "
					"not a number of seconds > 0: %s\n",
					optarg);
				return usage();
			}
			break;
		case 'S':
			o.steal = true;
			break;
		case 'b':
			mo.bucket = optarg;
			break;
		case 'p':
			mo.partition = optarg;
			break;
		case 'q':
			quiet = true;
			break;
		case 'h':
			fputs(usage_line, stdout);
			fputs(help_text, stdout);
			return fflush(stdout) ? EXIT_FAILED : 0;
		case 'V':
			printf("weblocks-run (libweblocks) %s\n",
			       wlk_version_string());
			return fflush(stdout) ? EXIT_FAILED : 0;
		default:
			return usage();
		}
	}
	if (o.if_available && o.timeout_ns) {
		fputs("weblocks-run: --if-available and --timeout exclude "
		      "each other\n", stderr);
		return usage();
	}
	if (argc - optind < 3)
		return usage();
	origin = argv[optind++];
	name = argv[optind++];
	if (strcmp(argv[optind], "--") == 0 && ++optind == argc)
		return usage();

	err = wlk_manager_open(origin, &mo, &m);
	if (err)
		return fail(origin, err);
	err = wlk_acquire(m, name, WLK_NUL_TERMINATED, &o, &lock);
	if (err || !lock) {
		wlk_manager_close(m);
		if (err == WLK_ETIMEDOUT) {
			if (!quiet)
				fprintf(stderr, "weblocks-run: %s: timed out\n",
					name);
			return EXIT_TIMEDOUT;
		}
		if (!err) {
			if (!quiet)
				fprintf(stderr, "weblocks-run: %s: not "
					"available\n", name);
			return EXIT_UNAVAILABLE;
		}
		return fail(name, err);
	}

	code = run(argv + optind);

	err = wlk_release(lock);
	if (err == WLK_ESTOLEN)
		fprintf(stderr, "weblocks-run: %s: the lock was stolen while "
			"the command ran\n", name);
	else if (err)
		fail(name, err);
	wlk_manager_close(m);
	return code;
}
