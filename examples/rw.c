/* SPDX-License-Identifier: MIT */
/*
 * rw.c - readers and a writer of one file: readers take the lock shared
 * (many at once), the writer exclusive (alone, after the readers ahead of
 * it, and before the readers that come after it: writers never starve).
 *
 *     cc rw.c $(pkg-config --cflags --libs weblocks) -o rw
 *     ./rw write notes.txt "first line"
 *     ./rw read notes.txt & ./rw read notes.txt & ./rw write notes.txt more
 */
#include <stdio.h>
#include <string.h>
#include <weblocks.h>

struct job {
	const char *path, *text;
};

static int do_read(struct wlk_lock *lock, void *arg)
{
	const struct job *j = arg;
	char line[256];
	FILE *f = fopen(j->path, "r");

	(void)lock;
	if (!f) {
		perror(j->path);
		return 1;
	}
	while (fgets(line, sizeof(line), f))
		fputs(line, stdout);
	fclose(f);
	return 0;
}

static int do_write(struct wlk_lock *lock, void *arg)
{
	const struct job *j = arg;
	FILE *f = fopen(j->path, "a");

	(void)lock;
	if (!f) {
		perror(j->path);
		return 1;
	}
	/* No reader sees the file while this runs: the lock is exclusive. */
	fprintf(f, "%s\n", j->text);
	return fclose(f) ? 1 : 0;
}

int main(int argc, char **argv)
{
	struct wlk_options o = WLK_OPTIONS_INIT;
	struct job j = {0};
	struct wlk_manager *m;
	wlk_callback cb;
	int err;

	if (argc == 3 && !strcmp(argv[1], "read")) {
		o.mode = WLK_SHARED;
		cb = do_read;
	} else if (argc == 4 && !strcmp(argv[1], "write")) {
		o.mode = WLK_EXCLUSIVE;
		cb = do_write;
		j.text = argv[3];
	} else {
		fprintf(stderr, "usage: rw read FILE | rw write FILE TEXT\n");
		return 2;
	}
	j.path = argv[2];
	err = wlk_manager_open("https://rw.example", NULL, &m);
	if (!err) {
		/* The lock's name is the file's: one queue per file. */
		err = wlk_request(m, j.path, WLK_NUL_TERMINATED, &o, cb, &j);
		wlk_manager_close(m);
	}
	if (err < 0)
		fprintf(stderr, "rw: %s\n", wlk_strerror(err));
	return err ? 1 : 0;
}
