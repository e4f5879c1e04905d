/*
 * standalone.c: a main() for the fuzz targets without libFuzzer, so that
 * any compiler (gcc, with or without sanitizers) can replay a corpus as a
 * regression test.  Each argument is a file or a directory whose files are
 * fed, in name order, to LLVMFuzzerTestOneInput(); a failed invariant
 * aborts, so the exit status says whether every input passed.
 *
 *	fuzz_ipc tests/fuzz/corpus/ipc [more files or directories]
 */
#include <sys/stat.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <unistd.h>

#include "fuzz.h"

/* The whole file, in a buffer of exactly its size (1 byte if empty). */
static uint8_t *
read_file(const char *path, size_t *lenp)
{
	struct stat st;
	uint8_t *buf = NULL;
	size_t len = 0;
	ssize_t n;
	int fd;

	if ((fd = open(path, O_RDONLY | O_CLOEXEC)) == -1 ||
	    fstat(fd, &st) == -1 ||
	    (buf = malloc(st.st_size > 0 ? (size_t)st.st_size : 1)) == NULL)
		goto fail;
	while (len < (size_t)st.st_size) {
		if ((n = read(fd, buf + len, (size_t)st.st_size - len)) == -1 &&
		    errno == EINTR)
			continue;
		if (n <= 0)
			goto fail;
		len += (size_t)n;
	}
	close(fd);
	*lenp = len;
	return buf;
fail:
	fprintf(stderr, "%s: %s\n", path, strerror(errno));
	if (fd != -1)
		close(fd);
	free(buf);
	return NULL;
}

static int
run_file(const char *path)
{
	uint8_t *buf;
	size_t len;

	if ((buf = read_file(path, &len)) == NULL)
		return -1;
	LLVMFuzzerTestOneInput(buf, len);
	free(buf);
	return 0;
}

static int
not_hidden(const struct dirent *d)
{
	return d->d_name[0] != '.';
}

/* Every file of dir; returns how many ran, or -1. */
static long
run_dir(const char *dir)
{
	struct dirent **names;
	char path[4096];
	long ran = 0;
	int n;

	if ((n = scandir(dir, &names, not_hidden, alphasort)) == -1) {
		fprintf(stderr, "%s: %s\n", dir, strerror(errno));
		return -1;
	}
	for (int i = 0; i < n; i++) {
		snprintf(path, sizeof(path), "%s/%s", dir, names[i]->d_name);
		if (ran != -1 && run_file(path) == 0)
			ran++;
		else
			ran = -1;
		free(names[i]);
	}
	free(names);
	return ran;
}

int
main(int argc, char *argv[])
{
	struct stat st;
	const char *prog;
	long ran = 0, n;

	for (int i = 1; i < argc; i++) {
		if (stat(argv[i], &st) == -1) {
			fprintf(stderr, "%s: %s\n", argv[i], strerror(errno));
			return 1;
		}
		n = S_ISDIR(st.st_mode) ? run_dir(argv[i]) :
		    run_file(argv[i]) == 0 ? 1 : -1;
		if (n == -1)
			return 1;
		ran += n;
	}
	prog = argc > 0 && strrchr(argv[0], '/') != NULL ?
	    strrchr(argv[0], '/') + 1 : argc > 0 ? argv[0] : "fuzz";
	printf("ok %s: %ld inputs\n", prog, ran);
	return 0;
}
