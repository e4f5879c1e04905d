/*
 * notify-sink PATH SECONDS: play systemd's side of sd_notify(3): bind a
 * datagram socket at PATH and print every message received, one per line,
 * for SECONDS seconds.  Used by notify-test.sh.
 */
#include <sys/socket.h>
#include <sys/un.h>

#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

int
main(int argc, char **argv)
{
	struct sockaddr_un sun = { .sun_family = AF_UNIX };
	char buf[4096];
	time_t end;
	int fd;

	if (argc != 3 || strlen(argv[1]) >= sizeof(sun.sun_path)) {
		fprintf(stderr, "usage: notify-sink PATH SECONDS\n");
		return 2;
	}
	memcpy(sun.sun_path, argv[1], strlen(argv[1]) + 1);
	if ((fd = socket(AF_UNIX, SOCK_DGRAM, 0)) == -1 ||
	    bind(fd, (struct sockaddr *)&sun, sizeof(sun)) == -1) {
		perror("notify-sink");
		return 1;
	}
	setvbuf(stdout, NULL, _IOLBF, 0);
	end = time(NULL) + atoi(argv[2]);
	while (time(NULL) < end) {
		struct pollfd pfd = { fd, POLLIN, 0 };
		ssize_t n;

		if (poll(&pfd, 1, 100) == 1 &&
		    (n = recv(fd, buf, sizeof(buf) - 1, 0)) > 0) {
			buf[n] = '\0';
			for (char *p = strtok(buf, "\n"); p; p = strtok(NULL, "\n"))
				printf("%s\n", p);
		}
	}
	close(fd);
	unlink(argv[1]);
	return 0;
}
